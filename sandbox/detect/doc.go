// Package detect finds a run's boundaries: the accesses the sandbox
// refused the command, exactly (which path and access, or which host and
// port).
//
// It owns three things. Hub is a process's one reader of kernel audit
// records, and Audit is one run's share of it: the Hub gives each run
// the Landlock records of its own domain only (the helper announces its
// domain with a deliberate denial before the command and marks the end
// with another after it), and each run counts what it lost, charged with
// every loss the Hub cannot attribute to another run. Observer answers the seccomp user notifications of the
// run's filter and names the exact path (or destination) each observed
// call tried; observing never enforces, the kernel does, with one
// exception: in a run with its own network namespace the observer makes
// every connect itself, and a pathname unix socket is reached only when
// the run's own namespace has a socket bound to it (connect_linux.go);
// and a call of a class the filter refuses by design (seccomp.Refused:
// netlink, raw sockets, new namespaces, ptrace, mounts) is failed with the
// filter's own errno and counted by class (Refused), never let through.
// judge.go, which
// does no I/O, decides from sandboxd's own copy of the policy which
// observed intents the sandbox refused, which records are boundaries and
// which noise (reads by the run's landlock.Carveout, the value its
// ruleset enforces), and merges the denials that are the same one
// (boundary.Key).
//
// It is used by the supervisor (package sandbox), and by the helper for
// OpenDiag alone. Of sandboxd's packages it imports only boundary, kernelaudit,
// landlock, netdest, pathtree, publicerr and seccomp; it names denials in the
// boundary vocabulary (Surface, Operation) and never touches the grant
// store or a request. It must never import sandbox/confine, broker, review/...,
// session, netproxy, openai-go or an HTTP client.
package detect
