// Package daemon is `sandboxd serve`: one root daemon per machine that
// serves its API (JSON over HTTP, versioned under /v1; routes.go lists
// every endpoint) on a unix socket, and the client the CLI and adapters
// use to reach it. An exec runs through session.Runner for the caller:
// its ids from the kernel, its environment, directory and umask from the
// request (HOME must be its own), streamed back as NDJSON, ended with
// the client's connection. What the run connects to for the caller
// (its proxy's upstream and resolver, the model reviewer) session
// connects to as the caller (session/dial.go, fsid.Dialer): a host
// firewall's owner rules see the caller's uid, not the daemon's.
//
// Callers are identified by the kernel, never by what they say: the
// peer's credentials when it connected (SO_PEERCRED, SO_PEERGROUPS) and,
// through a pidfd (SO_PEERPIDFD), whether it runs inside a sandbox (a pid
// namespace below the daemon's), which is refused, as is the daemon
// itself. The second factor is a token file per uid, readable by that
// uid only, in a directory no sandboxed command can see (Tokens). A
// client checks the socket before it sends anything (TrustedSocket): a
// socket of root's, reached only through directories root alone may
// write.
//
// Questions for a person live in one queue (Questions): an exec's person
// slot puts each there, sends it on the stream when the client relays
// questions, and asks it on the terminal the client passed over the
// socket when that is the client's controlling terminal; the first
// answer wins. An API client's answer is source client, which allows
// only what a reviewer may. The approvals page (package approvals,
// Config.Page) answers from the same queue as source page, a person's;
// the daemon issues its one-time links (POST /v1/approvals/link).
//
// Nothing of a daemon outlives it but its record of the commits it has
// in flight (Commits): a restarted daemon writes new tokens, holds no
// grant of the old one, and recovers each recorded commit, as its
// caller, before it serves anyone.
//
// The wire's types are package client's (daemon/client), the lean
// client the front links; they are aliased here. An exec whose request
// asks for text gets each event rendered as `sandboxd run` prints it
// (runtext), so a client that links none of session's types prints the
// same bytes.
//
// Of sandboxd's packages it imports only boundary, broker, daemon/client,
// fsid, grants, layer, publicerr, review, runtext, session and
// termfilter.
package daemon
