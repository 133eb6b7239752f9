package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
)

// run's own failures are one line on stderr and exit 125.
func TestRunBadInput(t *testing.T) {
	for _, args := range [][]string{{"run"}, {"run", "--frob", "--", "true"}, {"run", "--workspace", "/", "--", "true"}} {
		var stderr bytes.Buffer
		code := run(context.Background(), args, func(k string) string {
			if k == "HOME" {
				return t.TempDir()
			}
			return ""
		}, strings.NewReader(""), io.Discard, &stderr, nil)
		if code != exitSandboxd {
			t.Errorf("%q: exit %d, want %d", args, code, exitSandboxd)
		}
		if strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%q: stderr %q is not one line", args, stderr.String())
		}
	}
}
