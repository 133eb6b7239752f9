package persist

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/gitconfig"
	"github.com/sandboxd/sandboxd/pathtree"
	"golang.org/x/sys/unix"
)

// Change is what happened at a path.
type Change int

const (
	// File: a regular file was created or changed.
	File Change = iota
	// Dir: a directory was created, or its metadata changed.
	Dir
	// Symlink: a symlink was created or changed.
	Symlink
	// Remove: the entry was removed.
	Remove
)

// Action is what becomes of a change.
type Action int

const (
	// Keep: commit it.
	Keep Action = iota
	// List: commit it, and list it for the person (report and stderr);
	// never reviewed, never counted by the circuit breaker.
	List
	// Refuse: never commit it (a persist boundary, hard-denied).
	Refuse
)

// Verdict is the decision for one change, and why.
type Verdict struct {
	Action Action
	Why    string
}

// Config is what a Checker needs to know.
type Config struct {
	// Workspace is the absolute, symlink-free workspace path.
	Workspace string
	// Final is the workspace as the change would leave it; Before as it
	// was. Paths outside the workspace read the host in both.
	Final, Before FS
	// Names are the persistence names (NewMatcher(Names(extra))).
	Names *Matcher
	// Unguarded are absolute roots outside the workspace that the command
	// wrote straight through, unchecked (the private caches, extra
	// writable roots): a repository there may hold anything.
	Unguarded []string
	// StartRepos are the repositories the workspace held before
	// (Scan.Repos); their configs name other files.
	StartRepos []Repo
	// FinalRepos are the repositories the final tree holds, when the
	// caller scanned it (a run without a layer); otherwise they are found
	// from the paths checked.
	FinalRepos []Repo
	// StartNamed are the protected names the workspace held before
	// (Scan.Named): one reached through a symlink guards its target.
	StartNamed []string
	// Home is the caller's home ("~" in git config); GlobalConfigs are
	// the caller's own git config files (~/.gitconfig, XDG), whose
	// core.hooksPath and include.path apply to every repository.
	Home          string
	GlobalConfigs []string
	// Umask is the caller's: new files get no mode bits it masks.
	Umask uint32
}

// Checker decides changes to one workspace. It memoizes what it reads,
// so it belongs to one commit or one sweep; it is not safe for concurrent
// use.
type Checker struct {
	cfg    Config
	gitDir map[string]bool // memo: is this (absolute) directory a git directory in Final
	wasGit map[string]bool // memo: in Before
	named  map[string]bool // memo: isOrNamed
	roles  map[string]role // absolute path → what a start repository's config makes it
	// ancestors are the directories (absolute) on the way to a start
	// repository, its work tree, or a role path, and why they matter.
	ancestors map[string]string
	// globalHooks are relative core.hooksPath values from the caller's
	// own config: relative to every work tree, new ones too.
	globalHooks []string
	// globalEntries are the caller's own git config entries (includes
	// followed), in both views.
	globalEntries []gitconfig.Entry
	rolesOK       bool
	shared        map[string]uint32 // memo: group/other write bits a git directory may keep
	kept          map[string]bool   // git directories whose sharing kept a write bit
	// histories memoizes history: why a git directory's new history is
	// refused ("" when it is not).
	histories map[string]string
	newRepos  map[string]string // memo: newRepo
	linked
}

// linked is what the Checker knows of repositories' families and the
// units the run created in them (rollback.go, linked.go).
type linked struct {
	famsOK     bool
	start      map[string]bool    // git directories the workspace held before
	families   map[string]*family // by common directory
	famOf      map[string]*family // git directory → its family
	units      map[string]*unit   // by git directory
	unitDirs   map[string]*unit   // a unit's git directory, and its work trees new in this run
	unitFiles  map[string]*unit   // a unit's gitfiles, and the .gitmodules declaring it
	declaring  map[string][]*unit // superproject work tree → the submodules it declares
	discovered map[string]bool    // workspace directories discover looked at
	memo       map[memoKey]Verdict
}

type memoKey struct {
	rel string
	k   Change
}

// role is what a path is to a repository that existed before.
type role struct {
	kind  roleKind
	owner string // the git directory (absolute)
	why   string
}

