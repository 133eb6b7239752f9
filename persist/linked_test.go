package persist

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/gitconfig"
)

// viewFS is the directory root seen at the path ws (the host elsewhere):
// the workspace as it was, next to the real one.
type viewFS struct{ ws, root string }

func (v viewFS) at(p string) string {
	if p == v.ws {
		return v.root
	}
	if rel, ok := strings.CutPrefix(p, v.ws+"/"); ok {
		return v.root + "/" + rel
	}
	return p
}

func (v viewFS) Lstat(p string) (Info, error)                 { return Host{}.Lstat(v.at(p)) }
func (v viewFS) Readlink(p string) (string, error)            { return Host{}.Readlink(v.at(p)) }
func (v viewFS) ReadFile(p string, limit int) ([]byte, error) { return Host{}.ReadFile(v.at(p), limit) }
func (v viewFS) Searchable(p string, i Info) bool             { return Host{}.Searchable(v.at(p), i) }
func (v viewFS) ReadDir(p string) ([]string, error)           { return Host{}.ReadDir(v.at(p)) }

// layeredFS is the final tree (the host's) with what differs from the
// tree before as its layer, the way a commit sees an overlay.
type layeredFS struct {
	Host
	before viewFS
}

func (l layeredFS) InLayer(p string) bool {
	st, err := l.Lstat(p)
	if err != nil {
		return false
	}
	bst, err := l.before.Lstat(p)
	switch {
	case err != nil || st.Type() != bst.Type() || st.Mode != bst.Mode:
		return true
	case st.IsDir():
		names, _ := l.ReadDir(p)
		old, _ := l.before.ReadDir(p)
		if len(names) != len(old) {
			return true
		}
		for _, n := range names {
			if l.InLayer(p + "/" + n) {
				return true
			}
		}
		return false
	case st.IsSymlink():
		a, _ := l.Readlink(p)
		b, _ := l.before.Readlink(p)
		return a != b
	}
	a, _ := l.ReadFile(p, 1<<24)
	b, _ := l.before.ReadFile(p, 1<<24)
	return string(a) != string(b)
}

func (l layeredFS) LayerNames(p string) ([]string, error) {
	names, err := l.ReadDir(p)
	var out []string
	for _, n := range names {
		if l.InLayer(p + "/" + n) {
			out = append(out, n)
		}
	}
	return out, err
}

