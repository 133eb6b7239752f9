package layer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/gitconfig"
	"golang.org/x/sys/unix"
)

// The persistence check at commit. Whatever the command did inside its
// layer, what counts is the final tree: a change is refused when it
// would leave something in the workspace that a tool outside the sandbox
// runs or loads later.
//
//   - Protected names (.envrc, .vscode, agent settings, shell rc files,
//     ...): no change at all, at or below them.
//   - Git directories: every ".git" at any depth, every directory that
//     looks like one to git (objects/ and refs/ inside, any name), and
//     the submodule and worktree directories inside them. In each:
//     hooks/ takes only *.sample files (which git never runs), a .git
//     file ("gitdir:" redirect) is refused, commondir is refused, and
//     config, config.worktree and files named by include.path are
//     parsed: a change is refused when it adds an entry that can run a
//     program (gitconfig.ExecCapable), and committed otherwise, so
//     `git config user.name x` works inside.
//   - core.hooksPath targets of every repository above a path (as the
//     workspace has its config and as the attempt left it): no change;
//     a hooksPath that is the work tree itself protects the hook names.
//
// Removals are allowed inside git directories (deleting a hook runs
// nothing) and refused for protected names.

type kind int

const (
	kindFile kind = iota
	kindDir
	kindSymlink
	kindRemove
)

type guard struct {
	ws, upper int
	protected []string
	gitDir    map[string]bool // memo: does this directory look like a git directory in the final tree
	wsPath    string
	// named memoizes namedBy per repository work tree, repo whether a
	// directory is one.
	named map[string]map[string]string
	repo  map[string]bool
}

// gitHookNames are the hooks git runs (githooks(5)), for a hooksPath
// that is the work tree itself.
var gitHookNames = map[string]bool{
	"applypatch-msg": true, "pre-applypatch": true, "post-applypatch": true, "pre-commit": true,
	"pre-merge-commit": true, "prepare-commit-msg": true, "commit-msg": true, "post-commit": true,
	"pre-rebase": true, "post-checkout": true, "post-merge": true, "pre-push": true,
	"pre-receive": true, "update": true, "proc-receive": true, "post-receive": true,
	"post-update": true, "reference-transaction": true, "push-to-checkout": true, "pre-auto-gc": true,
	"post-rewrite": true, "sendemail-validate": true, "fsmonitor-watchman": true,
	"p4-changelist": true, "p4-prepare-changelist": true, "p4-post-changelist": true,
	"p4-pre-submit": true, "post-index-change": true,
}

// newGuard checks changes between the workspace (ws, at wsPath) and the
// layer (upper).
func newGuard(ws, upper int, wsPath string, protected []string) *guard {
	g := &guard{ws: ws, upper: upper, wsPath: wsPath, gitDir: map[string]bool{}, named: map[string]map[string]string{}, repo: map[string]bool{}}
	for _, p := range protected {
		p = filepath.Clean(p)
		if p != ".git" && validRel(p) == nil {
			g.protected = append(g.protected, p)
		}
	}
	return g
}

// namedBy returns what the config of the repository whose work tree is
// dir (workspace-relative, "" for the top) names inside the workspace,
// as the workspace has it and as the attempt left it: hooksPath targets
// (reason) and include targets ("include:" reasons). Memoized.
func (g *guard) namedBy(dir string) map[string]string {
	if m, ok := g.named[dir]; ok {
		return m
	}
	m := map[string]string{}
	g.named[dir] = m
	cfg := relJoin(dir, ".git/config")
	for _, root := range []int{g.ws, g.upper} {
		b, err := readBeneath(root, cfg)
		if err != nil {
			continue
		}
		ents, err := gitconfig.Parse(b)
		if err != nil {
			continue
		}
		for _, e := range ents {
			switch {
			case e.Section == "core" && e.Key == "hookspath":
				if rel, ok := wsRelative(g.wsPath, e.Value, dir); ok {
					m[rel] = "core.hooksPath of " + relJoin(dir, ".git") + " names it: git runs hooks from it"
				}
			case (e.Section == "include" || e.Section == "includeif") && e.Key == "path":
				if rel, ok := wsRelative(g.wsPath, e.Value, relJoin(dir, ".git")); ok {
					m[rel] = "include:" + rel
				}
			}
		}
	}
	return m
}