type roleKind int

const (
	roleConfig        roleKind = iota // a config file git reads for the repository
	roleHooks                         // the hooks directory (only *.sample may change)
	roleHooksPath                     // a core.hooksPath target (nothing may change)
	roleWorktreeHooks                 // a hooksPath that is a work tree: hook names may not change
	roleNamed                         // what a protected name points at (nothing may change)
)

// NewChecker returns a Checker for cfg.
func NewChecker(cfg Config) *Checker {
	return &Checker{cfg: cfg, gitDir: map[string]bool{}, wasGit: map[string]bool{}, named: map[string]bool{}, roles: map[string]role{}, ancestors: map[string]string{}, shared: map[string]uint32{}, kept: map[string]bool{}, histories: map[string]string{}, newRepos: map[string]string{},
		linked: linked{families: map[string]*family{}, famOf: map[string]*family{}, units: map[string]*unit{}, unitDirs: map[string]*unit{},
			unitFiles: map[string]*unit{}, declaring: map[string][]*unit{}, discovered: map[string]bool{}, memo: map[memoKey]Verdict{}}}
}

func (c *Checker) abs(rel string) string {
	if rel == "" || rel == "." {
		return c.cfg.Workspace
	}
	return c.cfg.Workspace + "/" + rel
}

// Check decides the change k at rel (workspace-relative): by the rules,
// and, for a repository's metadata, as a whole (rollback.go).
func (c *Checker) Check(rel string, k Change) Verdict {
	f := c.memberOf(rel, k)
	if f == nil {
		return c.check(rel, k)
	}
	if why := c.rollback(f); why != "" {
		return Verdict{Refuse, why}
	}
	key := memoKey{rel, k}
	if v, ok := c.memo[key]; ok {
		return v
	}
	v := c.check(rel, k)
	c.memo[key] = v
	return v
}

// check decides the change k at rel by the rules alone.
func (c *Checker) check(rel string, k Change) Verdict {
	var v Verdict
	worse := func(x Verdict) {
		if x.Action > v.Action {
			v = x
		}
	}
	parts := strings.Split(rel, "/")
	// Every git directory on the way, not only the innermost: a hooks
	// directory turned into a repository of its own is still hooks.
	for i := 0; i <= len(parts); i++ {
		dir := strings.Join(parts[:i], "/")
		if i == len(parts) {
			// rel itself, replaced or removed: was it a repository? Only a
			// directory can have been one (a changed directory is judged
			// by what is below it, unless the run made it a repository).
			if k == Dir {
				if why := c.freshRepo(rel); why != "" {
					return Verdict{Refuse, why}
				}
				continue
			}
			if parts[i-1] != ".git" {
				if st, err := c.cfg.Before.Lstat(c.abs(dir)); err != nil || !st.IsDir() || !c.was(dir) {
					continue
				}
			}
		} else if !c.isOrNamed(dir) {
			continue
		}
		worse(c.gitRule(dir, strings.Join(parts[i:], "/"), k))
		if v.Action == Refuse {
			return v
		}
	}
	worse(c.roleRule(rel, k))
	if v.Action == Refuse {
		return v
	}
	if k == Symlink || k == File {
		// Replacing a directory on the way to something guarded with a
		// link (or a file, which some tools read as one: a .jj/repo file
		// names the repository) would make tools read it from elsewhere.
		if why := c.redirects(rel); why != "" {
			return Verdict{Refuse, why}
		}
	}
	if k == Symlink {
		if why := c.linkIntoUnchecked(rel); why != "" {
			return Verdict{Refuse, why}
		}
	}
	if n, at, ok := c.cfg.Names.Match(rel); ok {
		if d, ok := c.declaration(rel, k, n, at); ok && c.exempt(rel, at) == "" {
			worse(d)
			return v
		}
		worse(c.nameRule(rel, k, n, at))
	}
	return v
}

