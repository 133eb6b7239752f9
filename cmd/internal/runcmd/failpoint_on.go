//go:build failpoints

package runcmd

// CrashAt is the commit failpoint the crash tests name in
// SANDBOXD_TEST_CRASH_AT: sandboxd kills itself with SIGKILL at that
// point of a commit (see layer.Options.CrashAt). Only a binary built
// with -tags failpoints (the integration tests build one) reads it.
func CrashAt(getenv func(string) string) string { return getenv("SANDBOXD_TEST_CRASH_AT") }
