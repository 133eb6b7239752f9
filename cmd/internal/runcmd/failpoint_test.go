//go:build !failpoints

package runcmd

import "testing"

// A release build has no failpoint: whatever the environment names,
// sandboxd never kills itself mid-commit.
func TestNoFailpointWithoutTag(t *testing.T) {
	getenv := func(k string) string {
		if k == "SANDBOXD_TEST_CRASH_AT" {
			return "staged"
		}
		return ""
	}
	if got := CrashAt(getenv); got != "" {
		t.Fatalf("CrashAt = %q in a build without the failpoints tag", got)
	}
}