// nameRule decides the change k at rel, which is at or below the
// protected name n (beginning at rel's element at), by n's kind.
func (c *Checker) nameRule(rel string, k Change, n Name, at int) Verdict {
	switch {
	case n.Kind == Instruction && k != Remove:
		return Verdict{List, n.Pattern + ": " + n.Why()}
	case n.Kind == Instruction:
		return Verdict{}
	case c.exempt(rel, at) != "":
		return Verdict{List, n.Pattern + ": " + n.Why() + "; committed because it is " + c.exempt(rel, at)}
	case n.Kind == Asked && k == Remove:
		return Verdict{}
	case n.Kind == Asked:
		// The tool asks before it first runs a new one; one the person
		// may already have chosen to run can run again without a new
		// question (a folder reopened in its container).
		if had := c.askedBefore(rel, n, at); had != "" {
			return Verdict{Refuse, n.Pattern + " is a persistence path: " + n.Why() + ", and " + had + " was there before the run: once the person chose it, it may run again without asking"}
		}
		return Verdict{List, n.Pattern + ": " + n.Why() + "; committed because it is new here, and the tool asks first"}
	case n.Kind == Settings:
		return c.settingsChange(rel, k, n, at)
	case n.Kind == Hooked && k == Remove:
		// Deleting runs nothing (a hook finds no config, or the one
		// that was there before).
		return Verdict{}
	case n.Kind == Hooked:
		if why, runs := c.runsHooks(rel, at); runs {
			return Verdict{Refuse, n.Pattern + " is a persistence path: " + n.Why() + ", and " + why}
		}
		return Verdict{List, n.Pattern + ": " + n.Why() + "; committed because no hook runs it here (installing one is a change to git's own files, which is refused)"}
	}
	return Verdict{Refuse, n.Pattern + " is a persistence path: " + n.Why()}
}

// linkIntoUnchecked says why the symlink at rel is refused: it leads to a
// directory whose names the rules do not judge (a package manager's
// tree, where they are only listed, or a root the command writes
// unchecked, such as its private caches), and a tool started in the
// directory it stands for reads its configuration there. "" when not.
func (c *Checker) linkIntoUnchecked(rel string) string {
	if _, in := InPackageTree(rel, strings.Count(rel, "/")+1); in {
		return "" // a package manager's own links (node_modules/.bin)
	}
	target, err := Resolve(c.cfg.Final, c.abs(rel), true)
	if err != nil {
		return ""
	}
	if st, err := c.cfg.Final.Lstat(target); err != nil || !st.IsDir() {
		return "" // a link to a file, or to nothing
	}
	for _, u := range c.cfg.Unguarded {
		if pathtree.Within(u, target) {
			return rel + " links to " + target + ", a directory sandboxd does not check: a tool started through it would run what is left there"
		}
	}
	if t, ok := pathtree.Below(c.cfg.Workspace, target); ok {
		if tree, in := InPackageTree(t, strings.Count(t, "/")+1); in {
			return rel + " links into " + tree + ", a package manager's tree, whose names are only listed: a tool started through it would run what is left there"
		}
	}
	return ""
}

