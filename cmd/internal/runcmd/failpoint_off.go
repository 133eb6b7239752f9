//go:build !failpoints

package runcmd

// CrashAt is no failpoint: a sandboxd built without -tags failpoints
// has none any environment or request could name.
func CrashAt(func(string) string) string { return "" }
