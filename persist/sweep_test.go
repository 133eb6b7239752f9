package persist

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

func TestPlanPersistence(t *testing.T) {
	ws := t.TempDir()
	mk := func(p string) {
		full := filepath.Join(ws, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte("x"), 0o644)
	}
	mk(".git/config")
	os.MkdirAll(filepath.Join(ws, ".git/objects"), 0o755)
	os.MkdirAll(filepath.Join(ws, ".git/refs"), 0o755)
	mk(".vscode/settings.json")
	mk("lib/vendor/.git/config")
	mk("bare/config")
	os.WriteFile(filepath.Join(ws, "bare/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "bare/objects"), 0o755)
	os.MkdirAll(filepath.Join(ws, "bare/refs"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git/config"), []byte("[core]\n\thooksPath = tools/hooks\n"), 0o644)
	mk("tools/hooks/pre-commit")

	p, err := PlanSweep(SweepSpec{Workspace: ws, Protected: []string{".vscode", ".envrc"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".git/hooks", ".git/config", ".vscode", "lib/vendor/.git/hooks",
		"lib/vendor/.git/config", "tools/hooks", "bare/hooks", "bare/config"} {
		if !contains(p.readOnly, want) {
			t.Errorf("read-only list lacks %s: %q", want, p.readOnly)
		}
	}
	for _, want := range []string{".git", "lib", "lib/vendor", "lib/vendor/.git", "tools", "bare"} {
		if !contains(p.pins, want) {
			t.Errorf("pins lack %s: %q", want, p.pins)
		}
	}
	// Parents come before children so each pin lands on a pinned parent.
	pos := map[string]int{}
	for i, x := range p.pins {
		pos[x] = i
	}
	if pos["lib"] > pos["lib/vendor"] || pos["lib/vendor"] > pos["lib/vendor/.git"] {
		t.Errorf("pins out of order: %q", p.pins)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git/hooks")); err != nil {
		t.Errorf("a missing .git/hooks should be created empty: %v", err)
	}

	// After "the run": a new .envrc, a new nested repository with a
	// hook, and a redirect in the existing repository are quarantined; a
	// plain new repository is kept.
	mk(".envrc")
	mk("sub/.git/config")
	os.WriteFile(filepath.Join(ws, "sub/.git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	mk("sub/.git/hooks/pre-commit")
	os.MkdirAll(filepath.Join(ws, "sub/.git/objects"), 0o755)
	os.MkdirAll(filepath.Join(ws, "sub/.git/refs"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git/commondir"), []byte("../evil\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "plain/.git"), 0o755)
	os.WriteFile(filepath.Join(ws, "plain/.git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "plain/.git/config"), []byte("[core]\n\tbare = false\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "plain/.git/objects"), 0o755)
	os.MkdirAll(filepath.Join(ws, "plain/.git/refs"), 0o755)
	q := filepath.Join(t.TempDir(), "q")
	done, err := p.Run(q)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range done {
		if r.Action == "quarantined" {
			paths = append(paths, r.Path)
		}
	}
	sort.Strings(paths)
	want := []string{".envrc", ".git/commondir", "sub/.git"}
	if !reflect.DeepEqual(paths, want) {
		t.Fatalf("swept %q, want %q", paths, want)
	}
	for _, p := range want {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s is still in the workspace", p)
		}
		if _, err := os.Lstat(filepath.Join(q, p)); err != nil {
			t.Errorf("%s is not in quarantine: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "plain/.git/config")); err != nil {
		t.Errorf("a plain new repository was removed: %v", err)
	}
	// The plan had no memory, so the scan after the run must be saved.
	f := filepath.Join(t.TempDir(), "scan.gob")
	if err := SaveScan(f, p.scan); err != nil || LoadScan(f) == nil {
		t.Errorf("the scan after a first run was not saved (%v)", err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestSweepSaplingOnGit: Sapling on a git repository takes its config
// (hooks, extensions) from .git/sl, which gitRule refuses a change to; a
// run without a layer binds one that exists and takes out one it makes.
func TestSweepSaplingOnGit(t *testing.T) {
	for _, existing := range []bool{false, true} {
		ws := t.TempDir()
		for _, d := range []string{".git/objects", ".git/refs", "lib/.git/objects", "lib/.git/refs", "lib/.git/sl"} {
			os.MkdirAll(filepath.Join(ws, d), 0o755)
		}
		for _, g := range []string{".git", "lib/.git"} {
			os.WriteFile(filepath.Join(ws, g, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
			os.WriteFile(filepath.Join(ws, g, "config"), []byte("[core]\n\tbare = false\n"), 0o644)
		}
		if existing {
			os.MkdirAll(filepath.Join(ws, ".git/sl"), 0o755)
		}
		p, err := PlanSweep(SweepSpec{Workspace: ws}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !contains(p.ReadOnly(), "lib/.git/sl") || contains(p.ReadOnly(), ".git/sl") != existing {
			t.Fatalf("existing %v: read-only list %q", existing, p.ReadOnly())
		}
		if existing {
			continue // bound read-only for the run: nothing to sweep
		}
		os.MkdirAll(filepath.Join(ws, ".git/sl"), 0o755)
		os.WriteFile(filepath.Join(ws, ".git/sl/config"), []byte("[hooks]\npre-status = touch MARK\n"), 0o644)
		done, err := p.Run(filepath.Join(t.TempDir(), "q"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(ws, ".git/sl")); err == nil {
			t.Fatalf("a new .git/sl stayed in the workspace: %v", done)
		}
	}
}
