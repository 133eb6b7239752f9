package persist

import (
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/pathtree"
)

// A repository's metadata is committed whole or not at all. Its refs,
// index, HEADs, logs, operation state and config, and the linked
// worktrees and submodules the run created in it (units, linked.go),
// are one piece of state spread over many files: committing the part the
// rules accept and refusing the rest leaves a repository git itself
// would never write (an index naming a .gitmodules that is not there, a
// prunable worktree, a branch checked out nowhere). So a family (one
// common directory and the git directories that share it) is rolled
// back as a whole when any of it is refused: a unit whose structure is
// not git's own or one of whose files the rules refuse, history the
// rules refuse (history.go), or, with units, a config change they refuse
// (it may carry the units' settings; alone, a refused config leaves
// nothing else inconsistent, so it is refused alone). Then every
// metadata file of the family keeps what it held before the run (the
// mechanism history refusals always used), and nothing of its new units
// is committed: not their git directories, not their work trees, not the
// superproject's .gitmodules. Objects stay, unreachable.

// family is one repository as git shares it: a common directory and the
// git directories that use it (its own, its linked worktrees').
type family struct {
	common  string   // absolute
	gitDirs []string // absolute, inside the workspace
	units   []*unit
	state   int // 0 not judged, 1 being judged, 2 judged
	why     string
}

// layerLister is an FS that lists what the change itself wrote in a
// directory (the layer's names).
type layerLister interface {
	LayerNames(path string) ([]string, error)
}

// loadFamilies finds the families of the repositories the workspace held
// and (when the caller scanned it) holds, once.
func (c *Checker) loadFamilies() {
	if c.famsOK {
		return
	}
	c.famsOK = true
	c.start = map[string]bool{}
	for _, r := range c.cfg.StartRepos {
		c.start[r.GitDir] = true
	}
	for _, rs := range [][]Repo{c.cfg.StartRepos, c.cfg.FinalRepos} {
		for _, r := range rs {
			c.familyOf(r.GitDir)
		}
	}
	for _, r := range c.cfg.FinalRepos {
		if r.Gitfile {
			c.addTree(c.units[r.GitDir], joinPath(c.cfg.Workspace, r.At))
		}
	}
}

// familyOf is the family of the git directory gd (absolute), found by its
// commondir (in the final tree, else before).
func (c *Checker) familyOf(gd string) *family {
	if f, ok := c.famOf[gd]; ok {
		return f
	}
	common := gd
	if cd, v := CommonDir(c.cfg.Final, gd); v == GitDir {
		common = cd
	} else if cd, v := CommonDir(c.cfg.Before, gd); v == GitDir {
		common = cd
	}
	f := c.families[common]
	if f == nil {
		f = &family{common: common}
		c.families[common] = f
		c.famOf[gd] = f
		c.loadFamily(f)
	}
	c.famOf[gd] = f
	return f
}

// loadFamily lists the git directories of f and the units the run created
// in them, and checks each unit's structure (worktrees first: a
// submodule of a new worktree needs its work tree).
func (c *Checker) loadFamily(f *family) {
	if _, ok := pathtree.Below(c.cfg.Workspace, f.common); !ok && f.common != c.cfg.Workspace {
		return // not the commit's to write
	}
	f.gitDirs = []string{f.common}
	seen := map[string]bool{}
	for _, view := range []FS{c.cfg.Final, c.cfg.Before} {
		names, _ := listNames(view, f.common+"/worktrees")
		for _, n := range names {
			wgd := f.common + "/worktrees/" + n
			if seen[wgd] {
				continue
			}
			seen[wgd] = true
			st, err := c.cfg.Final.Lstat(wgd)
			if err == nil && st.IsDir() && !c.existed(wgd) {
				c.addUnit(f, &unit{kind: worktreeUnit, gitDir: wgd, super: f.common, name: n})
			}
			if hasEntry(c.cfg.Final, wgd+"/HEAD") || hasEntry(c.cfg.Before, wgd+"/HEAD") {
				f.gitDirs = append(f.gitDirs, wgd)
			}
		}
	}
	for _, g := range f.gitDirs {
		for _, sm := range submoduleDirs(c.cfg.Final, g) {
			if !c.existed(sm) {
				c.addUnit(f, &unit{kind: submoduleUnit, gitDir: sm, super: g, name: strings.TrimPrefix(sm, g+"/modules/")})
			}
		}
	}
	for _, kind := range []unitKind{worktreeUnit, submoduleUnit} {
		for _, u := range f.units {
			if u.kind == kind {
				c.structure(u)
			}
		}
	}
}

