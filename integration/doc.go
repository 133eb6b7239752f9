// Package integration holds black-box tests of the built sandboxd binary.
// Every case runs against real processes, sockets, files and namespaces,
// as root and again as the unprivileged user "sandboxd-test" (created by
// `make test` and .ci/run), and asserts an effect — a file unchanged, a
// listener that received nothing, a process still alive, a canary string
// nowhere — never only an exit status.
package integration
