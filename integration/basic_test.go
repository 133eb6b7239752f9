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
	t.Parallel()
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

// TestWorkspaceUnderTmp: the sandbox's /tmp is its own tmpfs, yet a
// workspace below the host's /tmp (behind a directory only its owner can
// search, as mktemp makes them) is still the real one.
func TestWorkspaceUnderTmp(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		base, err := os.MkdirTemp("/tmp", "sandboxd-it-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeAll(base) })
		os.Chmod(base, 0o711)
		private := filepath.Join(base, "private")
		os.Mkdir(private, 0o700)
		e.chown(private)
		ws := filepath.Join(private, "ws")
		os.Mkdir(ws, 0o755)
		e.chown(ws)
		r := e.sandboxdOpts(runOpts{dir: ws}, "run", "-c", "echo under-tmp > f.txt; pwd")
		if r.code != 0 {
			t.Fatalf("run in a workspace under /tmp failed\n%s", r)
		}
		if b, err := os.ReadFile(filepath.Join(ws, "f.txt")); err != nil || string(b) != "under-tmp\n" {
			t.Fatalf("the write did not reach the host workspace: %q %v\n%s", b, err, r)
		}
	})
}

// TestHomeUnderTmp: a HOME below the host's /tmp must not make its
// secrets readable through the rule that opens the sandbox's private /tmp.
func TestHomeUnderTmp(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		base, err := os.MkdirTemp("/tmp", "sandboxd-it-home-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeAll(base) })
		os.Chmod(base, 0o755)
		home := filepath.Join(base, "home")
		os.Mkdir(home, 0o700)
		e.chown(home)
		e.writeFile(filepath.Join(home, ".ssh", "id_rsa"), e.canary+"\n", 0o600)
		r := e.sandboxdOpts(runOpts{env: []string{"HOME=" + home}}, "run", "-c",
			"cat ~/.ssh/id_rsa; cat "+filepath.Join(home, ".ssh", "id_rsa")+"; echo END")
		if !strings.Contains(r.stdout, "END") {
			t.Fatalf("command did not run\n%s", r)
		}
		e.noCanary(t, r)
	})
}