// submoduleDirs lists the directories below gd/modules that hold a HEAD
// (submodule names may hold "/"; a submodule's own modules are its own).
func submoduleDirs(fsys FS, gd string) []string {
	var out []string
	walk(fsys, gd+"/modules", 8, func(p string, st Info) bool {
		if !st.IsDir() {
			return false
		}
		if hasEntry(fsys, p+"/HEAD") {
			out = append(out, p)
			return false
		}
		return true
	})
	sort.Strings(out)
	return out
}

func hasEntry(fsys FS, p string) bool {
	_, err := fsys.Lstat(p)
	return err == nil
}

// existed reports whether the git directory gd (absolute) was there
// before the run.
func (c *Checker) existed(gd string) bool {
	if c.start[gd] {
		return true
	}
	st, err := c.cfg.Before.Lstat(gd)
	return err == nil && st.IsDir()
}

func (c *Checker) addUnit(f *family, u *unit) {
	u.fam = f
	f.units = append(f.units, u)
	c.units[u.gitDir] = u
	c.unitDirs[u.gitDir] = u
}

// structure checks u's structure and records where its pieces are.
func (c *Checker) structure(u *unit) {
	if u.kind == worktreeUnit {
		u.why = c.worktreeStructure(u)
	} else {
		u.why = c.submoduleStructure(u)
		if u.superTree != "" {
			c.declaring[u.superTree] = append(c.declaring[u.superTree], u)
			c.unitFiles[u.superTree+"/.gitmodules"] = u
		}
	}
	if u.tree != "" {
		c.addTree(u, u.tree)
	}
}

// addTree makes the directory tree (absolute) a work tree of u: its .git
// always, and the whole of it when it is new in this run or was empty
// before (then all of it is the unit's checkout).
func (c *Checker) addTree(u *unit, tree string) {
	if u == nil {
		return
	}
	if _, ok := pathtree.Below(c.cfg.Workspace, tree); !ok {
		return
	}
	for _, t := range u.trees {
		if t == tree {
			return
		}
	}
	u.trees = append(u.trees, tree)
	c.unitFiles[tree+"/.git"] = u
	if c.newTree(tree) {
		c.unitDirs[tree] = u
	}
}

// newTree reports a directory the run created, or that was empty.
func (c *Checker) newTree(tree string) bool {
	st, err := c.cfg.Before.Lstat(tree)
	if err != nil {
		return true
	}
	if !st.IsDir() {
		return false
	}
	l, ok := c.cfg.Before.(lister)
	if !ok {
		return false // cannot tell
	}
	names, err := l.ReadDir(tree)
	return err == nil && len(names) == 0
}

// memberOf returns the family rel (workspace-relative, changed by k) is
// part of the metadata of: a unit's git directory, work tree, gitfile or
// .gitmodules, or a metadata file of a git directory (metadata). nil
// when none.
func (c *Checker) memberOf(rel string, k Change) *family {
	c.loadFamilies()
	parts := strings.Split(rel, "/")
	if rel == "" {
		parts = nil
	}
	dirs := len(parts) - 1 // the directories above rel, and rel when it is one
	if k == Dir {
		dirs++
	}
	for i := 1; i <= dirs; i++ {
		c.discover(strings.Join(parts[:i], "/"))
	}
	for i := len(parts); i >= 1; i-- {
		if u := c.unitDirs[c.abs(strings.Join(parts[:i], "/"))]; u != nil {
			return u.fam
		}
	}
	if u := c.unitFiles[c.abs(rel)]; u != nil {
		return u.fam
	}
	for i := len(parts) - 1; i >= 0; i-- {
		dir := strings.Join(parts[:i], "/")
		if !c.isOrNamed(dir) {
			continue
		}
		if metadata(strings.Join(parts[i:], "/")) {
			return c.familyOf(c.abs(dir))
		}
		return nil // only the innermost git directory's own files
	}
	return nil
}

