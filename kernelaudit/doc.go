// Package kernelaudit talks to the kernel's audit subsystem over NETLINK_AUDIT:
// it turns auditing on for as long as some sandboxd run needs Landlock's
// denial records, restores what it changed when the last such run ends,
// and reads the records from the audit multicast group.
//
// Kernel audit is machine-wide. One holder at a time changes it: holders
// take a lock in /run/sandboxd/kaudit, the first one records the original settings in a
// state file before it changes anything, each holder keeps a lock on a
// file of its own while it runs, and the last to leave — or the next to
// arrive after a crash, or a daemon when it starts (Recover) — restores
// the recorded settings. Only the
// enabled flag and the backlog limit are ever changed; audit rules,
// which an auditd may rely on, are never touched.
//
// Residual effects, also in the README: processes started while audit
// is enabled keep syscall auditing until they exit, and without an audit
// daemon the kernel writes records to its log (rate-limited).
//
// This package knows nothing of sandboxes or reviewers. Of sandboxd's
// packages it imports only atomicfile.
package kernelaudit
