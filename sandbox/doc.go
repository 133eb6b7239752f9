// Package sandbox is the supervisor side of one sandboxed run: what a
// long-lived process (the CLI today, the daemon later) calls to run one
// command in a sandbox and learn what it did.
//
// It owns, for one Run: the plan (landlock support, the cgroup, the audit
// detector, the granted objects, whether a copy-on-write layer is
// possible); starting the re-exec'd helper (package confine) in the
// run's namespaces and handing it, over the control socket (package
// wire), the id-mapped trees, the Landlock ruleset, the compiled seccomp
// filter and the persistence binds it prepared meanwhile; watching the
// helper (timeout, cancellation, the signals the caller forwards);
// collecting the denials (package detect); and, without a layer, binding
// what package persist's sweep plans and running the sweep after the
// command (the rules and the sweep are persist's; the binds and the
// caller's identity around it are the sandbox's). Doctor probes the same
// things without running a command. Files are named for their part of the
// run: run_linux.go (Run and its steps), helper_start_linux.go,
// setup_linux.go, ruleset_linux.go, supervise_linux.go, denials_linux.go,
// release_linux.go.
//
// Everything Run starts (the helper and the goroutine waiting for it,
// the stream relays, the message reader, the observer, the audit reader,
// the preparation beside the helper's start, every timer) is stopped and
// waited for before it returns, on every path; run_test.go checks it.
// A shared audit reader (Spec.Audit) is the exception by design: Run
// gives back its share, and the reader stops with the last run of the
// process that needs it. So is a process's Releases (Spec.Releases): a
// run whose command has ended, every process of it gone, releases its
// kernel objects (the helper's exit, the cache layers' locks, the
// cgroup) after Run has returned, and Releases.Close waits for them
// (release_linux.go).
//
// The package never calls signal.Notify (the caller decides which
// signals reach the command, through Spec.Signals; the helper is the
// only place that handles signals for the command's tree), never reads
// sandboxd's own environment or working directory (everything comes in
// through the Spec), and never writes to os.Stdout or os.Stderr (the
// command's streams and the cannot-run line go to Spec.Stdout and
// Spec.Stderr; diagnostics to the *slog.Logger).
//
// Of sandboxd's packages it imports only atomicfile, boundary, envlist,
// fsid, kernelaudit, landlock, pathtree, persist, publicerr, sandbox/detect,
// sandbox/internal/wire, seccomp and termfilter. It must never import
// sandbox/confine (the helper, a process of its own), broker,
// review/..., session, netproxy, openai-go or an HTTP client. It names
// denials and exceptions in the boundary vocabulary (Surface,
// Operation), never the grant store or a request.
// internal/guardrails checks all of this, and what the package's code
// refers to (supervisor_test.go).
package sandbox