// metadata reports the files of a git directory (rest relative to it)
// that are its repository's state: history files, config, and what links
// a worktree to its repository.
func metadata(rest string) bool {
	switch rest {
	case "config", "config.worktree", "commondir", "gitdir":
		return true
	}
	return historyFile(rest)
}

// discover finds, once for each directory rel (workspace-relative), the
// families reached from it: a git directory it is, or the one its .git
// names (a new repository, or a work tree whose .git names a unit).
func (c *Checker) discover(rel string) {
	if c.discovered[rel] {
		return
	}
	c.discovered[rel] = true
	p := c.abs(rel)
	if c.isOrNamed(rel) {
		c.familyOf(p)
	}
	st, err := c.cfg.Final.Lstat(p + "/.git")
	switch {
	case err != nil:
	case st.IsDir():
		if IsGitDir(c.cfg.Final, p+"/.git") != NotGitDir {
			c.familyOf(p + "/.git")
		}
	case st.IsRegular():
		target, v := ReadGitfile(c.cfg.Final, p+"/.git")
		if v != GitDir {
			return
		}
		if holder := placeOf(target); holder != "" {
			c.familyOf(holder)
		}
		c.addTree(c.units[target], p)
	}
}

// placeOf is the git directory whose worktrees/ or modules/ holds the git
// directory gd (by its place), "" when neither does.
func placeOf(gd string) string {
	if parent := filepath.Dir(gd); filepath.Base(parent) == "worktrees" {
		return filepath.Dir(parent)
	}
	if i := strings.LastIndex(gd, "/modules/"); i > 0 {
		return gd[:i]
	}
	return ""
}

// rollback says why the metadata of f is kept as it was ("" when it is
// committed). While f is being judged it says "": a change judged then is
// judged as if f were committed, which is what counts when it is.
func (c *Checker) rollback(f *family) string {
	switch f.state {
	case 1:
		return ""
	case 2:
		return f.why
	}
	f.state = 1
	why := c.familyWhy(f)
	f.why, f.state = why, 2
	return why
}

// familyWhy judges f: its units, then the history and the config of each
// of its git directories.
func (c *Checker) familyWhy(f *family) string {
	for _, u := range f.units {
		if why := c.unitWhy(u); why != "" {
			return u.workflow(c) + " is rolled back as a whole: " + why + "; nothing of it is committed, and " + c.keptAsWas(f)
		}
	}
	for _, g := range f.gitDirs {
		rel, ok := c.within(g)
		if !ok || c.units[g] != nil {
			continue
		}
		if c.touched(f, g) {
			if why := c.history(rel); why != "" {
				return why + "; " + c.keptAsWas(f) + c.withUnits(f)
			}
		}
		for _, name := range []string{"config", "config.worktree", "commondir", "gitdir"} {
			// A refused config alone leaves nothing half-written (the rest
			// of the repository does not depend on it); with units of the
			// run, it may hold theirs (submodule.<name>.url).
			if len(f.units) == 0 || !c.changed(g+"/"+name) {
				continue
			}
			if v := c.check(joinRel(rel, name), c.kindAt(g+"/"+name)); v.Action == Refuse {
				return v.Why + "; so " + c.keptAsWas(f) + c.withUnits(f)
			}
		}
	}
	return ""
}

func (c *Checker) keptAsWas(f *family) string {
	return "the repository " + c.relName(f.common) + " keeps its refs, index, config and logs as they were (new objects stay, unreachable)"
}

