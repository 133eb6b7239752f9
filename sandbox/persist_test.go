package sandbox

import (
	"github.com/sandboxd/sandboxd/persist"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

func TestSafeGitConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		text string
		want bool
	}{
		{"git init", "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n", true},
		{"user and remote", "[user]\n\tname = x\n[remote \"origin\"]\n\turl = https://example.org/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n", true},
		{"sha256", "[extensions]\n\tobjectformat = sha256\n", true},
		{"fsmonitor", "[core]\n\tfsmonitor = touch /tmp/x\n", false},
		{"hooksPath", "[core]\n\thooksPath = .h\n", false},
		{"pager", "[core]\n\tpager = sh -c x\n", false},
		{"worktree config", "[extensions]\n\tworktreeConfig = true\n", false},
		{"alias", "[alias]\n\tst = !sh\n", false},
		{"filter", "[filter \"x\"]\n\tclean = sh\n", false},
		{"include", "[include]\n\tpath = ../x\n", false},
		{"credential", "[credential]\n\thelper = !sh\n", false},
		{"section with trailing key", "[core] fsmonitor = x\n", false},
		{"core.worktree", "[core]\n\tworktree = ..\n", false},
		{"remote without name", "[remote]\n\turl = x\n", false},
		{"initialized submodule", "[submodule \"sub\"]\n\turl = https://example.org/s.git\n\tactive = true\n", true},
		{"recursive clone", "[submodule]\n\tactive = .\n[submodule \"sub\"]\n\turl = /srv/sub\n", true},
		{"submodule section key", "[submodule]\n\tfetchJobs = 4\n", false},
		{"submodule update command", "[submodule \"sub\"]\n\tupdate = !sh\n", false},
		{"submodule ext url", "[submodule \"sub\"]\n\turl = ext::sh -c x\n", false},
		{"submodule other key", "[submodule \"sub\"]\n\tpath = x\n", false},
	} {
		if got := safeGitConfig(tc.text); got != tc.want {
			t.Errorf("%s: safeGitConfig = %v, want %v", tc.name, got, tc.want)
		}
	}
}

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

	p, err := planPersistence(&Spec{Workspace: ws, Protected: []string{".vscode", ".envrc"}}, nil)
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
	done, err := p.sweep(q)
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
	if err := persist.SaveScan(f, p.scan); err != nil || persist.LoadScan(f) == nil {
		t.Errorf("the scan after a first run was not saved (%v)", err)
	}
}

func TestSkeletonDirs(t *testing.T) {
	base := t.TempDir()
	// t.TempDir's own parent is private; open the path above base.
	os.Chmod(filepath.Dir(base), 0o755)
	locked := filepath.Join(base, "locked")
	os.MkdirAll(filepath.Join(locked, "home", "ws"), 0o755)
	os.Chmod(locked, 0o700)
	open := filepath.Join(base, "open", "ws")
	os.MkdirAll(open, 0o755)
	os.Chmod(base, 0o755)
	got := skeletonDirs([]string{filepath.Join(locked, "home", "ws"), open}, 100000, 100000)
	if !reflect.DeepEqual(got, []string{locked}) {
		t.Fatalf("skeletonDirs = %q, want [%s]", got, locked)
	}
	// A target below another target is reached through it.
	got = skeletonDirs([]string{filepath.Join(locked, "home"), filepath.Join(locked, "home", "ws")}, 100000, 100000)
	if !reflect.DeepEqual(got, []string{locked}) {
		t.Fatalf("nested: skeletonDirs = %q, want [%s]", got, locked)
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

// The workspace's git files are written by the sandboxed command: their
// parsers must never panic, whatever they hold.
func FuzzGitConfig(f *testing.F) {
	for _, s := range []string{
		"[core]\n\thooksPath = x\n", "[include]\npath=\"a\"", "[", "]", "[core \"x\"] a=b", "\x00[user]\nname=\xff",
		"[remote \"o\"]\nurl = ext::sh -c x\n", "gitdir: ../x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		safeGitConfig(text)
	})
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:              "/plain",
		`/with\040space`:      "/with space",
		`/tab\011and\134back`: "/tab\tand\\back",
		`/short\04`:           `/short\04`,
		`/not\999octal`:       `/not\999octal`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}