// askedBefore names the file of n's tool that was in the directory of
// the name at element at of rel before the run ("" for none): the tool
// reads one of several spellings (Dev Containers prefers
// .devcontainer/devcontainer.json to .devcontainer.json), so a new one
// beside one the person already chose is a change to it.
func (c *Checker) askedBefore(rel string, n Name, at int) string {
	dir := strings.Join(strings.Split(rel, "/")[:at], "/")
	for _, o := range c.cfg.Names.Names() {
		first, _, _ := strings.Cut(o.Pattern, "/")
		if o.Kind != Asked || o.Tool != n.Tool || strings.ContainsAny(first, `*?[\`) {
			continue
		}
		if _, err := c.cfg.Before.Lstat(c.abs(joinRel(dir, first))); err == nil {
			return joinRel(dir, first)
		}
	}
	return ""
}

// redirects says why a link or file at rel would redirect something
// guarded: rel is on the way to a repository or a file a repository's
// config names (as they were before the run), or it is the first part of
// a protected name of several parts (".hg" of ".hg/hgrc"). "" when not.
func (c *Checker) redirects(rel string) string {
	c.loadRoles()
	if why, ok := c.ancestors[c.abs(rel)]; ok {
		return rel + " " + why + ": it must stay a directory"
	}
	if n, at, ok := c.cfg.Names.Prefix(rel); ok {
		if _, inTree := InPackageTree(rel, at); !inTree {
			return rel + " would redirect " + n.Pattern + ", a persistence path (" + n.Why() + ")"
		}
	}
	return ""
}

// exempt says why a protected name at element at of rel is committed
// anyway: it lies in a package-manager tree; "" when it does not. Nothing
// the command wrote exempts a name: a repository it "cloned" is one it
// could have forged (a .git with a remote is two commands), so a clone
// is judged like any other directory.
func (c *Checker) exempt(rel string, at int) string {
	if t, ok := InPackageTree(rel, at); ok {
		return "inside " + t + ", a package manager's tree"
	}
	return ""
}

// is reports whether the workspace directory rel is a git directory in
// the final tree (or git would stop on it).
func (c *Checker) is(rel string) bool { return c.gitDirIn(c.cfg.Final, c.gitDir, rel) }

// was is is for the tree before.
func (c *Checker) was(rel string) bool { return c.gitDirIn(c.cfg.Before, c.wasGit, rel) }

// freshRepo says why the directory rel is refused when it is a git
// directory (or a directory named .git) the run made where there was no
// directory before: newRepo. "" when it is not one, or one to keep.
func (c *Checker) freshRepo(rel string) string {
	if rel == "" || filepath.Base(rel) != ".git" && !c.is(rel) {
		return ""
	}
	c.loadFamilies()
	if c.existed(c.abs(rel)) {
		return ""
	}
	if why := c.newRepo(rel); why != "" {
		return "a new git repository " + why
	}
	return ""
}

// gitDirIn asks IsGitDir of rel in view, once (memo).
func (c *Checker) gitDirIn(view FS, memo map[string]bool, rel string) bool {
	p := c.abs(rel)
	v, ok := memo[p]
	if !ok {
		v = !noHead(view, p) && IsGitDir(view, p) != NotGitDir
		memo[p] = v
	}
	return v
}

// noHead is the cheap test first: no HEAD in it, no git directory. Paths
// here are the tree's own (from a walk), with no symlink on the way.
func noHead(view FS, dir string) bool {
	_, err := view.Lstat(dir + "/HEAD")
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)
}

// isOrNamed: a git directory now or before; or named ".git", or a
// worktree or submodule directory inside a git directory (worktrees/<id>,
// modules/.../<name> with a HEAD), whatever it holds: one that is not a
// repository yet is one after `git init` or one more file.
func (c *Checker) isOrNamed(rel string) bool {
	if v, ok := c.named[rel]; ok {
		return v
	}
	v := filepath.Base(rel) == ".git" || c.is(rel) || c.was(rel) || c.inner(rel)
	c.named[rel] = v
	return v
}

// inner reports a worktree or submodule git directory by its place.
func (c *Checker) inner(rel string) bool {
	parts := strings.Split(rel, "/")
	for i := len(parts) - 2; i >= 0; i-- {
		switch parts[i] {
		case "worktrees":
			if i == len(parts)-2 && c.isOrNamed(strings.Join(parts[:i], "/")) {
				return true
			}
		case "modules":
			if c.isOrNamed(strings.Join(parts[:i], "/")) {
				for _, view := range []FS{c.cfg.Final, c.cfg.Before} {
					if _, err := view.Lstat(c.abs(rel) + "/HEAD"); err == nil {
						return true
					}
				}
			}
		}
	}
	return false
}

// gitRule decides a change at rest inside the git directory gd, in
// phases: the first that speaks for the change decides it.
func (c *Checker) gitRule(gd, rest string, k Change) Verdict {
	g := gitChange{gd: gd, rest: rest, k: k, name: gd}
	if g.name == "" {
		g.name = "the workspace"
	}
	g.first, g.sub, _ = strings.Cut(rest, "/")
	if v, ok := c.historyPhase(g); ok {
		return v
	}
	if v, ok := removalPhase(g); ok {
		return v
	}
	if v, ok := c.selfPhase(g); ok {
		return v
	}
	if v, ok := symlinkPhase(g); ok {
		return v
	}
	if v, ok := hooksPhase(g); ok {
		return v
	}
	if v, ok := c.configPhase(g); ok {
		return v
	}
	if v, ok := c.statePhase(g); ok {
		return v
	}
	v, _ := c.markerPhase(g)
	return v
}

// gitChange is one change inside a git directory, as gitRule's phases
// read it: the change k at rest (first/sub: its first element and the
// rest) inside gd, which a person knows as name.
type gitChange struct {
	gd, rest, first, sub, name string
	k                          Change
}

func (g gitChange) refuse(why string) (Verdict, bool) { return Verdict{Refuse, why}, true }

// historyPhase: a history file whose change adds history the rules
// refuse (history.go) is refused with the rest of that history.
func (c *Checker) historyPhase(g gitChange) (Verdict, bool) {
	if (g.k == File || g.k == Remove) && historyFile(g.rest) {
		return c.historyRefusal(g.gd, g.rest)
	}
	return Verdict{}, false
}

// removalPhase: deleting runs nothing; everything that stays is checked.
func removalPhase(g gitChange) (Verdict, bool) {
	return Verdict{}, g.k == Remove
}

// selfPhase: the git directory itself stays a directory, but for the
// gitfile of a linked worktree or submodule git made.
func (c *Checker) selfPhase(g gitChange) (Verdict, bool) {
	if g.rest != "" {
		return Verdict{}, false
	}
	if g.k != Dir && !(g.k == File && c.unitGitfile(g.gd)) {
		return g.refuse(g.name + " is a git directory and would become a redirect: git would take its hooks and config from elsewhere")
	}
	return Verdict{}, true
}

// symlinkPhase: git makes no symlinks in its directory; one would let
// what it reads there (hooks, config, sequencer state, submodules,
// worktrees) come from a place no rule looks at.
func symlinkPhase(g gitChange) (Verdict, bool) {
	if g.k != Symlink {
		return Verdict{}, false
	}
	return g.refuse(joinRel(g.gd, g.rest) + " would be a symlink in the git directory " + g.name + ": what git reads there must stay in it")
}

// hooksPhase: hooks stays a directory, holding only git's samples.
func hooksPhase(g gitChange) (Verdict, bool) {
	switch {
	case g.rest == "hooks" && g.k != Dir:
		return g.refuse(g.name + "/hooks must stay a directory")
	case g.rest == "hooks":
		return Verdict{}, true
	case g.first != "hooks":
		return Verdict{}, false
	case g.k == File && strings.HasSuffix(g.sub, ".sample") && !strings.Contains(g.sub, "/"):
		return Verdict{}, true
	}
	return g.refuse("a git hook in " + g.name + " runs outside the sandbox")
}

// configPhase: where git, or Sapling on git's repository, takes config
// from: Sapling's .git/sl, a commondir (another repository's hooks and
// config), the config files themselves.
func (c *Checker) configPhase(g gitChange) (Verdict, bool) {
	switch {
	case g.first == "sl" && g.k != Dir:
		// facebook/sapling identity SL_GIT: hooks and extensions.
		return g.refuse(joinRel(g.gd, g.rest) + " is Sapling's config for " + g.name + ": sl runs the hooks and extensions it names")
	case g.rest == "commondir" && g.k == File && c.unitCommondir(g.gd):
		return Verdict{}, true
	case g.rest == "commondir":
		return g.refuse("commondir points git at another repository's hooks and config")
	case g.rest == "config" || g.rest == "config.worktree":
		return c.configChange(c.abs(joinRel(g.gd, g.rest)), g.k, g.gd), true
	}
	return Verdict{}, false
}

// statePhase: state git acts on later: an operation in progress (its
// todo list, its strategy), a legacy remote's URL, borrowed objects.
func (c *Checker) statePhase(g gitChange) (Verdict, bool) {
	gd, rest, first, sub := g.gd, g.rest, g.first, g.sub
	switch {
	case sequencerDir(first) && sub != "":
		return c.stateFile(gd, rest, g.k, "is sequencer state", func(b []byte) (string, bool) {
			return stateRisk(first, filepath.Base(sub), b)
		}), true
	case (first == "remotes" || first == "branches") && sub != "" && !strings.Contains(sub, "/"):
		return c.stateFile(gd, rest, g.k, "names a remote", func(b []byte) (string, bool) {
			for _, u := range remoteURLs(first, b) {
				if why, bad := c.urlRisk(u, gd); bad {
					return joinRel(gd, rest) + ": " + why, true
				}
			}
			return "", false
		}), true
	case rest == "objects/info/alternates":
		return c.alternatesRule(gd, rest, g.k), true
	}
	return Verdict{}, false
}

// markerPhase: HEAD, objects and refs make gd a repository; if it was not
// one, what it already held (config, hooks) would start to count, and
// what it holds now must be what a new repository may (newRepo).
func (c *Checker) markerPhase(g gitChange) (Verdict, bool) {
	if g.rest != "HEAD" && g.rest != "objects" && g.rest != "refs" || c.was(g.gd) {
		return Verdict{}, false
	}
	if why, bad := c.dormant(g.gd); bad {
		return g.refuse("this would make " + g.name + " a git repository, and " + why)
	}
	if c.is(g.gd) {
		if why := c.newRepo(g.gd); why != "" {
			return g.refuse("this would make " + g.name + " a git repository " + why)
		}
	}
	return Verdict{}, true
}

// alternatesRule decides a change to gd's objects/info/alternates (rest):
// a plain file that borrows from no place the command could fill.
func (c *Checker) alternatesRule(gd, rest string, k Change) Verdict {
	if k != File {
		return Verdict{Refuse, joinRel(gd, rest) + " must stay a plain file"}
	}
	b, _ := c.cfg.Final.ReadFile(c.abs(joinRel(gd, rest)), gitfileLimit)
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if c.plantable(line, c.abs(joinRel(gd, "objects"))) {
			return Verdict{Refuse, joinRel(gd, rest) + " borrows objects from a repository the command could write outside the workspace; git runs that repository's config when it fetches"}
		}
	}
	return Verdict{}
}

// stateFile checks a file of state git reads later (k is a change that is
// not a removal): a symlink is refused (what it points at could change
// unchecked), a file's content judged by risk.
func (c *Checker) stateFile(gd, rest string, k Change, what string, risk func([]byte) (string, bool)) Verdict {
	p := joinRel(gd, rest)
	switch k {
	case Symlink:
		return Verdict{Refuse, p + " " + what + " and must stay a plain file"}
	case File:
		b, err := c.cfg.Final.ReadFile(c.abs(p), gitfileLimit)
		if err != nil {
			return Verdict{Refuse, "cannot read " + p + " (" + reason(err) + ")"}
		}
		if why, bad := risk(b); bad {
			return Verdict{Refuse, why}
		}
	}
	return Verdict{}
}

// dormant checks what a directory that becomes a git directory already
// held before: its config and hooks were just files until now.
func (c *Checker) dormant(gd string) (string, bool) {
	before := c.cfg.Before
	dir := c.abs(gd)
	for _, f := range []string{"config", "config.worktree"} {
		b, err := readFollow(before, filepath.Join(dir, f), gitconfig.MaxSize)
		if err != nil {
			continue
		}
		ents, err := gitconfig.Parse(b)
		if err != nil {
			return "its " + f + " cannot be parsed", true
		}
		for _, e := range ents {
			if why, bad := gitconfig.ExecCapable(e); bad {
				return "its " + f + " has " + entryName(e) + ": " + why, true
			}
		}
	}
	if _, err := before.Lstat(filepath.Join(dir, "commondir")); err == nil {
		return "it has a commondir", true
	}
	for _, sd := range sequencerDirs() {
		for _, f := range []string{"git-rebase-todo", "todo", "strategy", "opts"} {
			if b, err := readFollow(before, filepath.Join(dir, sd, f), gitfileLimit); err == nil {
				if why, bad := stateRisk(sd, f, b); bad {
					return why, true
				}
			}
		}
	}
	if st, err := before.Lstat(filepath.Join(dir, "hooks")); err == nil {
		if !st.IsDir() {
			return "its hooks is not a directory", true
		}
		if names, ok := before.(lister); ok {
			ents, err := names.ReadDir(filepath.Join(dir, "hooks"))
			if err != nil {
				return "its hooks cannot be read", true
			}
			for _, n := range ents {
				if !strings.HasSuffix(n, ".sample") {
					return "its hooks directory holds " + n, true
				}
			}
		} else {
			return "it has a hooks directory", true
		}
	}
	return "", false
}

// lister is an FS that can list a directory.
type lister interface {
	ReadDir(path string) ([]string, error)
}

// configChange refuses a git config file change that adds anything able
// to run a program, or a URL into a place the command could fill.
func (c *Checker) configChange(p string, k Change, gd string) Verdict {
	rel := strings.TrimPrefix(strings.TrimPrefix(p, c.cfg.Workspace), "/")
	if k == Remove {
		return Verdict{}
	}
	if k != File {
		return Verdict{Refuse, rel + " is git config and must stay a plain file"}
	}
	b, err := c.cfg.Final.ReadFile(p, gitconfig.MaxSize+1)
	if err != nil {
		return Verdict{Refuse, "cannot read " + rel + " (" + reason(err) + ")"}
	}
	now, err := gitconfig.Parse(b)
	if err != nil {
		return Verdict{Refuse, "git config " + rel + " cannot be parsed (" + reason(err) + ")"}
	}
	var before []gitconfig.Entry
	if old, err := c.cfg.Before.ReadFile(p, gitconfig.MaxSize); err == nil {
		before, _ = gitconfig.Parse(old)
	}
	if added := c.unitWorktree(p, gitconfig.Compare(before, now)); len(added) > 0 {
		why, _ := gitconfig.ExecCapable(added[0])
		return Verdict{Refuse, "git config " + rel + " gains " + entryName(added[0]) + ": " + why}
	}
	had := map[string]bool{}
	for _, e := range before {
		if u, ok := gitconfig.URL(e); ok {
			had[u] = true
		}
	}
	for _, e := range now {
		if u, ok := gitconfig.URL(e); ok && !had[u] {
			if why, bad := c.urlRisk(u, gd); bad {
				return Verdict{Refuse, "git config " + rel + " gains " + entryName(e) + ": " + why}
			}
		}
	}
	return Verdict{}
}

// urlRisk: a local-path URL into a place outside the workspace that the
// command could write: pushing there runs that repository's hooks.
func (c *Checker) urlRisk(u, gd string) (string, bool) {
	if _, ok := gitconfig.LocalPath(u); !ok {
		e := gitconfig.Entry{Section: "remote", Subsection: "x", Key: "url", Value: u}
		if why, bad := gitconfig.ExecCapable(e); bad {
			return u + " " + why, true
		}
		return "", false
	}
	p, _ := gitconfig.LocalPath(u)
	// Relative to where git runs: the work tree or the git directory.
	for _, base := range []string{filepath.Dir(c.abs(gd)), c.abs(gd)} {
		if c.plantable(p, base) {
			return "it points at " + p + ", where the command could have planted a repository whose hooks run on push", true
		}
	}
	return "", false
}

// plantable reports whether path (absolute, "~/...", or relative to base)
// resolves into an unguarded root.
func (c *Checker) plantable(path, base string) bool {
	switch {
	case strings.HasPrefix(path, "~/") && c.cfg.Home != "":
		path = c.cfg.Home + path[1:]
	case !filepath.IsAbs(path):
		path = base + "/" + path
	}
	for _, view := range []FS{c.cfg.Final, c.cfg.Before} {
		r, err := Resolve(view, path, true)
		if err != nil {
			continue
		}
		for _, u := range c.cfg.Unguarded {
			if pathtree.Within(u, r) {
				return true
			}
		}
	}
	return false
}

func entryName(e gitconfig.Entry) string {
	if e.Subsection != "" {
		return e.Section + "." + e.Subsection + "." + e.Key
	}
	return e.Section + "." + e.Key
}

func joinRel(dir, rest string) string {
	switch {
	case dir == "":
		return rest
	case rest == "":
		return dir
	}
	return dir + "/" + rest
}
