package persist

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The sweep's plan, made before the run (sweep.go): what to bind
// read-only, what to pin, and what the workspace held, to tell after the
// run what is new.

// PlanSweep finds the protected paths of the workspace. prev is the last
// remembered scan of it, if any.
func PlanSweep(spec SweepSpec, prev *Scan) (*Sweep, error) {
	ws := spec.Workspace
	m := NewMatcher(Names(spec.Protected))
	p := &Sweep{ws: ws, uid: spec.Owner, m: m, umask: spec.Umask, history: map[string]*historySnap{},
		// Change times come from a coarse clock; anything stamped in the
		// moments before the run counts as the run's, which errs safe.
		since: time.Now().Add(-50 * time.Millisecond).UnixNano(),
		watch: map[string]fileID{}, repos: map[string]fileID{}, named: map[string]fileID{},
		ctimes: map[string]int64{}, modes: map[string]uint32{}, acls: map[string]uint8{}, shared: map[string]uint32{}, markers: map[string]markID{},
		pinned: map[string]bool{}}
	scan, err := ScanWorkspace(ws, m, prev)
	if err != nil {
		return nil, err
	}
	p.scan = scan
	if _, ok := p.watch[".git"]; !ok {
		p.watch[".git"] = fileID{}
	}
	p.planMarkers()
	p.planDotgits()
	repos := scan.Repos(ws, Host{})
	var gitDirs []string
	for _, r := range repos {
		gitDirs = append(gitDirs, r.GitDir)
		p.planRepo(r)
	}
	p.cfg = Config{Workspace: ws, Final: Host{}, Before: Host{}, Names: m,
		Unguarded: append([]string(nil), spec.Unguarded...), StartRepos: repos, StartNamed: scan.Named(ws, m),
		Home: spec.Home, GlobalConfigs: spec.GitConfigs}
	c := NewChecker(p.cfg)
	p.planRoles(c)
	for _, g := range gitDirs {
		if rel, ok := within(ws, g); ok {
			p.shared[rel] = sharedAtStart(c, rel)
		}
	}
	// What stands where a name needs a directory (a .jj/repo file, a .hg
	// symlink): watched, checked after the run if it changes.
	for _, rel := range scan.Redirects(ws, m) {
		if id, _, err := lstatID(filepath.Join(ws, rel)); err == nil {
			p.watch[rel] = id
		}
	}
	p.planNamed(c)
	sort.Strings(p.readOnly)
	p.readOnly = slices.Compact(p.readOnly)
	p.pinned = nil
	return p, nil
}

// pin pins every directory strictly between the workspace and rel,
// parents first.
func (p *Sweep) pin(rel string) {
	dir := filepath.Dir(rel)
	var chain []string
	for dir != "." && dir != "/" {
		chain = append(chain, dir)
		dir = filepath.Dir(dir)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		if !p.pinned[chain[i]] {
			p.pinned[chain[i]] = true
			p.pins = append(p.pins, chain[i])
		}
	}
}

// protect watches rel and, when it is a file or directory, binds it
// read-only with the directories above it pinned.
func (p *Sweep) protect(rel string) {
	id, st, err := lstatID(filepath.Join(p.ws, rel))
	if err != nil {
		p.watch[rel] = fileID{}
		return
	}
	p.watch[rel] = id
	if st.Mode()&fs.ModeSymlink != 0 || !(st.IsDir() || st.Mode().IsRegular()) {
		return // watched only
	}
	p.pin(rel)
	p.readOnly = append(p.readOnly, rel)
}

// planMarkers records what makes a directory a repository, as it is now:
// a directory that becomes one by a change to these loses just that
// change.
func (p *Sweep) planMarkers() {
	for _, mk := range repoMarkers() {
		for _, rel := range p.scan.WithMark(mk) {
			var st unix.Stat_t
			if unix.Lstat(filepath.Join(p.ws, rel, mk), &st) == nil {
				p.markers[filepath.Join(rel, mk)] = markID{st.Ino, st.Ctim.Nano()}
			}
		}
	}
}

// planDotgits watches every .git entry, whatever it points at: a new or
// replaced one is checked after the run. A gitfile is bound read-only; a
// directory is pinned (git writes inside it), a symlink only watched.
func (p *Sweep) planDotgits() {
	for _, rel := range p.scan.WithMark(".git") {
		dotgit := filepath.Join(rel, ".git")
		id, st, err := lstatID(filepath.Join(p.ws, dotgit))
		switch {
		case err != nil:
		case st.IsDir():
			p.watch[dotgit] = id
			p.pin(filepath.Join(dotgit, "x"))
		default:
			p.protect(dotgit)
		}
	}
}

