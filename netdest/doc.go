// Package netdest is the one home of what a network destination is:
// how a host and port are normalised (so the same value is matched,
// reviewed, reported and dialled), which addresses are not public (the
// SSRF ranges, with their IPv4-mapped, NAT64 and 6to4 embeddings), which
// destinations are cloud metadata endpoints (metadata.go, each entry
// with its source; refused always), and how a `net connect` rule's
// pattern names a destination.
//
// It is pure: no lookups, no sockets, no policy. The proxy (netproxy)
// normalises with it, the broker matches rules and applies the hard
// denies with it. Of sandboxd's packages it imports none.
package netdest
