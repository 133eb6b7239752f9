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
//   - core.hooksPath targets of the workspace's repository: no change.
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
	extra     map[string]string
}

func newGuard(ws, upper int, protected []string) *guard {
	g := &guard{ws: ws, upper: upper, gitDir: map[string]bool{}, extra: map[string]string{}}
	for _, p := range protected {
		p = filepath.Clean(p)
		if p != ".git" && validRel(p) == nil {
			g.protected = append(g.protected, p)
		}
	}
	// Targets of the top repository's hooksPath and includes, as the
	// workspace has them and as the attempt left them.
	for _, cfg := range []func() ([]byte, error){
		func() ([]byte, error) { return readBeneath(ws, ".git/config") },
		func() ([]byte, error) { return readBeneath(upper, ".git/config") },
	} {
		b, err := cfg()
		if err != nil {
			continue
		}
		ents, err := gitconfig.Parse(b)
		if err != nil {
			continue
		}
		for _, e := range ents {
			full := e.Section + "." + e.Key
			switch {
			case full == "core.hookspath":
				if rel, ok := wsRelative(e.Value, ""); ok {
					g.extra[rel] = "core.hooksPath names it: git runs hooks from it"
				}
			case (e.Section == "include" || e.Section == "includeif") && e.Key == "path":
				if rel, ok := wsRelative(e.Value, ".git"); ok {
					g.extra[rel] = "include:" + rel
				}
			}
		}
	}
	return g
}

// wsRelative turns a relative path from git config (relative to base
// inside the workspace) into a workspace-relative one; absolute paths
// and anything leaving the workspace are not the workspace's concern.
func wsRelative(v, base string) (string, bool) {
	if v == "" || filepath.IsAbs(v) || strings.HasPrefix(v, "~") {
		return "", false
	}
	rel := filepath.Clean(filepath.Join(base, v))
	if validRel(rel) != nil {
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
	for t, why := range g.extra {
		if p == t || strings.HasPrefix(p, t+"/") {
			if strings.HasPrefix(why, "include:") {
				if p != t {
					continue
				}
				return g.configChange(p, k, content)
			}
			if k == kindRemove {
				return "", false
			}
			return why, true
		}
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