// withUnits names the units rolled back with a family.
func (c *Checker) withUnits(f *family) string {
	var names []string
	for _, u := range f.units {
		names = append(names, u.workflow(c))
	}
	if len(names) == 0 {
		return ""
	}
	return "; with it, nothing of " + strings.Join(names, ", ") + " is committed"
}

// unitWhy says why u is refused: its structure, or the first of its
// files the rules refuse. "" when it is committed.
func (c *Checker) unitWhy(u *unit) string {
	if u.why != "" {
		return u.why
	}
	why := ""
	c.unitMembers(u, func(rel string, k Change) bool {
		if v := c.check(rel, k); v.Action == Refuse {
			why = strings.TrimSuffix(v.Why, historyKept)
			if !strings.HasPrefix(why, rel+":") && !strings.HasPrefix(why, rel+" ") {
				why = rel + ": " + why
			}
			return false
		}
		return true
	})
	return why
}

// unitMembers calls fn for every path of u in the final tree, until fn
// returns false: its git directory (not the objects themselves, named by
// their content), its work trees (of one that was there, only what the
// run wrote, when the tree can tell), and the superproject's .gitmodules
// when the run changed it.
func (c *Checker) unitMembers(u *unit, fn func(rel string, k Change) bool) {
	ok := true
	visit := func(p string, st Info) bool {
		if !ok {
			return false
		}
		if rel, in := c.within(p); in {
			ok = fn(rel, kindOf(st))
		}
		return ok
	}
	if st, err := c.cfg.Final.Lstat(u.gitDir); err == nil && visit(u.gitDir, st) {
		walk(c.cfg.Final, u.gitDir, 32, func(p string, st Info) bool {
			if strings.HasPrefix(p, u.gitDir+"/objects/") && !strings.HasPrefix(p, u.gitDir+"/objects/info") {
				return false
			}
			return visit(p, st)
		})
	}
	layered, _ := c.cfg.Final.(Layered)
	for _, t := range u.trees {
		whole := c.unitDirs[t] == u
		if st, err := c.cfg.Final.Lstat(t); whole && (err != nil || !visit(t, st)) {
			continue
		}
		walk(c.cfg.Final, t, 64, func(p string, st Info) bool {
			if !whole && p != t+"/.git" && (layered == nil || !layered.InLayer(p)) {
				return st.IsDir()
			}
			return visit(p, st)
		})
	}
	if u.kind == submoduleUnit && u.superTree != "" && c.changed(u.superTree+"/.gitmodules") {
		if st, err := c.cfg.Final.Lstat(u.superTree + "/.gitmodules"); err == nil {
			visit(u.superTree+"/.gitmodules", st)
		}
	}
}

func kindOf(st Info) Change {
	switch {
	case st.IsDir():
		return Dir
	case st.IsSymlink():
		return Symlink
	}
	return File
}

// kindAt is the change the final tree makes at p: a removal when nothing
// is there.
func (c *Checker) kindAt(p string) Change {
	st, err := c.cfg.Final.Lstat(p)
	if err != nil {
		return Remove
	}
	return kindOf(st)
}

// touched reports whether the run wrote history files in the git
// directory g of f (or its common directory); always, when the final tree
// cannot tell.
func (c *Checker) touched(f *family, g string) bool {
	l, ok := c.cfg.Final.(layerLister)
	if !ok {
		return true
	}
	for _, d := range []string{g, f.common} {
		names, _ := l.LayerNames(d)
		for _, n := range names {
			if historyFile(n) || n == "info" {
				return true
			}
		}
	}
	return false
}

// changed reports whether the run changed the file p: what the layer
// wrote, or, without a layer, a content that differs from what the tree
// before can read (a file it cannot read counts as unchanged: without a
// layer, these files are read-only during the run).
func (c *Checker) changed(p string) bool {
	if l, ok := c.cfg.Final.(Layered); ok {
		return l.InLayer(p)
	}
	before, err := readFollow(c.cfg.Before, p, gitfileLimit<<2)
	if err != nil {
		return hasEntry(c.cfg.Final, p) && c.absentBefore(p)
	}
	now, err := readFollow(c.cfg.Final, p, gitfileLimit<<2)
	return err != nil || string(now) != string(before)
}

