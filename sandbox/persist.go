package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/gitconfig"
	"golang.org/x/sys/unix"
)

// Persistence paths are files in the workspace that something on the host
// runs or loads later without a sandbox: git hooks and config, direnv's
// .envrc, editor tasks, agent settings. This file protects them when the
// run writes straight to the workspace (--no-transaction, or no layer
// possible); with the copy-on-write layer, package layer checks them at
// commit instead. Those that exist when the run
// starts are bound read-only, and every directory between the workspace
// and them is pinned (bound onto itself) so it cannot be renamed away.
// Those that do not exist cannot be blocked by a mount, so they are
// watched: after the command and all its processes are gone, anything
// created at a watched name is moved out of the workspace into sandboxd's
// quarantine.

type fileID struct{ dev, ino uint64 }

// persistPlan is what the helper binds and what the supervisor checks
// after the run. Paths are relative to the workspace.
type persistPlan struct {
	pins     []string          // directories to pin, parents first
	readOnly []string          // existing protected files and directories
	watch    map[string]fileID // protected names and what was there at start (zero = nothing)
	gitDirs  map[string]fileID // every .git entry and bare git directory at start, by path
	scan     *wsScan           // the workspace scan the plan was made from
}

func lstatID(p string) (fileID, os.FileInfo, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return fileID{}, nil, err
	}
	sys := st.Sys().(*syscall.Stat_t)
	return fileID{uint64(sys.Dev), sys.Ino}, st, nil
}

// planPersistence finds the protected paths of the workspace ws. names are
// workspace-relative; ".git" is looked for at every depth. prev is the
// last remembered scan of ws, if any.
func planPersistence(ws string, names []string, prev *wsScan) (*persistPlan, error) {
	p := &persistPlan{watch: map[string]fileID{}, gitDirs: map[string]fileID{}}
	pinned := map[string]bool{}
	pin := func(rel string) {
		// every directory strictly between the workspace and rel, parents first
		dir := filepath.Dir(rel)
		var chain []string
		for dir != "." && dir != "/" {
			chain = append(chain, dir)
			dir = filepath.Dir(dir)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			if !pinned[chain[i]] {
				pinned[chain[i]] = true
				p.pins = append(p.pins, chain[i])
			}
		}
	}
	protect := func(rel string) {
		id, st, err := lstatID(filepath.Join(ws, rel))
		if err != nil {
			p.watch[rel] = fileID{}
			return
		}
		p.watch[rel] = id
		if st.Mode()&fs.ModeSymlink != 0 || !(st.IsDir() || st.Mode().IsRegular()) {
			return // watched only
		}
		pin(rel)
		p.readOnly = append(p.readOnly, rel)
	}

	var gitEntries, bareDirs []string
	for _, n := range names {
		n = filepath.Clean(n)
		if n == ".git" {
			continue // found by the walk below, at depth 0 too
		}
		protect(n)
	}
	scan, err := scanWorkspace(ws, prev)
	if err != nil {
		return nil, err
	}
	p.scan = scan
	gitEntries, bareDirs = scan.gitEntries(), scan.bareDirs()
	sort.Strings(gitEntries)
	sort.Strings(bareDirs)
	if _, ok := p.watch[".git"]; !ok {
		p.watch[".git"] = fileID{}
	}
	for _, g := range gitEntries {
		id, st, err := lstatID(filepath.Join(ws, g))
		if err != nil {
			continue
		}
		p.gitDirs[g] = id
		if g == ".git" {
			p.watch[".git"] = id
		}
		pin(g)
		switch {
		case st.IsDir():
			// The directory itself is pinned (git writes inside it); its
			// executable parts are bound read-only.
			if !pinned[g] {
				pinned[g] = true
				p.pins = append(p.pins, g)
			}
			protectGitDir(p, ws, g, filepath.Dir(g), pin, protect)
		case st.Mode().IsRegular():
			// A gitfile ("gitdir: ...") of a worktree or submodule.
			p.readOnly = append(p.readOnly, g)
			if target := readGitfile(filepath.Join(ws, g)); target != "" {
				if rel, ok := within(ws, target); ok {
					if _, st, err := lstatID(target); err == nil && st.IsDir() {
						protectGitDir(p, ws, rel, filepath.Dir(g), pin, protect)
					}
				}
			}
		}
	}
	for _, b := range bareDirs {
		if id, _, err := lstatID(filepath.Join(ws, b)); err == nil {
			p.gitDirs[b] = id
		}
		pin(filepath.Join(b, "x"))
		protectGitDir(p, ws, b, filepath.Dir(b), pin, protect)
	}
	sort.Strings(p.readOnly)
	p.readOnly = dedupe(p.readOnly)
	return p, nil
}

