// Package wire is what the two sides of a sandboxed run agree on: the
// supervisor (package sandbox) and the re-exec'd helper (package
// confine). It holds the helper's argv markers and control socket fd,
// the messages sent over that SOCK_SEQPACKET socket (one JSON object per
// packet, descriptors attached with SCM_RIGHTS) with Send and Receiver,
// the few rules both sides apply the same way (which of the helper's own
// tmpfs a path lies in, and which mount a granted file gets), and the
// build stamp by which a helper knows a sandboxd of its own build.
//
// Of sandboxd's packages it imports none, and of others only the
// standard library and golang.org/x/sys/unix, so that neither side
// depends on the other.
package wire
