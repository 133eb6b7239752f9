// Package integration holds black-box tests of the built sandboxd binary.
// Every case runs against real processes, sockets, files and namespaces,
// as root and again as the unprivileged user "sandboxd-test" (created by
// `make test` and .ci/run), and asserts an effect — a file unchanged, a
// listener that received nothing, a process still alive, a canary string
// nowhere — never only an exit status.
//
// The tests run in parallel (t.Parallel) where they share nothing: each
// has its own directories, homes and listeners on port 0. A test stays
// serial, with a "Serial:" comment saying why, when its assertions
// depend on timing (a window during the run, a deadline, a measured
// duration, a terminal read a fixed time after a run), when it looks at
// machine-wide state (processes, kernel audit), or when it shares a host
// resource with others (the test interface 10.254.254.1, root's real
// home). Serial tests run first, alone; the parallel ones after them.
// The corpus tests share one workspace per identity and take turns with
// it; heavy toolchain runs (cold-cache Go builds, go test -race, a venv)
// take turns through heavyBuild, since their time limits were set for
// running one at a time.
//
// Of sandboxd's packages it imports none, and neither do its tests: they
// know sandboxd only as a binary.
package integration