// byConfig applies what the configs of the repositories above p name.
func (g *guard) byConfig(p string, k kind, content func() ([]byte, error)) (string, bool, bool) {
	parts := strings.Split(p, "/")
	for i := 0; i < len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		repo, ok := g.repo[dir]
		if !ok {
			repo = g.exists(relJoin(dir, ".git/config"))
			g.repo[dir] = repo
		}
		if !repo {
			continue
		}
		for t, why := range g.namedBy(dir) {
			include := strings.HasPrefix(why, "include:")
			switch {
			case include && p == t:
				why, bad := g.configChange(p, k, content)
				return why, bad, true
			case include:
			case t == "." || t == dir:
				// Hooks straight in a work tree (or the workspace).
				base := strings.TrimPrefix(strings.TrimPrefix(p, t), "/")
				if t == "." {
					base = p
				}
				if !strings.Contains(base, "/") && gitHookNames[base] && k != kindRemove {
					return why, true, true
				}
			case p == t || strings.HasPrefix(p, t+"/"):
				if k == kindRemove {
					return "", false, true
				}
				return why, true, true
			}
		}
	}
	return "", false, false
}

// wsRelative turns a path from git config (absolute, or relative to base
// inside the workspace ws) into a workspace-relative one ("." for the
// workspace itself); paths outside the workspace (and "~") are not the
// workspace's concern.
func wsRelative(ws, v, base string) (string, bool) {
	if v == "" || strings.HasPrefix(v, "~") {
		return "", false
	}
	if filepath.IsAbs(v) {
		rel, err := filepath.Rel(ws, filepath.Clean(v))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return "", false
		}
		return rel, true
	}
	rel := filepath.Clean(filepath.Join(base, v))
	if rel != "." && validRel(rel) != nil {
		return "", false
	}
	return rel, true
}

// check decides whether the change at p (of kind k) may be committed.
func (g *guard) check(p string, k kind, content func() ([]byte, error)) (string, bool) {
	for _, n := range g.protected {
		if p == n || strings.HasPrefix(p, n+"/") {
			return n + " is a persistence path: a tool outside the sandbox loads or runs it", true
		}
	}
	if why, bad, decided := g.byConfig(p, k, content); decided {
		return why, bad
	}
	gd, rest, ok := g.gitDirOf(p)
	if !ok {
		return "", false
	}
	// Submodule and worktree git directories inside gd.
	for {
		sub, after, found := g.innerGitDir(gd, rest)
		if !found {
			break
		}
		gd, rest = sub, after
	}
	switch {
	case k == kindRemove:
		return "", false
	case rest == "":
		if k != kindDir {
			return gd + " would become a redirect: git would take its hooks and config from elsewhere", true
		}
	case rest == "hooks":
		if k != kindDir {
			return gd + "/hooks must stay a directory", true
		}
	case strings.HasPrefix(rest, "hooks/"):
		if k == kindFile && strings.HasSuffix(p, ".sample") && !strings.Contains(strings.TrimPrefix(rest, "hooks/"), "/") {
			return "", false
		}
		return "a git hook runs outside the sandbox", true
	case rest == "commondir":
		return "commondir points git at another repository's hooks and config", true
	case rest == "config" || rest == "config.worktree":
		return g.configChange(p, k, content)
	}
	return "", false
}

