//go:build !failpoints

package main

// crashAt is no failpoint: a sandboxd built without -tags failpoints
// has none any environment or request could name.
func crashAt(func(string) string) string { return "" }
