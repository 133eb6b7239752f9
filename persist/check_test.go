package persist

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

// tree writes files (content) and, for names ending in "/", directories;
// "name -> target" makes a symlink.
func tree(t *testing.T, root string, entries map[string]string) {
	t.Helper()
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(root, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch v := entries[n]; {
		case n[len(n)-1] == '/':
			os.MkdirAll(p, 0o755)
		case len(v) > 3 && v[:3] == "-> ":
			if err := os.Symlink(v[3:], p); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

const head = "ref: refs/heads/main\n"

func TestScanIncremental(t *testing.T) {
	ws := t.TempDir()
	m := NewMatcher(Builtin())
	tree(t, ws, map[string]string{"a/b/c/": "", "x/.git/objects/": "", "bare/objects/": "", "bare/refs/": "", "bare/HEAD": head})
	first, err := ScanWorkspace(ws, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := first.WithMark(".git"); !reflect.DeepEqual(got, []string{"x"}) {
		t.Fatalf(".git entries in %q", got)
	}
	if _, ok := first.Dirs["x/.git"]; ok {
		t.Fatalf("a .git directory's insides were scanned")
	}
	if _, ok := first.Dirs["bare/objects"]; ok {
		t.Fatalf("a bare repository's insides were scanned")
	}
	// A repository created deep down, with the parent's times set back,
	// is still found from the previous scan (ctime cannot be set back).
	deep := filepath.Join(ws, "a/b/c")
	st, _ := os.Stat(deep)
	os.MkdirAll(filepath.Join(deep, ".git"), 0o755)
	os.Chtimes(deep, st.ModTime(), st.ModTime())
	second, err := ScanWorkspace(ws, m, first)
	if err != nil {
		t.Fatal(err)
	}
	if got := second.WithMark(".git"); !reflect.DeepEqual(got, []string{"a/b/c", "x"}) {
		t.Fatalf("after the change: %q", got)
	}
	// A remembered scan survives a round trip through the state file, and
	// is not trusted for other names.
	f := filepath.Join(t.TempDir(), "scan.gob")
	second.MarkFresh()
	if err := SaveScan(f, second); err != nil {
		t.Fatal(err)
	}
	loaded := LoadScan(f)
	if loaded == nil || !reflect.DeepEqual(loaded.Dirs, second.Dirs) {
		t.Fatalf("scan did not round-trip")
	}
	other := NewMatcher(Names([]string{"secret.sh"}))
	if loaded.Key == other.key() {
		t.Fatalf("a scan for other names has the same key")
	}
	if LoadScan(filepath.Join(t.TempDir(), "missing")) != nil {
		t.Fatalf("a missing scan file loaded")
	}
}

func TestRepos(t *testing.T) {
	ws := t.TempDir()
	tree(t, ws, map[string]string{
		".git/HEAD": head, ".git/objects/": "", ".git/refs/": "",
		".git/worktrees/wt/HEAD": head, ".git/worktrees/wt/commondir": "../..\n",
		".git/modules/a/b/HEAD": head, ".git/modules/a/b/objects/": "", ".git/modules/a/b/refs/": "",
		"sub/.git":       "gitdir: ../.git/modules/a/b\n",
		"named.git/HEAD": head, "named.git/objects/": "", "named.git/refs/": "",
		"nohead/objects/": "", "nohead/refs/": "",
		"tools/HEAD": head, "tools/refs/": "", "tools/objects": "-> ../.git/objects",
		"fresh/.git/": "",
	})
	s, err := ScanWorkspace(ws, NewMatcher(Builtin()), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range s.Repos(ws, Host{}) {
		rel, _ := filepath.Rel(ws, r.GitDir)
		got = append(got, r.At+" "+rel)
	}
	sort.Strings(got)
	want := []string{
		" .git", " .git/worktrees/wt",
		"fresh fresh/.git", // a .git directory counts before git init fills it
		"named.git named.git", "sub .git/modules/a/b", "tools tools",
	}
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("repos\n got %q\nwant %q", got, want)
	}
}

func TestNamed(t *testing.T) {
	ws := t.TempDir()
	tree(t, ws, map[string]string{
		".envrc": "x", "a/.vscode/tasks.json": "x", "a/x.code-workspace": "x",
		"b/mise/config.toml": "x", "b/mise/other": "x", "AGENTS.md": "x", ".github/copilot-instructions.md": "x",
		".github/workflows/ci.yml": "x", "src/main.go": "x",
	})
	m := NewMatcher(Builtin())
	s, err := ScanWorkspace(ws, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := s.Named(ws, m)
	want := []string{".envrc", ".github/copilot-instructions.md", "AGENTS.md", "a/.vscode", "a/x.code-workspace", "b/mise/config.toml"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Named\n got %q\nwant %q", got, want)
	}
}

// Roles: files a start repository's config (or the caller's) makes
// hooks or config, wherever they lie.
func TestRoles(t *testing.T) {
	ws := t.TempDir()
	home := t.TempDir()
	tree(t, ws, map[string]string{
		".git/HEAD": head, ".git/objects/": "", ".git/refs/": "",
		".git/config":      "-> ../shared/gitconfig",
		"shared/gitconfig": "[include]\n\tpath = extra.cfg\n[core]\n\thooksPath = tools/hooks\n",
		"shared/extra.cfg": "[user]\n\tname = x\n",
		"tools/hooks/":     "",
		// A worktree-style git directory whose common directory (no HEAD)
		// holds the config and hooks.
		"wt/.git":                     "gitdir: ../store/worktrees/w\n",
		"store/worktrees/w/HEAD":      head,
		"store/worktrees/w/commondir": "../..\n",
		"store/objects/":              "",
		"store/refs/":                 "",
		"store/config":                "[user]\n\tname = y\n",
		"store/hooks/":                "",
	})
	global := filepath.Join(home, ".gitconfig")
	os.WriteFile(global, []byte("[core]\n\thooksPath = .githooks\n"), 0o644)
	s, _ := ScanWorkspace(ws, NewMatcher(Builtin()), nil)
	c := NewChecker(Config{Workspace: ws, Final: Host{}, Before: Host{}, Names: NewMatcher(Builtin()),
		StartRepos: s.Repos(ws, Host{}), Home: home, GlobalConfigs: []string{global}})
	got := map[string]RoleKind{}
	for _, r := range c.Roles() {
		rel, _ := filepath.Rel(ws, r.Path)
		got[rel] = r.Kind
	}
	for rel, kind := range map[string]RoleKind{
		// A relative include is relative to the file as git opened it
		// (.git/config), not to the symlink's target.
		"shared/gitconfig": ConfigFile, ".git/extra.cfg": ConfigFile, "tools/hooks": HooksPath,
		".git/hooks": HooksDir, "store/config": ConfigFile, "store/hooks": HooksDir, ".githooks": HooksPath,
	} {
		if k, ok := got[rel]; !ok || k != kind {
			t.Errorf("role of %s = %v (%v), want %v; all: %v", rel, k, ok, kind, got)
		}
	}
	for _, tc := range []struct {
		rel    string
		k      Change
		refuse bool
	}{
		{"shared/gitconfig", Symlink, true},
		{".git/extra.cfg", Symlink, true},
		{"shared/extra.cfg", File, false},
		{"tools/hooks/pre-commit", File, true},
		{"store/hooks/post-checkout", File, true},
		{"store/hooks/post-checkout.sample", File, false},
		{".githooks/pre-push", File, true},
		{"wt/.githooks/pre-push", File, true},
		{"src/x", File, false},
	} {
		if v := c.Check(tc.rel, tc.k); (v.Action == Refuse) != tc.refuse {
			t.Errorf("Check(%s) = %v (%s), want refused=%v", tc.rel, v.Action, v.Why, tc.refuse)
		}
	}
}

func TestMode(t *testing.T) {
	ws := t.TempDir()
	tree(t, ws, map[string]string{
		".git/HEAD": head, ".git/objects/": "", ".git/refs/": "", ".git/config": "[core]\n\tbare = false\n",
		"shared/HEAD": head, "shared/objects/": "", "shared/refs/": "", "shared/config": "[core]\n\tsharedRepository = group\n",
	})
	c := NewChecker(Config{Workspace: ws, Final: Host{}, Before: Host{}, Names: NewMatcher(Builtin()), Umask: 0o022})
	for _, tc := range []struct {
		rel    string
		mode   uint32
		before *Info
		want   uint32
	}{
		{"new", 0o666, nil, 0o644},                       // the umask
		{"new-dir", 0o1777, nil, 0o1755},                 // sticky kept, umask applied
		{"old", 0o666, &Info{Mode: 0o644}, 0o644},        // no gained write
		{"old-shared", 0o664, &Info{Mode: 0o664}, 0o664}, // had it before
		{"old-x", 0o755, &Info{Mode: 0o644}, 0o755},      // other bits change freely
		{".git", 0o777, &Info{Mode: 0o755}, 0o755},
		{".git/config", 0o666, &Info{Mode: 0o664}, 0o644}, // never writable by others in a git directory
		{".git/hooks/x", 0o777, nil, 0o755},
		{"shared/objects/ab", 0o775, nil, 0o775}, // sharing allows group write whatever the umask, as git does
		{"shared/objects/cd", 0o777, nil, 0o775}, // never other write
		{"shared/config", 0o664, &Info{Mode: 0o664}, 0o664},
		{"shared/config", 0o666, &Info{Mode: 0o664}, 0o664}, // group only
	} {
		typ := uint32(0o100000)
		if tc.rel == ".git" || tc.rel == "new-dir" {
			typ = 0o040000
		}
		if got, _ := c.Mode(tc.rel, typ|tc.mode, tc.before); got != tc.want {
			t.Errorf("Mode(%s, %o) = %o, want %o", tc.rel, tc.mode, got, tc.want)
		}
	}
}
