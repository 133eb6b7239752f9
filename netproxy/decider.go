package netproxy

import (
	"context"
	"net/netip"

	"github.com/sandboxd/sandboxd/netdest"
)

// Via says how a request came into the proxy. Every way in goes
// through the same decision (Proxy.decide, from Proxy.open).
type Via string

// Ways in.
const (
	ViaConnect Via = "connect" // CONNECT authority (tunnels: https, git over https, ...)
	ViaHTTP    Via = "http"    // absolute-form plain HTTP request
	ViaCapture Via = "capture" // a connection made straight to an address, captured in the namespace
	ViaSOCKS   Via = "socks"   // a SOCKS5 CONNECT
	// ViaCapturedHTTP is a plain-HTTP request on a captured connection to
	// port 80, each request decided on its own.
	ViaCapturedHTTP Via = "capture-http"
)

// Request is what the proxy asks its decider about one destination.
type Request struct {
	// Dest is the normalised destination.
	Dest netdest.Dest
	// Addrs are the addresses the proxy would dial: the literal for an
	// IP destination, what the name resolved to for Resolved; nil when
	// Decide is asked about a name before any lookup.
	Addrs []netip.Addr
	Via   Via
}

// Verdict is a decider's answer.
type Verdict struct {
	Allow bool
	// Source says who decided ("policy", "hard-deny", "reviewer",
	// "human", "client", "no-reviewer", "error", "circuit-breaker", ...).
	Source string
	// Reason is safe to show the command (it goes into the 403 body).
	Reason string
	// Grant is the token an allowed destination's connections present to
	// Use (and, for a name, to Resolved).
	Grant string
	// Once makes a deny hold for this connection only: the next one to
	// the destination is decided again (the decider refused without a
	// boundary, and what it saw may change).
	Once bool
}

// Decider decides destinations for one run's proxy. session adapts the
// broker to it; the proxy never sees rules, reviewers or grant storage.
// Its methods are called from many goroutines at once.
type Decider interface {
	// Decide decides a destination before any lookup: the proxy resolves
	// a name only after an allow, so a denied name or one still under
	// review never reaches a resolver. For an IP destination Addrs holds
	// the address. It may block while a reviewer decides; ctx bounds the
	// hold.
	Decide(ctx context.Context, r Request) Verdict
	// Resolved checks the addresses an allowed name resolved to (r.Addrs)
	// and returns the verdict whose grant covers them; grant is Decide's.
	Resolved(ctx context.Context, r Request, grant string) Verdict
	// Use spends one use of grant for one connection to r (r.Addrs are
	// the addresses it was checked with). An error refuses the
	// connection.
	Use(ctx context.Context, r Request, grant string) error
}