// planRepo protects one repository of the workspace: the directory
// itself is pinned (git writes inside it); its executable parts are
// bound read-only; its history is copied; its modes and ACLs noted.
func (p *Sweep) planRepo(r Repo) {
	rel, ok := within(p.ws, r.GitDir)
	if !ok {
		return // a git directory outside the workspace: not ours to bind
	}
	id, _, err := lstatID(r.GitDir)
	if err != nil {
		return
	}
	p.repos[rel] = id
	if r.Dotgit {
		p.history[rel] = snapHistory(r.GitDir)
	}
	p.pin(filepath.Join(rel, "x"))
	hooks := filepath.Join(r.GitDir, "hooks")
	if _, err := os.Lstat(hooks); errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Lstat(filepath.Join(r.GitDir, "commondir")); errors.Is(err, fs.ErrNotExist) {
			// git init creates it; an empty one keeps a hook from
			// being planted.
			os.Mkdir(hooks, 0o755)
		}
	}
	for _, f := range append([]string{"hooks", "config"}, gitWatched()...) {
		p.protect(filepath.Join(rel, f))
	}
	// What holds other git directories is pinned when it exists (git adds
	// to it), watched when it does not.
	for _, f := range gitNested() {
		nested := filepath.Join(rel, f)
		id, st, err := lstatID(filepath.Join(p.ws, nested))
		switch {
		case err != nil:
			p.watch[nested] = fileID{}
		case st.IsDir():
			p.watch[nested] = id
			p.pin(filepath.Join(nested, "x"))
		default:
			p.watch[nested] = id
		}
	}
	for _, f := range []string{"", "hooks", "config", "config.worktree"} {
		if _, st, err := lstatID(filepath.Join(r.GitDir, f)); err == nil {
			p.modes[filepath.Join(rel, f)] = uint32(st.Mode().Perm())
			if st.IsDir() {
				p.acls[filepath.Join(rel, f)] = dirACL(filepath.Join(r.GitDir, f))
			}
		}
	}
}

// planRoles protects what the repositories' configs (and the caller's)
// make hooks or config, wherever it lies: symlinked config and hooks,
// commondir targets, include files, core.hooksPath.
func (p *Sweep) planRoles(c *Checker) {
	for _, role := range c.Roles() {
		rel, ok := within(p.ws, role.Path)
		if !ok {
			continue
		}
		if role.Kind == WorktreeHooks {
			// A hooksPath that is a work tree: only its hook names.
			for _, h := range HookNames() {
				p.protect(filepath.Join(rel, h))
			}
			continue
		}
		p.pin(rel)
		p.protect(rel)
	}
}

// planNamed protects the protected names, at any depth.
func (p *Sweep) planNamed(c *Checker) {
	ws, m := p.ws, p.m
	for _, rel := range p.scan.Named(ws, m) {
		if link := firstLink(ws, rel); link != "" {
			// Reached through a symlink: its target is protected as a
			// role (above); the link itself is watched.
			if id, _, err := lstatID(filepath.Join(ws, link)); err == nil {
				p.watch[link] = id
			}
			continue
		}
		n, at, ok := m.Match(rel)
		if !ok {
			continue
		}
		id, st, err := lstatID(filepath.Join(ws, rel))
		if err != nil {
			continue
		}
		p.named[rel] = id
		if _, inTree := InPackageTree(rel, at); inTree && n.Kind != Instruction {
			continue // a package manager updates its own tree
		}
		if listedOnChange(n) && !(n.Kind == Hooked && c.hooksRun(rel, at)) {
			// Written freely; a change is judged (and listed) after the
			// run.
			p.ctimes[rel] = st.Sys().(*syscall.Stat_t).Ctim.Nano()
			continue
		}
		// A name that runs later, and a Settings file (as git's config
		// is): bound read-only for the run. A new one is judged after it.
		p.protect(rel)
	}
}

// hooksRun is runsHooks without its reason.
func (c *Checker) hooksRun(rel string, at int) bool {
	_, runs := c.runsHooks(rel, at)
	return runs
}

// listedOnChange reports the kinds of names a run may change in place:
// a change is judged after the run (listed, or, for a hook manager's
// file in a repository that came to run hooks, quarantined). A name the
// tool asks about is not one: a change to one that was there is refused,
// so it is read-only for the run like the rest.
func listedOnChange(n Name) bool {
	return n.Kind == Instruction || n.Kind == Hooked
}

// sharedAtStart is what group/other write the repository rel may keep.
func sharedAtStart(c *Checker, rel string) uint32 {
	m, _ := c.Mode(filepath.Join(rel, "config"), unix.S_IFREG|0o666, &Info{Mode: 0o666})
	return m & 0o022
}
