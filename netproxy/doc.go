// Package netproxy is the egress proxy of one sandboxed run: the only
// way out of the run's network namespace. Every destination is a
// decision taken while the connection waits; nothing is forwarded
// before an allow, and anything uncertain refuses.
//
// # What it owns
//
// The listener side (authentication, request parsing, limits), the
// stub resolver and the captured connections, the one path every way
// in goes through (Proxy.open: decide, count, dial through the permit,
// refuse in the way in's own words; plain HTTP takes its decision half,
// Proxy.permitFor), the pinned dial and the byte relay, the refusal
// responses and the counters. It
// asks a Decider (decider.go) and knows nothing of rules, reviewers,
// models or grant storage. Of sandboxd's packages it imports only
// netdest: the one home of what a destination is, which this package
// only calls. It must never import broker, review/..., grants, policy or
// openai-go. session adapts the broker to Decider.
//
// # The way in
//
// The helper creates a TCP listening socket on 127.0.0.1:PORT inside
// the run's network namespace and hands the descriptor to the
// supervisor over the control socket (SCM_RIGHTS); the supervisor's
// proxy accepts on it. No host port is opened, so no other local user
// or run can reach it; each run's namespace has its own. For the run's
// own loopback (a dev server the command started) the supervisor gets
// fresh unconnected sockets made inside the namespace and connects them
// itself. sandbox/ does that plumbing; this package takes a
// net.Listener (Serve) and an inside Dialer.
//
// # Capture and the stub resolver
//
// Tools that ignore the proxy variables connect straight to an
// address. sandbox/confine installs, in the run's namespace, a local
// route for every address on lo and an nf_tables TPROXY rule for TCP to
// anything but 127/8 and ::1, which hands the SYN to one transparent
// listener per family (at a port the helper picks, which no variable
// of the command names, though /proc/net/tcp inside shows it: a connect
// straight to it is refused as malformed); the accepted socket's
// local address is where the command connected. ServeCapture decides
// it like a CONNECT to that destination (open, with ViaCapture),
// dials through the permit and relays it as a tunnel; a refusal resets
// the connection, since a raw connection has nowhere to put a reason.
// Alternatives measured (the capture probe, 2 vCPU, p50 of a new
// connection with its first byte back): direct loopback 100-150 µs,
// route + TPROXY within that noise, NAT REDIRECT + SO_ORIGINAL_DST
// 30-80 µs more (a nat table turns conntrack on for every connection,
// the run's own loopback too). TPROXY needs neither conntrack nor NAT,
// works in an unprivileged user's namespace, and takes one port.
//
// A captured connection to port 80 is read as plain HTTP instead of
// tunnelled blind (serveCapturedHTTP): every request on it is decided on
// its own, and its Host (and an absolute URI, if it sends one) must name
// the destination the connection was made to.
//
// # SOCKS5
//
// ServeSOCKS serves the run's SOCKS5 endpoint (port + 2 inside):
// CONNECT only, IPv4, IPv6 or a name, which the proxy resolves after an
// allow (socks5h), decided and dialled by the same open as a CONNECT.
// It takes no authentication, since only the run can reach it and
// OpenBSD nc -X 5 offers none; a client offering only username/password
// must give the run's credential. A refusal is reply 2 (not allowed by
// ruleset); an allowed destination that cannot be reached, 5 or 4
// (socksAnswer).
//
// Names: ServeDNS is the run's resolver (127.0.0.1:53 inside). It gives
// each valid host name an address of its own from 198.18.0.0/15 for the
// proxy's life and never asks a real resolver, so a lookup leaks
// nothing; a captured connection to a stub address is decided as the
// name behind it, and resolved (by the proxy, after an allow) like any
// CONNECT. An address of the range the stub never gave is refused
// without a decision. See stubdns.go for the answers.
//
// Clients authenticate with Proxy-Authorization: Basic
// base64("sandboxd:"+token), compared in constant time; anything else
// is 407. The token is never logged.
//
// # Decisions
//
// Decisions are on what the client named: the CONNECT authority
// ("host:port", nothing else) or the absolute-form URI of a plain HTTP
// request ("http://host[:port]/..."; https must use CONNECT). Origin
// form, other schemes, userinfo, fragments, percent-encoded hosts and
// malformed ports are 400. The Host header must name the same
// normalised destination (it is read from the raw request head, since
// net/http drops it), and what goes upstream is Host: <destination>,
// so a request cannot be decided for one host and routed to another. A
// request carrying both Content-Length and Transfer-Encoding is 400.
// Every request on a kept-alive connection is decided on its own.
//
// A name is resolved once, by the proxy, and only after Decide allowed
// it: a denied name, or one still under review, never reaches a
// resolver. The addresses it resolved to go to Decider.Resolved before
// anything is dialled. The dial is pinned: the only dialer that can
// reach the network dials exactly one of the checked addresses (never a
// new lookup, never another address), carries a one-dial permit issued
// by decide, and refuses without one. The plain-HTTP transport's
// DialContext and the CONNECT dial are that dialer; the transport never
// reads the proxy process's own HTTP(S)_PROXY and never dials TLS.
// The socket itself comes from Config.Dial, which the default resolver
// uses for its queries too: a daemon makes every connection of a
// caller's run as that caller (session gives it fsid.Dialer), so a host
// firewall's owner rules see the caller, never root.
// Addresses for
// which Config.Reserved reports true (sandboxd's own listeners), and
// cloud metadata endpoints (netdest.Metadata, by name or address), are
// never dialled, whatever the decider says.
//
// Decisions are run-scoped by default (ScopeRun): the final verdict
// and addresses for a destination are cached for the proxy's life,
// concurrent connections to one destination wait on one pending
// decision, a cached deny is answered without asking again, and every
// connection still spends a grant use (Decider.Use). ScopeConnection
// asks for every connection. Failures that are not verdicts (a lookup
// error, a panicking decider, the proxy closing) are not cached.
//
// A destination on loopback is first tried on the run's own loopback
// through the inside Dialer; if something listens there, that
// connection is used with no decision: it never leaves the namespace.
//
// # Timeouts and limits
//
// See Limits: request head read time and size, connections open at
// once (beyond it a new connection is closed at once), idle kept-alive
// connections, idle tunnels (no bytes either way), upstream dial, the
// longest a connection waits for a decision (Hold; then 403 "no
// decision in time"), and the client bytes read while parked
// (EarlyBytes, a backstop). While a connection is parked nothing reads
// from the client beyond net/http's own 4 KiB buffer: early tunnel
// bytes wait there and in the kernel's socket buffer (which stops the
// client), and are replayed upstream, once, after an allow. A request
// whose client half-closed right after sending it (nc -N) is still
// decided and answered. A protocol switch (101) the client asked for is
// relayed as a tunnel (counted, closed when idle); one it did not ask
// for is a 502. A body the origin cuts short is cut short for the
// client (the connection is aborted, never ended as if complete).
// Upstream plain-HTTP connections are not reused: each request dials
// with its own permit.
//
// # Counters
//
// Counters reports connections by "decision/source" ("allow/policy",
// "deny/hard-deny", "allow/inside", "deny/auth", "deny/malformed",
// "deny/timeout", "error/unreachable", ...), bytes each way (tunnels
// and plain HTTP bodies), the total time connections were parked
// waiting for a decision, and how many Decide calls were made.
//
// # No TLS interception
//
// Tunnels are opaque byte streams. The proxy never terminates TLS, has
// no CA, and cannot see the SNI or anything inside; domain fronting
// inside TLS is outside what it can decide.
//
// # Why not goproxy
//
// It was built on github.com/elazarl/goproxy first, with every default
// replaced (its env-derived transport proxy, its CONNECT dialers, its
// accept-every-CONNECT default, its MITM CA). What was left of it was
// the relay, and its package init parses the built-in CA's RSA key on
// every start of the binary: 0.96 ms, paid by the CLI and again by the
// re-exec'd helper of every command, where a run that makes no
// connection may pay the proxy 0.5 ms at most. The handler (forward.go)
// is net/http's server, a hijacked CONNECT relayed by relay, and a
// forwarded request through the permit transport.
package netproxy
