package integration

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestBoundarySecretRead: a denied read of a secret is reported exactly
// (surface, operation, path), once however often it was tried, with who
// decided; the agent is told on stderr. Exact reports come from kernel
// audit, which needs root; an unprivileged run says which detector ran.
func TestBoundarySecretRead(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		secret := filepath.Join(e.home, ".ssh", "id_rsa")
		r := e.sh("cat ~/.ssh/id_rsa; cat ~/.ssh/id_rsa; head -c1 ~/.ssh/id_rsa; echo END")
		if !strings.Contains(r.stdout, "END") {
			t.Fatalf("command did not run\n%s", r)
		}
		e.noCanary(t, r)
		det, _ := r.report["detection"].(map[string]any)
		bs, _ := r.report["boundaries"].([]any)
		if !e.id.root() {
			if det["detector"] != "none" || det["why"] == "" {
				t.Fatalf("unprivileged detection: %v", det)
			}
			return
		}
		if det["detector"] != "audit" {
			t.Fatalf("detection: %v", det)
		}
		var hits []map[string]any
		for _, b := range bs {
			m := b.(map[string]any)
			if m["path"] == secret {
				hits = append(hits, m)
			}
		}
		if len(hits) != 1 {
			t.Fatalf("want exactly one boundary for %s, got %v\n%s", secret, bs, r)
		}
		b := hits[0]
		for k, want := range map[string]any{"surface": "filesystem", "operation": "read_file", "decision": "deny", "source": "hard-deny", "attempt": float64(1)} {
			if b[k] != want {
				t.Errorf("boundary %s = %v, want %v", k, b[k], want)
			}
		}
		if !strings.Contains(r.stderr, "sandboxd: denied read_file "+secret) || !strings.Contains(r.stderr, "will be denied too") {
			t.Errorf("no denial block on stderr\n%s", r)
		}
	})
}

// TestBoundaryNothingDenied: a run that crosses nothing reports nothing
// (the run's own probes of its audit domain are not boundaries).
func TestBoundaryNothingDenied(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		r := e.sh("echo hi > f && cat f").mustSucceed(t)
		if bs, _ := r.report["boundaries"].([]any); len(bs) != 0 {
			t.Fatalf("boundaries for a clean run: %v", bs)
		}
		if strings.Contains(r.stderr, "sandboxd: denied") {
			t.Fatalf("denial block for a clean run\n%s", r)
		}
	})
}