// sh runs a script in dir with git set up for a test (no system or user
// config, local submodule clones allowed).
func sh(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("bash", "-ec", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@b", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@b", "LANG=C",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=protocol.file.allow", "GIT_CONFIG_VALUE_0=always"}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

// linkedCase is a run in a repository with one commit: what the script
// leaves, and the verdicts wanted for some paths.
type linkedCase struct {
	name, script string
	keep         []string // paths that must be committed (File, or Dir with a trailing "/")
	refuse       []string // paths that must be refused
	rolled       bool     // the repository's metadata is rolled back
	why          string   // a part of the reason, when rolled back
	unguarded    string   // a root the command writes unchecked
}

// TestLinkedUnits: git's own worktrees and submodules are committed whole
// when their structure is git's and nothing in them runs a program, and
// otherwise refused whole, with the repository's metadata kept as it was.
func TestLinkedUnits(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	upDir := t.TempDir()
	sh(t, upDir, "git init -q up && cd up && echo s > s.txt && git add s.txt && git commit -qm s")
	up := filepath.Join(upDir, "up")
	wtAll := []string{".git/worktrees/wt2/commondir", ".git/worktrees/wt2/gitdir", ".git/worktrees/wt2/HEAD", ".git/worktrees/wt2/index", "wt2/.git", "wt2/a", ".git/refs/heads/wt2", "wt2/"}
	smAll := []string{".gitmodules", ".git/config", ".git/index", ".git/modules/sub/config", ".git/modules/sub/HEAD", ".git/modules/sub/packed-refs", "sub/.git", "sub/s.txt", "sub/", ".git/modules/sub/"}
	add := "git submodule add -q " + up + " sub"
	cases := []linkedCase{
		{name: "worktree", script: "git worktree add -q wt2", keep: wtAll},
		{name: "worktree-new-branch-commit", script: "git worktree add -q -b feat wt2 && cd wt2 && echo b > b && git add b && git commit -qm b",
			keep: []string{".git/worktrees/wt2/commondir", "wt2/.git", "wt2/b", ".git/refs/heads/feat"}},
		{name: "worktree-gitdir-outside", script: "git worktree add -q wt2 && echo /elsewhere/wt2/.git > .git/worktrees/wt2/gitdir",
			refuse: wtAll, rolled: true, why: "outside the workspace"},
		{name: "worktree-hooks", script: "git worktree add -q wt2 && mkdir .git/worktrees/wt2/hooks && echo x > .git/worktrees/wt2/hooks/post-checkout",
			refuse: wtAll, rolled: true, why: "hooks"},
		{name: "worktree-commondir-elsewhere", script: "git init -q other && git worktree add -q wt2 && echo ../../../other/.git > .git/worktrees/wt2/commondir",
			refuse: wtAll, rolled: true, why: "commondir"},
		{name: "worktree-gitfile-elsewhere", script: "git init -q other && git worktree add -q wt2 && echo 'gitdir: ../other/.git' > wt2/.git",
			refuse: wtAll, rolled: true, why: "does not name"},
		{name: "worktree-symlink", script: "git worktree add -q wt2 && ln -s ../../logs .git/worktrees/wt2/logs2",
			refuse: wtAll, rolled: true},
		{name: "worktree-envrc", script: "git worktree add -q wt2 && echo x > wt2/.envrc",
			refuse: wtAll, rolled: true, why: ".envrc"},
		{name: "submodule", script: add, keep: smAll},
		{name: "submodule-committed", script: add + " && git commit -qm sub", keep: append(smAll, ".git/refs/heads/main")},
		{name: "submodule-update-command", script: add + " && git config -f .gitmodules submodule.sub.update '!touch x'",
			refuse: smAll, rolled: true, why: "update"},
		{name: "submodule-ext-url", script: add + " && git config -f .gitmodules submodule.sub.url 'ext::sh -c x'",
			refuse: smAll, rolled: true, why: "transport helper"},
		{name: "submodule-option-url", script: add + " && git config -f .gitmodules submodule.sub.url -oProxy=x",
			refuse: smAll, rolled: true, why: "option"},
		{name: "submodule-other-key", script: add + " && git config -f .gitmodules submodule.sub.foo bar",
			refuse: smAll, rolled: true, why: "submodule.sub.foo"},
		{name: "submodule-include", script: add + " && printf '[include]\\n\\tpath = x\\n' >> .gitmodules",
			refuse: smAll, rolled: true, why: "include.path"},
		// A declaration of a submodule the run did not make is judged by
		// .gitmodules' own rules (what a plain clone writes): one git
		// acts on safely is kept with the unit.
		{name: "submodule-extra-declaration", script: add + " && git config -f .gitmodules submodule.other.path other && git config -f .gitmodules submodule.other.url " + up,
			keep: smAll},
		{name: "submodule-extra-declaration-ext", script: add + " && git config -f .gitmodules submodule.other.path other && git config -f .gitmodules submodule.other.url 'ext::sh -c x'",
			refuse: smAll, rolled: true, why: "transport helper"},
		{name: "submodule-hook", script: add + " && echo x > .git/modules/sub/hooks/post-checkout",
			refuse: smAll, rolled: true, why: "hook"},
		{name: "submodule-worktree-elsewhere", script: add + " && mkdir other && git config -f .git/modules/sub/config core.worktree ../../../other",
			refuse: smAll, rolled: true, why: "other"},
		{name: "submodule-config-command", script: add + " && git config -f .git/modules/sub/config core.fsmonitor x",
			refuse: smAll, rolled: true, why: "core.fsmonitor"},
		{name: "submodule-superproject-update-command", script: add + " && git config submodule.sub.update '!x'",
			refuse: smAll, rolled: true, why: "submodule.*.update"},
		{name: "submodule-gitfile-elsewhere", script: add + " && git init -q other && echo 'gitdir: ../other/.git' > sub/.git",
			refuse: smAll, rolled: true, why: "does not name"},
		{name: "submodule-from-unguarded", script: add, unguarded: upDir,
			refuse: smAll, rolled: true, why: "planted a repository"},
		{name: "gitmodules-alone", script: "git config -f .gitmodules submodule.x.path x && git config -f .gitmodules submodule.x.url " + up,
			keep: []string{".gitmodules"}},
		{name: "gitmodules-alone-update-command", script: "git config -f .gitmodules submodule.x.path x && git config -f .gitmodules submodule.x.update '!touch y'",
			refuse: []string{".gitmodules"}, why: "update"},
		{name: "gitmodules-alone-planted", script: "git config -f .gitmodules submodule.x.path x && git config -f .gitmodules submodule.x.url " + up,
			unguarded: upDir, refuse: []string{".gitmodules"}, why: "planted"},
	}
	for _, tc := range cases {
		for _, layered := range []bool{false, true} {
			name := tc.name
			if layered {
				name += "/layered"
			}
			t.Run(name, func(t *testing.T) { runLinkedCase(t, tc, layered) })
		}
	}
}

// beforeAndAfter makes a workspace ws with setup (run in its parent,
// creating ws), copies it to before, and runs script in ws: a layer's
// view, the final tree against the tree before. It returns the
// matcher and the repositories found before, at their paths in ws.
func beforeAndAfter(t *testing.T, setup, script string) (ws, before string, m *Matcher, repos []Repo) {
	t.Helper()
	dir := t.TempDir()
	before, ws = filepath.Join(dir, "before"), filepath.Join(dir, "ws")
	sh(t, dir, setup+" && cd .. && cp -a ws before")
	sh(t, ws, script)
	m = NewMatcher(Builtin())
	scan, err := ScanWorkspace(before, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range scan.Repos(before, Host{}) {
		r.GitDir = ws + strings.TrimPrefix(r.GitDir, before)
		repos = append(repos, r)
	}
	return ws, before, m, repos
}

// runLinkedCase runs tc, with the final tree seen as a layer's (what
// changed is known) or as the host's (a run without a layer).
func runLinkedCase(t *testing.T, tc linkedCase, layered bool) {
	ws, before, m, repos := beforeAndAfter(t, "git init -q -b main ws && cd ws && echo hi > a && git add a && git commit -qm init", tc.script)
	var final FS = Host{}
	if layered {
		final = layeredFS{before: viewFS{ws, before}}
	}
	cfg := Config{Workspace: ws, Final: final, Before: viewFS{ws, before}, Names: m, StartRepos: repos}
	if tc.unguarded != "" {
		cfg.Unguarded = []string{tc.unguarded}
	}
	c := NewChecker(cfg)
	check := func(p string) Verdict {
		k := File
		if strings.HasSuffix(p, "/") {
			p, k = strings.TrimSuffix(p, "/"), Dir
		}
		return c.Check(p, k)
	}
	for _, p := range tc.keep {
		if v := check(p); v.Action == Refuse {
			t.Errorf("%s refused: %s", p, v.Why)
		}
	}
	for _, p := range tc.refuse {
		v := check(p)
		if v.Action != Refuse {
			t.Errorf("%s committed (%v %s)", p, v.Action, v.Why)
		} else if tc.why != "" && !strings.Contains(v.Why, tc.why) {
			t.Errorf("%s refused for %q, want a reason naming %q", p, v.Why, tc.why)
		}
	}
	if why := c.RolledBack(".git"); (why != "") != tc.rolled {
		t.Errorf("RolledBack(.git) = %q, want rolled back: %v", why, tc.rolled)
	}
	if rbs := c.Rollbacks(); tc.rolled && (len(rbs) != 1 || len(rbs[0].Paths) == 0 || rbs[0].GitDirs[0] != ".git") {
		t.Errorf("Rollbacks = %+v", rbs)
	}
	if tc.rolled {
		if why := c.RolledBack(".git"); !strings.Contains(why, "rolled back") && !strings.Contains(why, "keeps its refs") {
			t.Errorf("the reason does not say what was rolled back: %q", why)
		}
	}
}

// TestLinkedNotLoosened: outside a consistent unit of this run, what
// units need stays refused: a commondir, a .git file, a submodule
// config's core.worktree, a .gitmodules change.
func TestLinkedNotLoosened(t *testing.T) {
	dir := t.TempDir()
	before, ws := filepath.Join(dir, "before"), filepath.Join(dir, "ws")
	sh(t, dir, "git init -q -b main ws && cd ws && echo hi > a && git add a && git commit -qm init && git worktree add -q wt1 && cd .. && cp -a ws before")
	sh(t, ws, "echo ../.. > .git/worktrees/wt1/commondir.new && mv .git/worktrees/wt1/commondir.new .git/worktrees/wt1/commondir && "+
		"mkdir -p d && echo 'gitdir: ../.git' > d/.git && git init -q n && git -C n config core.worktree ../x && "+
		"mkdir -p .git/modules/m && cp -r n/.git/. .git/modules/m/ && echo '[submodule \"m\"]' > .gitmodules")
	m := NewMatcher(Builtin())
	scan, _ := ScanWorkspace(before, m, nil)
	var repos []Repo
	for _, r := range scan.Repos(before, Host{}) {
		r.GitDir = ws + strings.TrimPrefix(r.GitDir, before)
		repos = append(repos, r)
	}
	c := NewChecker(Config{Workspace: ws, Final: Host{}, Before: viewFS{ws, before}, Names: m, StartRepos: repos})
	for _, p := range []string{".git/worktrees/wt1/commondir", "d/.git", "n/.git/config", ".git/modules/m/config", ".gitmodules"} {
		if v := c.Check(p, File); v.Action != Refuse {
			t.Errorf("%s committed (%v %s)", p, v.Action, v.Why)
		}
	}
}

func TestSubmoduleEntryRisk(t *testing.T) {
	e := func(sub, key, value string) gitconfig.Entry {
		return gitconfig.Entry{Section: "submodule", Subsection: sub, Key: key, Value: value}
	}
	for _, tc := range []struct {
		e   gitconfig.Entry
		bad bool
	}{
		{e("sub", "path", "sub"), false},
		{e("a/b", "path", "libs/a/b"), false},
		{e("sub", "path", "../x"), true},
		{e("sub", "path", "/abs"), true},
		{e("sub", "path", "a/.git/x"), true},
		{e("sub", "path", "a/./b"), true},
		{e("sub", "path", "-x"), true},
		{e("sub", "path", "a\nb"), true},
		{e("sub", "url", "https://example.com/r.git"), false},
		{e("sub", "url", "../r.git"), false},
		{e("sub", "url", "ext::sh -c x"), true},
		{e("sub", "url", "fd::3"), true},
		{e("sub", "url", "-upload-pack=x"), true},
		{e("sub", "url", "https://example.com/%0a"), true},
		{e("sub", "url", "../../:x"), true},
		{e("sub", "update", "checkout"), false},
		{e("sub", "update", "rebase"), false},
		{e("sub", "update", "merge"), false},
		{e("sub", "update", "none"), false},
		{e("sub", "update", "!rm -rf ~"), true},
		{e("sub", "update", " !x"), true},
		{e("sub", "branch", "main"), false},
		{e("sub", "branch", "."), false},
		{e("sub", "branch", "-x"), true},
		{e("sub", "ignore", "dirty"), false},
		{e("sub", "ignore", "sometimes"), true},
		{e("sub", "shallow", "true"), false},
		{e("sub", "shallow", "maybe"), true},
		{e("sub", "fetchrecursesubmodules", "on-demand"), false},
		{e("sub", "fetchrecursesubmodules", "x"), true},
		{e("sub", "active", "true"), true}, // not a .gitmodules setting
		{e("sub", "foo", "bar"), true},
		{e("../x", "path", "x"), true},
		{e("a/../b", "path", "x"), true},
		{e("", "path", "x"), true},
		{gitconfig.Entry{Section: "include", Key: "path", Value: "x"}, true},
		{gitconfig.Entry{Section: "core", Key: "fsmonitor", Value: "x"}, true},
	} {
		if why := SubmoduleEntryRisk(tc.e); (why != "") != tc.bad {
			t.Errorf("SubmoduleEntryRisk(%s = %q) = %q, want bad=%v", entryName(tc.e), tc.e.Value, why, tc.bad)
		}
	}
}

func TestWorktreeEntry(t *testing.T) {
	for n, want := range map[string]bool{
		"HEAD": true, "ORIG_HEAD": true, "index": true, "logs": true, "commondir": true, "gitdir": true,
		"locked": true, "config.worktree": true, "rebase-merge": true, "MERGE_MSG": true, "BISECT_LOG": true,
		"hooks": false, "config": false, "objects": false, "packed-refs": false, "worktrees": false, "x": false,
	} {
		if got := worktreeEntry(n); got != want {
			t.Errorf("worktreeEntry(%q) = %v, want %v", n, got, want)
		}
	}
}

func TestResolveURL(t *testing.T) {
	for _, tc := range []struct{ base, rel, want string }{
		{"https://example.com/org/super.git", "../lib.git", "https://example.com/org/lib.git"},
		{"https://example.com/org/super.git", "./lib.git", "https://example.com/org/super.git/lib.git"},
		{"/srv/git/super", "../../x", "/srv/x"},
		{"host:super", "../lib", "host:lib"},
		{"host:org/super", "../lib", "host:org/lib"},
		{"super", "../lib", "./lib"},
	} {
		if got := resolveURL(tc.base, tc.rel); got != tc.want {
			t.Errorf("resolveURL(%q, %q) = %q, want %q", tc.base, tc.rel, got, tc.want)
		}
	}
}

// FuzzGitmodules: .gitmodules and the unit files are written by the
// command: their readers never panic.
func FuzzGitmodules(f *testing.F) {
	for _, s := range []string{"[submodule \"a\"]\n\tpath = a\n\turl = ../a\n", "[submodule \"../x\"]\n\tupdate = !x\n", "", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ents, err := gitconfig.Parse([]byte(s))
		if err != nil {
			return
		}
		for _, e := range ents {
			SubmoduleEntryRisk(e)
			if e.Key == "url" {
				resolveURL("https://h/a/b", e.Value)
			}
		}
		worktreeEntry(s)
		submoduleNameRisk(s)
	})
}