// gitRedirects are files in a git directory that point git at another
// config or object store.
var gitRedirects = []string{"commondir", "config.worktree"}

// isGitDir reports whether dir looks like a git directory to git itself
// (HEAD, objects/ and refs/), whatever its name.
func isGitDir(dir string) bool {
	for _, sub := range []string{"objects", "refs"} {
		st, err := os.Lstat(filepath.Join(dir, sub))
		if err != nil || !st.IsDir() {
			return false
		}
	}
	return true
}

// protectGitDir protects one git directory gd (workspace-relative) whose
// working tree is worktree (for relative core.hooksPath).
func protectGitDir(p *persistPlan, ws, gd, worktree string, pin func(string), protect func(string)) {
	hooks := filepath.Join(gd, "hooks")
	if _, err := os.Lstat(filepath.Join(ws, hooks)); errors.Is(err, fs.ErrNotExist) {
		// git init creates it; an empty one keeps a hook from being planted.
		os.Mkdir(filepath.Join(ws, hooks), 0o755)
	}
	protect(hooks)
	protect(filepath.Join(gd, "config"))
	// Files that make git take its config, hooks and objects from
	// elsewhere: bound read-only when they exist, watched when not.
	for _, f := range gitRedirects {
		protect(filepath.Join(gd, f))
	}
	if wts, err := os.ReadDir(filepath.Join(ws, gd, "worktrees")); err == nil {
		for _, wt := range wts {
			if wt.IsDir() {
				for _, f := range gitRedirects {
					protect(filepath.Join(gd, "worktrees", wt.Name(), f))
				}
			}
		}
	}
	for _, ref := range gitConfigPaths(filepath.Join(ws, gd, "config")) {
		target := ref
		if !filepath.IsAbs(target) {
			// core.hooksPath is relative to the working tree; include.path
			// to the config file's directory.
			base := filepath.Join(ws, worktree)
			if strings.HasPrefix(ref, "include:") {
				base = filepath.Join(ws, gd)
			}
			target = filepath.Join(base, strings.TrimPrefix(ref, "include:"))
		} else {
			target = strings.TrimPrefix(target, "include:")
		}
		if rel, ok := within(ws, target); ok {
			pin(rel)
			protect(rel)
		}
	}
	// Submodules keep their git directories under .git/modules.
	modules := filepath.Join(ws, gd, "modules")
	filepath.WalkDir(modules, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == modules {
			return nil
		}
		if _, err := os.Lstat(filepath.Join(path, "HEAD")); err == nil {
			rel, _ := filepath.Rel(ws, path)
			pin(filepath.Join(rel, "x"))
			protect(filepath.Join(rel, "hooks"))
			protect(filepath.Join(rel, "config"))
		}
		return nil
	})
}

// gitConfigPaths returns core.hooksPath values and include paths
// ("include:"-prefixed) from a git config file. A file that cannot be
// parsed adds nothing (it is itself read-only during the run).
func gitConfigPaths(file string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	ents, err := gitconfig.Parse(b)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		switch {
		case e.Section == "core" && e.Key == "hookspath":
			out = append(out, e.Value)
		case (e.Section == "include" || e.Section == "includeif") && e.Key == "path":
			out = append(out, "include:"+e.Value)
		}
	}
	return out
}

func readGitfile(p string) string {
	b, err := os.ReadFile(p)
	if err != nil || len(b) > 4096 {
		return ""
	}
	v, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir:")
	if !ok {
		return ""
	}
	v = strings.TrimSpace(v)
	if !filepath.IsAbs(v) {
		v = filepath.Join(filepath.Dir(p), v)
	}
	return filepath.Clean(v)
}

