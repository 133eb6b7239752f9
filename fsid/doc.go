// Package fsid does file-system work for a caller with the caller's own
// file-system identity, so that the kernel, not sandboxd, decides what
// the caller may read, write, create or open.
//
// A long-lived sandboxd serves many users from one root process. Whether
// a caller may use a workspace, a policy file, a writable root or a
// state directory must then be what the kernel allows that caller — its
// uid, its groups, ACLs, LSMs, immutable bits — never what the root
// process can open, and files sandboxd creates for a caller must be the
// caller's. Do runs a function on an OS thread of its own whose fsuid,
// fsgid, supplementary groups and umask are the caller's; the thread is
// never returned to the Go runtime, so no other goroutine ever runs with
// those credentials. TakeGroups is for the thread that starts a process
// whose Credential names the caller: it sets only the groups the child
// inherits, and keeps the rights the parent needs to write the child's
// id maps.
//
// Dialer opens network connections for a caller the same way: the
// socket is created inside Do, so the kernel records the caller as its
// owner (the socket's uid, which nftables' meta skuid matches and
// /proc/net/tcp shows, and the socket file's credentials, which
// iptables' owner match reads), and a host firewall's per-user rules
// apply to what sandboxd connects to for that caller as they would to
// the caller's own programs. Only the socket(2) needs the caller's
// ids; the connect then waits on the runtime's poller like any other.
// It lives here, not in a package of its own, because which thread
// runs with whose ids is this package's alone to decide. What it does
// not carry: the socket's cgroup and LSM label are the daemon's, and
// root-only socket options stay settable by sandboxd itself (never by
// the caller, who never holds the descriptor).
//
// The package owns the process's own identity: it is the one place
// below cmd/ that compares a caller's ids with the thread's
// (internal/guardrails enforces it). Of sandboxd's packages it imports
// none.
package fsid
