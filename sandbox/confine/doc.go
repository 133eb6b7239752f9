// Package confine is the helper side of a sandboxed run: the process
// sandboxd re-executes itself as (`sandboxd __sandbox-init`, as runc's
// `init`), or starts the lean binary cmd/sandboxd-helper as, which becomes
// pid 1 of the run's namespaces. Either way it acts on nothing of a setup
// from a sandboxd of another build (wire's build stamp).
//
// It owns everything that happens inside those namespaces before and
// while the command runs: receiving the setup from the supervisor over
// the control socket (package wire), building the mount namespace
// (read-only tree, private /tmp, /proc and /dev, the id-mapped or cloned
// writable roots, the copy-on-write layer, granted files, pinned and
// read-only persistence paths), bringing loopback up, setting rlimits,
// dropping every capability, restricting itself with Landlock, installing
// the seccomp filter and handing its listener over, joining the cgroup,
// starting the command, forwarding signals to it, reaping orphans, and
// killing what is left before it reports the exit status. It also holds
// doctor's namespace probe child (ProbeMain), the other re-exec'd entry.
//
// The name says what the package does to its own process: it confines
// it, then runs the command under that confinement. It is the only place
// that calls signal.Notify for the command's tree; it runs in a process
// of its own and exits with the command, so it may change process-wide
// state (threads, signals, credentials) the supervisor never may.
//
// Of sandboxd's packages it imports only envlist, landlock, pathtree, publicerr,
// sandbox/detect, sandbox/internal/wire and seccomp. Of detect it uses
// OpenDiag alone: the sock_diag socket must be opened inside the run's
// network namespace, so the helper opens it and hands it over. It must
// never import sandbox (the supervisor), broker, review/..., session or
// netproxy. cmd/sandboxd and cmd/sandboxd-helper dispatch to
// IsHelper/Main and IsProbe/ProbeMain first thing; a test binary that calls sandbox.Run
// must do the same in its TestMain.
package confine