// absentBefore reports that nothing was at p before, when the tree before
// can tell: by listing p's directory, or, for a protected name, by the
// names the start scan found.
func (c *Checker) absentBefore(p string) bool {
	if l, ok := c.cfg.Before.(lister); ok {
		if names, err := l.ReadDir(filepath.Dir(p)); err == nil {
			return !slices.Contains(names, filepath.Base(p))
		}
	}
	rel, ok := c.within(p)
	if _, _, named := c.cfg.Names.Match(rel); ok && named {
		return !slices.Contains(c.cfg.StartNamed, rel)
	}
	return false
}

// within returns p (absolute) relative to the workspace when it lies in
// it ("" for the workspace itself).
func (c *Checker) within(p string) (string, bool) {
	if p == c.cfg.Workspace {
		return "", true
	}
	return pathtree.Below(c.cfg.Workspace, p)
}

// relName names p for a person: workspace-relative when it is inside.
func (c *Checker) relName(p string) string {
	if rel, ok := c.within(p); ok {
		if rel == "" {
			return "the workspace"
		}
		return rel
	}
	return p
}

// relOf is p relative to the workspace, for the rules (p as is when
// outside).
func (c *Checker) relOf(p string) string {
	if rel, ok := c.within(p); ok {
		return rel
	}
	return p
}

// Rollback is a repository whose metadata is kept as it was, with the new
// linked worktrees and submodules it would have held.
type Rollback struct {
	// GitDirs are its git directories (workspace-relative): their history
	// files are to be as they were.
	GitDirs []string
	// Paths are what the run created for its units (workspace-relative):
	// their git directories, and their work trees when new. Sorted.
	Paths []string
	Why   string
}

// Rollbacks lists the repositories with units of this run whose metadata
// is kept as it was, for a caller that must take the units out itself (a
// run written straight to the workspace).
func (c *Checker) Rollbacks() []Rollback {
	c.loadFamilies()
	var out []Rollback
	for _, f := range c.sortedFamilies() {
		if len(f.units) == 0 {
			continue
		}
		why := c.rollback(f)
		if why == "" {
			continue
		}
		rb := Rollback{Why: why}
		for _, g := range f.gitDirs {
			if rel, ok := c.within(g); ok && c.units[g] == nil {
				rb.GitDirs = append(rb.GitDirs, rel)
			}
		}
		for _, u := range f.units {
			if rel, ok := c.within(u.gitDir); ok {
				rb.Paths = append(rb.Paths, rel)
			}
			for _, t := range u.trees {
				if rel, ok := c.within(t); ok && c.unitDirs[t] == u {
					rb.Paths = append(rb.Paths, rel)
				}
			}
		}
		sort.Strings(rb.Paths)
		out = append(out, rb)
	}
	return out
}

func (c *Checker) sortedFamilies() []*family {
	var keys []string
	for k := range c.families {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*family, 0, len(keys))
	for _, k := range keys {
		out = append(out, c.families[k])
	}
	return out
}

// Linked reports whether the workspace directory rel is the git directory
// of a linked worktree or submodule the run created that is committed
// whole: its structure is git's own, and its repository is not rolled
// back.
func (c *Checker) Linked(rel string) bool {
	c.loadFamilies()
	c.discover(rel)
	u := c.units[c.abs(rel)]
	return u != nil && u.why == "" && c.rollback(u.fam) == ""
}

// RolledBack says why the metadata of the repository whose git directory
// is rel (workspace-relative) is kept as it was: its history, a refused
// config, or a unit of this run refused in part. "" when it is committed.
func (c *Checker) RolledBack(rel string) string {
	c.loadFamilies()
	return c.rollback(c.familyOf(c.abs(rel)))
}
