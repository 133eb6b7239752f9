package session

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

func TestResolveWorkspaceRefuses(t *testing.T) {
	home := t.TempDir()
	ws := filepath.Join(home, "proj")
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	link := filepath.Join(t.TempDir(), "etc-link")
	os.Symlink("/etc", link)
	c := Caller{Home: home, ConfigHome: filepath.Join(home, ".config"), StateHome: filepath.Join(home, ".local", "state"), Cwd: ws}
	for _, bad := range []string{"/", "/etc", "/usr/lib", home, filepath.Dir(home), link,
		filepath.Join(home, "missing"), filepath.Join(home, ".local", "state", "sandboxd")} {
		if bad == filepath.Join(home, ".local", "state", "sandboxd") {
			os.MkdirAll(bad, 0o755)
		}
		if _, err := resolveWorkspace(bad, c); err == nil {
			t.Errorf("workspace %s was accepted", bad)
		}
	}
	got, err := resolveWorkspace(ws, c)
	if err != nil || got.root != ws || got.from != fromFlag {
		t.Fatalf("resolveWorkspace(%s) = %+v, %v", ws, got, err)
	}
}

// TestDiscoverWorkspace: with no --workspace, the workspace is the git
// repository's top level, else the nearest .sandboxd.toml's directory,
// unless that root is refused; the working directory stays.
func TestDiscoverWorkspace(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	base, _ := filepath.EvalSymlinks(t.TempDir())
	home := filepath.Join(base, "home")
	mk := func(p string) string {
		t.Helper()
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gitInit := func(dir string) {
		t.Helper()
		if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v %s", err, out)
		}
	}
	repo := mk(filepath.Join(home, "src", "repo"))
	gitInit(repo)
	deep := mk(filepath.Join(repo, "a", "b"))
	os.WriteFile(filepath.Join(repo, "a", workspaceFile), nil, 0o644)
	plain := mk(filepath.Join(home, "src", "plain", "x", "y"))
	os.WriteFile(filepath.Join(home, "src", "plain", workspaceFile), nil, 0o644)
	nothing := mk(filepath.Join(home, "src", "nothing"))
	// A repository at $HOME (dotfiles) is never the workspace.
	gitInit(home)
	inHome := mk(filepath.Join(home, "notes"))
	// A worktree-style .git file: its directory is the top level.
	wt := mk(filepath.Join(home, "src", "wt", "sub"))
	os.WriteFile(filepath.Join(home, "src", "wt", ".git"), []byte("gitdir: "+filepath.Join(repo, ".git")+"\n"), 0o644)

	c := Caller{UID: os.Getuid(), Home: home, ConfigHome: filepath.Join(home, ".config"), StateHome: filepath.Join(home, ".local", "state")}
	for _, tc := range []struct {
		cwd, root, from string
		note            bool
	}{
		{deep, repo, fromGit, false},
		{repo, repo, fromGit, false},
		{plain, filepath.Join(home, "src", "plain"), fromPolicy, false},
		// The current directory's own .sandboxd.toml counts.
		{filepath.Join(home, "src", "plain"), filepath.Join(home, "src", "plain"), fromPolicy, false},
		{nothing, "", fromCwd, true}, // finds $HOME's repository, refuses it
		{inHome, "", fromCwd, true},
		{wt, filepath.Join(home, "src", "wt"), fromGit, false},
	} {
		c.Cwd = tc.cwd
		w, err := resolveWorkspace("", c)
		want := tc.root
		if want == "" {
			want = tc.cwd
		}
		if err != nil || w.root != want || w.cwd != tc.cwd || w.from != tc.from || (w.note != "") != tc.note {
			t.Errorf("cwd %s: got %+v, %v; want root %s from %s (note %v)", tc.cwd, w, err, want, tc.from, tc.note)
		}
	}
	// Not the caller's: the working directory as before.
	c.Cwd, c.UID = deep, os.Getuid()+1
	if w, err := resolveWorkspace("", c); err != nil || w.root != deep || w.note == "" {
		t.Errorf("someone else's repository: got %+v, %v", w, err)
	}
	// Every .sandboxd.toml from the root down to the working directory applies.
	got := workspacePolicies(repo, deep)
	want := []string{filepath.Join(repo, workspaceFile), filepath.Join(repo, "a", workspaceFile), filepath.Join(deep, workspaceFile)}
	if !slices.Equal(got, want) {
		t.Errorf("workspacePolicies = %v, want %v", got, want)
	}
	// A directory whose name starts with two dots is below the
	// workspace, not above it: its policies apply too.
	dots := filepath.Join(repo, "..x", "b")
	got = workspacePolicies(repo, dots)
	want = []string{filepath.Join(repo, workspaceFile), filepath.Join(repo, "..x", workspaceFile), filepath.Join(dots, workspaceFile)}
	if !slices.Equal(got, want) {
		t.Errorf("workspacePolicies below ..x = %v, want %v", got, want)
	}
	if got := workspacePolicies(repo, filepath.Dir(repo)); !slices.Equal(got, want[:1]) {
		t.Errorf("workspacePolicies above the workspace = %v, want %v", got, want[:1])
	}
}
