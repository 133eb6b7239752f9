package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteInsideAndOutside is the demo's core: a write inside the
// workspace lands, a write outside does not, and the report says how the
// command was contained.
func TestWriteInsideAndOutside(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		target := e.outside("victim.txt", "original\n")
		check := fileUnchanged(t, target)
		r := e.sh("echo inside > inside.txt; echo evil > " + target + "; echo done")
		if !strings.Contains(r.stdout, "done") {
			t.Fatalf("command did not run\n%s", r)
		}
		b, err := os.ReadFile(filepath.Join(e.ws, "inside.txt"))
		if err != nil || string(b) != "inside\n" {
			t.Fatalf("write inside the workspace: %q, %v\n%s", b, err, r)
		}
		check()
		if r.report["isolation"] != "namespaces" || r.report["network_mode"] != "netns" {
			t.Fatalf("report: %v", r.report)
		}
		if abi, _ := r.report["landlock_abi"].(float64); abi < 1 {
			t.Fatalf("report landlock_abi: %v", r.report["landlock_abi"])
		}
		if _, ok := r.report["boundaries"].([]any); !ok {
			t.Fatalf("report boundaries: %v", r.report["boundaries"])
		}
	})
}
