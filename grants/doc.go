// Package grants issues and consumes exact, expiring, one-use permissions
// for boundary requests (docs/ARCHITECTURE.md §3.4, §3.5).
//
// A Request is hashed over a canonical, length-prefixed encoding of every
// field that stays the same between an attempt and its retry, so a grant
// matches exactly one (session, cwd, command, surface, operation, path,
// resolved path, device, inode, birth time, destination, the addresses
// it resolved to, agent, intent) and nothing that differs in any of
// them. A network destination and its addresses are carried typed
// (netdest.Dest, netip.Addr) as the proxy decided them, and become text
// only in the encoding. A Grant carries a 256-bit random token;
// Consume compares it in constant time, checks session, hash and expiry
// on a monotonic clock, and removes the grant atomically, so of any
// number of racing consumers exactly one wins. A consume attempt that
// presents a real token for another request burns the grant.
//
// The boundary vocabulary a request is named in (Surface, Operation) is
// package boundary's. The package knows nothing of Landlock, the proxy
// or reviewers. Of sandboxd's packages it imports only boundary and
// netdest.
package grants