// configChange refuses a git config file change that adds anything able
// to run a program.
func (g *guard) configChange(p string, k kind, content func() ([]byte, error)) (string, bool) {
	if k == kindRemove {
		return "", false
	}
	if k != kindFile || content == nil {
		return p + " must stay a plain file", true
	}
	b, err := content()
	if err != nil {
		return "cannot read " + p + ": " + err.Error(), true
	}
	now, err := gitconfig.Parse(b)
	if err != nil {
		return "git config " + p + " cannot be parsed (" + err.Error() + ")", true
	}
	var before []gitconfig.Entry
	if old, err := readBeneath(g.ws, p); err == nil {
		before, _ = gitconfig.Parse(old)
	}
	if added := gitconfig.Compare(before, now); len(added) > 0 {
		why, _ := gitconfig.ExecCapable(added[0])
		return "git config " + p + " gains " + name(added[0]) + ": " + why, true
	}
	return "", false
}

func name(e gitconfig.Entry) string {
	if e.Subsection != "" {
		return e.Section + "." + e.Subsection + "." + e.Key
	}
	return e.Section + "." + e.Key
}

// gitDirOf finds the git directory p lies in (or is): the last ".git"
// component, else the deepest ancestor that looks like a git directory.
func (g *guard) gitDirOf(p string) (gd, rest string, ok bool) {
	parts := strings.Split(p, "/")
	for i := len(parts) - 1; i >= 0; i-- {
		if parts[i] == ".git" {
			return strings.Join(parts[:i+1], "/"), strings.Join(parts[i+1:], "/"), true
		}
	}
	for i := len(parts) - 1; i >= 1; i-- {
		dir := strings.Join(parts[:i], "/")
		if g.looksLikeGitDir(dir) {
			return dir, strings.Join(parts[i:], "/"), true
		}
	}
	return "", "", false
}

// innerGitDir finds a submodule (modules/...) or worktree (worktrees/X)
// git directory inside gd on the way to rest.
func (g *guard) innerGitDir(gd, rest string) (string, string, bool) {
	parts := strings.Split(rest, "/")
	if len(parts) < 3 {
		return "", "", false
	}
	switch parts[0] {
	case "worktrees":
		return gd + "/worktrees/" + parts[1], strings.Join(parts[2:], "/"), true
	case "modules":
		for i := 2; i < len(parts); i++ {
			dir := gd + "/" + strings.Join(parts[:i], "/")
			if g.exists(dir+"/HEAD") || g.looksLikeGitDir(dir) {
				return dir, strings.Join(parts[i:], "/"), true
			}
		}
	}
	return "", "", false
}

// looksLikeGitDir: objects/ and refs/ directories, in the final tree.
func (g *guard) looksLikeGitDir(dir string) bool {
	if v, ok := g.gitDir[dir]; ok {
		return v
	}
	v := g.isDir(dir+"/objects") && g.isDir(dir+"/refs")
	g.gitDir[dir] = v
	return v
}

// final is the entry at rel in the final tree: the layer's when it has
// one (a whiteout means none), else the workspace's (unless a directory
// above it is opaque or removed in the layer; treated as present, which
// errs on the side of refusing).
func (g *guard) final(rel string) (unix.Statx_t, bool) {
	if st, err := lstatRel(g.upper, rel); err == nil {
		if fileType(&st) == unix.S_IFCHR && st.Rdev_major == 0 && st.Rdev_minor == 0 {
			return st, false
		}
		return st, true
	}
	st, err := lstatRel(g.ws, rel)
	return st, err == nil
}

func (g *guard) isDir(rel string) bool {
	st, ok := g.final(rel)
	return ok && fileType(&st) == unix.S_IFDIR
}

func (g *guard) exists(rel string) bool {
	_, ok := g.final(rel)
	return ok
}

// readBeneath reads a small regular file below root without following
// symlinks.
func readBeneath(root int, rel string) ([]byte, error) {
	fd, err := openBeneath(root, rel, unix.O_RDONLY)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Size() > 4<<20 {
		return nil, errors.New("not a small regular file")
	}
	b := make([]byte, st.Size())
	n, err := f.ReadAt(b, 0)
	if n == len(b) {
		err = nil
	}
	return b[:n], err
}