// within returns path relative to ws when it lies strictly inside it.
func within(ws, path string) (string, bool) {
	rel, err := filepath.Rel(ws, filepath.Clean(path))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// sweep runs after every process of the run is gone. Whatever now sits at
// a watched name that was not there at the start, and every new .git
// entry or git directory, is moved to quarantine (or removed when
// quarantine is on another file system). The scan never follows symlinks,
// and each move is done relative to a parent opened beneath the workspace
// without symlinks. Afterwards p.scan is the workspace as the command
// left it.
func (p *persistPlan) sweep(ws, quarantine string) ([]Removed, error) {
	var found []string
	for rel, before := range p.watch {
		now, _, err := lstatID(filepath.Join(ws, rel))
		if err != nil {
			continue
		}
		if now != before && !(rel == ".git" && p.gitDirs[".git"] == now) {
			found = append(found, rel)
		}
	}
	after, err := scanWorkspace(ws, p.scan)
	if err != nil {
		return nil, err
	}
	// What the plan read afresh is new to the remembered scan too.
	after.fresh = after.fresh || p.scan.fresh
	p.scan = after
	for _, rel := range append(after.gitEntries(), after.bareDirs()...) {
		now, _, err := lstatID(filepath.Join(ws, rel))
		if err == nil && p.gitDirs[rel] != now {
			found = append(found, rel)
		}
	}
	sort.Strings(found)
	found = dedupe(found)
	var out []Removed
	var errs []error
	for _, rel := range found {
		// A path inside an entry already moved went with it.
		if len(out) > 0 && strings.HasPrefix(rel, out[len(out)-1].Path+"/") {
			continue
		}
		if _, existed := p.gitDirs[rel]; !existed && isGitDir(filepath.Join(ws, rel)) && safeNewRepo(filepath.Join(ws, rel)) {
			continue
		}
		q, err := quarantineEntry(ws, rel, quarantine)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, Removed{Path: rel, Quarantine: q})
	}
	return out, errors.Join(errs...)
}

// safeNewRepo accepts a repository the command created (git init) when it
// carries nothing that runs code: only sample hooks and config keys from
// a short list. Anything else is quarantined.
func safeNewRepo(gd string) bool {
	st, err := os.Lstat(gd)
	if err != nil || !st.IsDir() {
		return false
	}
	hooks, err := os.ReadDir(filepath.Join(gd, "hooks"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	for _, h := range hooks {
		if !h.Type().IsRegular() || !strings.HasSuffix(h.Name(), ".sample") {
			return false
		}
	}
	if st, err := os.Lstat(filepath.Join(gd, "config")); err != nil || !st.Mode().IsRegular() {
		return false
	}
	for _, f := range append(gitRedirects, "worktrees", "modules") {
		if _, err := os.Lstat(filepath.Join(gd, f)); err == nil {
			return false
		}
	}
	b, err := os.ReadFile(filepath.Join(gd, "config"))
	if err != nil {
		return false
	}
	return safeGitConfig(string(b))
}

// safeGitConfig accepts only config keys from a short list of those a
// new repository normally has; anything else, or a file that does not
// parse, is refused.
func safeGitConfig(text string) bool {
	ents, err := gitconfig.Parse([]byte(text))
	if err != nil {
		return false
	}
	for _, e := range ents {
		switch e.Section {
		case "core":
			switch e.Key {
			case "repositoryformatversion", "filemode", "bare", "logallrefupdates",
				"ignorecase", "precomposeunicode", "symlinks", "autocrlf", "eol":
			default:
				return false
			}
		case "user", "init", "author", "committer":
			if e.Key == "templatedir" {
				return false
			}
		case "extensions":
			switch e.Key {
			case "objectformat", "refstorage", "compatobjectformat":
			default:
				return false
			}
		case "branch":
			if e.Subsection == "" || (e.Key != "remote" && e.Key != "merge" && e.Key != "rebase") {
				return false
			}
		case "remote":
			if e.Subsection == "" || (e.Key != "url" && e.Key != "fetch") {
				return false
			}
		default:
			return false
		}
		if _, bad := gitconfig.ExecCapable(e); bad {
			return false
		}
	}
	return true
}

func quarantineEntry(ws, rel, quarantine string) (string, error) {
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	root, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("quarantine %s: %w", rel, err)
	}
	defer unix.Close(root)
	parent := filepath.Dir(rel)
	pfd := root
	if parent != "." {
		pfd, err = unix.Openat2(root, parent, &how)
		if err != nil {
			return "", fmt.Errorf("quarantine %s: %w", rel, err)
		}
		defer unix.Close(pfd)
	}
	dest := filepath.Join(quarantine, rel)
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", rel, err)
	}
	dfd, err := unix.Open(filepath.Dir(dest), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("quarantine %s: %w", rel, err)
	}
	defer unix.Close(dfd)
	err = unix.Renameat2(pfd, filepath.Base(rel), dfd, filepath.Base(dest), unix.RENAME_NOREPLACE)
	if err == nil {
		return dest, nil
	}
	if !errors.Is(err, unix.EXDEV) {
		return "", fmt.Errorf("quarantine %s: %w", rel, err)
	}
	// Another file system: remove it in place (RemoveAll does not follow
	// symlinks).
	if err := os.RemoveAll(filepath.Join(ws, rel)); err != nil {
		return "", fmt.Errorf("remove %s: %w", rel, err)
	}
	return "", nil
}
