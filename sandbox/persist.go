package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/gitconfig"
	"github.com/sandboxd/sandboxd/persist"
	"golang.org/x/sys/unix"
)

// Persistence paths are files in the workspace that something on the host
// runs or loads later without a sandbox: git hooks and config, direnv's
// .envrc, editor tasks, agent settings (package persist says which). This
// file protects them when the run writes straight to the workspace
// (--no-transaction, or no layer possible); with the copy-on-write layer,
// package layer checks them at commit instead, with the same rules.
//
// Those that exist when the run starts are bound read-only, and every
// directory between the workspace and them is pinned (bound onto itself)
// so it cannot be renamed away. Those that do not exist cannot be blocked
// by a mount: after the command and all its processes are gone, the
// workspace is scanned again, and whatever the rules refuse among what is
// new (a repository, a protected name at any depth, sequencer state or a
// redirect in an existing repository) is moved into sandboxd's quarantine.
// What the rules list (agent instructions, protected names in a package
// tree or a new clone) stays and is reported; git directories, hooks and
// configs, and any directory, that gained group or other write lose it.

type fileID struct{ dev, ino uint64 }

// markID is an entry as it was, content and mode included (ctime).
type markID struct {
	ino   uint64
	ctime int64
}

// persistPlan is what the helper binds and what the supervisor checks
// after the run. Paths are relative to the workspace.
type persistPlan struct {
	ws       string
	uid      int // the caller's
	m        *persist.Matcher
	pins     []string                // directories to pin, parents first
	readOnly []string                // existing protected files and directories
	watch    map[string]fileID       // sensitive paths and what was there at start (zero = nothing)
	repos    map[string]fileID       // git directories inside the workspace at start
	named    map[string]fileID       // protected names and instruction files at start
	ctimes   map[string]int64        // instruction files' change times at start
	modes    map[string]uint32       // git directories, hooks and configs: mode at start
	acls     map[string]uint8        // git directories and hooks: ACLs at start
	shared   map[string]uint32       // git directory → group/other write sharing allows
	markers  map[string]markID       // what made or could make a directory a repository (HEAD, objects, ...) at start
	scan     *persist.Scan           // the workspace scan the plan was made from
	cfg      persist.Config          // for the checks after the run
	since    int64                   // the run's start, as change times count it
	history  map[string]*historySnap // repository (workspace-relative git directory) → its history files before
	umask    uint32                  // the caller's
	pinned   map[string]bool         // pins as a set, while planning
}

func lstatID(p string) (fileID, os.FileInfo, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return fileID{}, nil, err
	}
	sys := st.Sys().(*syscall.Stat_t)
	return fileID{uint64(sys.Dev), sys.Ino}, st, nil
}

// gitWatched are the paths in a git directory that make git run or load
// something, beyond hooks and config: bound read-only when they exist,
// checked after the run when they appear.
func gitWatched() []string {
	return []string{"config.worktree", "commondir", "rebase-merge", "rebase-apply", "sequencer",
		"remotes", "branches", "objects/info/alternates"}
}

// gitNested hold other git directories (submodules, linked worktrees):
// pinned when they exist (git adds to them), watched when they do not.
func gitNested() []string { return []string{"modules", "worktrees"} }

// planPersistence finds the protected paths of the workspace. prev is the
// last remembered scan of it, if any.
func planPersistence(spec *Spec, prev *persist.Scan) (*persistPlan, error) {
	ws := spec.Workspace
	m := persist.NewMatcher(persist.Names(spec.Protected))
	p := &persistPlan{ws: ws, uid: spec.UID, m: m, umask: spec.Umask, history: map[string]*historySnap{},
		// Change times come from a coarse clock; anything stamped in the
		// moments before the run counts as the run's, which errs safe.
		since: time.Now().Add(-50 * time.Millisecond).UnixNano(),
		watch: map[string]fileID{}, repos: map[string]fileID{}, named: map[string]fileID{},
		ctimes: map[string]int64{}, modes: map[string]uint32{}, acls: map[string]uint8{}, shared: map[string]uint32{}, markers: map[string]markID{},
		pinned: map[string]bool{}}
	scan, err := persist.ScanWorkspace(ws, m, prev)
	if err != nil {
		return nil, err
	}
	p.scan = scan
	if _, ok := p.watch[".git"]; !ok {
		p.watch[".git"] = fileID{}
	}
	p.planMarkers()
	p.planDotgits()
	repos := scan.Repos(ws, persist.Host{})
	var gitDirs []string
	for _, r := range repos {
		gitDirs = append(gitDirs, r.GitDir)
		p.planRepo(r)
	}
	p.cfg = persist.Config{Workspace: ws, Final: persist.Host{}, Before: persist.Host{}, Names: m,
		Unguarded: append(append([]string(nil), spec.Writable...), spec.Caches...), StartRepos: repos, StartNamed: scan.Named(ws, m),
		Home: spec.Home, GlobalConfigs: spec.GitConfigs}
	c := persist.NewChecker(p.cfg)
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
func (p *persistPlan) pin(rel string) {
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
func (p *persistPlan) protect(rel string) {
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
func (p *persistPlan) planMarkers() {
	for _, mk := range []string{"HEAD", "objects", "refs", "commondir"} {
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
func (p *persistPlan) planDotgits() {
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
func (p *persistPlan) planRepo(r persist.Repo) {
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
				p.acls[filepath.Join(rel, f)] = persist.DirACL(filepath.Join(r.GitDir, f))
			}
		}
	}
}

// planRoles protects what the repositories' configs (and the caller's)
// make hooks or config, wherever it lies: symlinked config and hooks,
// commondir targets, include files, core.hooksPath.
func (p *persistPlan) planRoles(c *persist.Checker) {
	for _, role := range c.Roles() {
		rel, ok := within(p.ws, role.Path)
		if !ok {
			continue
		}
		if role.Kind == persist.WorktreeHooks {
			// A hooksPath that is a work tree: only its hook names.
			for _, h := range persist.HookNames() {
				p.protect(filepath.Join(rel, h))
			}
			continue
		}
		p.pin(rel)
		p.protect(rel)
	}
}

// planNamed protects the protected names, at any depth.
func (p *persistPlan) planNamed(c *persist.Checker) {
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
		if _, inTree := persist.InPackageTree(rel, at); inTree && n.Kind != persist.Instruction {
			continue // a package manager updates its own tree
		}
		if listedOnChange(n) && !(n.Kind == persist.Hooked && runsHooks(c, rel, at)) {
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

func runsHooks(c *persist.Checker, rel string, at int) bool {
	_, runs := c.RunsHooks(rel, at)
	return runs
}

// listedOnChange reports the kinds of names a run may change in place:
// a change is judged after the run (listed, or, for a hook manager's
// file in a repository that came to run hooks, quarantined). A name the
// tool asks about is not one: a change to one that was there is refused,
// so it is read-only for the run like the rest.
func listedOnChange(n persist.Name) bool {
	return n.Kind == persist.Instruction || n.Kind == persist.Hooked
}

// sharedAtStart is what group/other write the repository rel may keep.
func sharedAtStart(c *persist.Checker, rel string) uint32 {
	m, _ := c.Mode(filepath.Join(rel, "config"), unix.S_IFREG|0o666, &persist.Info{Mode: 0o666})
	return m & 0o022
}

// within returns path relative to ws when it lies strictly inside it.
func within(ws, path string) (string, bool) {
	rel, err := filepath.Rel(ws, filepath.Clean(path))
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

// candidate is something new in the workspace after the run.
type candidate struct {
	rel  string
	repo bool   // a git directory that is new (or was replaced)
	why  string // refused for this reason without a look
}

// sweep runs after every process of the run is gone. Whatever the rules
// refuse among what is new is moved to quarantine (or removed when
// quarantine is on another file system); what they list is reported. The
// scan never follows symlinks, and each move is done relative to a parent
// opened beneath the workspace without symlinks. A pass can uncover more
// (a fake repository hid what is below it until its HEAD went), so passes
// repeat until one moves nothing. Afterwards p.scan is the workspace as
// the command left it.
func (p *persistPlan) sweep(quarantine string) ([]Persisted, error) {
	const maxPasses = 8
	scanner := persist.Scanner{Names: p.m, Unlock: true, Owner: p.uid}
	start := p.scan
	cfg := p.cfg
	// What the rules say, with the workspace as it is now and, before,
	// what the scan at the start saw.
	cfg.Before = newSnapFS(start.Tree(p.ws), p.history)
	st := &sweepState{quarantine: quarantine, listed: map[string]bool{}, rolled: map[string]string{}}
	var after *persist.Scan
	var lastChecker *persist.Checker // the rules as the last pass saw the workspace
	for pass := 0; ; pass++ {
		var err error
		after, err = scanner.Scan(p.ws, start)
		if err != nil {
			return st.out, errors.Join(append(st.errs, err)...)
		}
		if pass == maxPasses {
			st.errs = append(st.errs, errors.New("the workspace kept changing under the persistence sweep"))
			break
		}
		cfg.FinalRepos = after.Repos(p.ws, persist.Host{})
		c := persist.NewChecker(cfg)
		lastChecker = c
		if p.sweepPass(after, c, st) == 0 {
			break
		}
	}
	// History the run added that would bring back what the rules refuse
	// is undone (persist/history.go).
	hc := lastChecker
	if hc == nil {
		hc = persist.NewChecker(cfg)
	}
	p.restoreHistory(hc, st)
	narrowed := p.narrow(after, st.gone)
	st.out = append(st.out, narrowed...)
	// What the plan read afresh is new to the remembered scan too; after
	// a move (or a mode put back) the workspace is scanned once more.
	if len(st.gone) > 0 || len(narrowed) > 0 {
		if err := rescan(p, after); err != nil {
			st.errs = append(st.errs, err)
		}
	} else {
		after.MarkFresh()
		p.scan = after
	}
	sort.SliceStable(st.out, func(a, b int) bool { return st.out[a].Path < st.out[b].Path })
	return st.out, errors.Join(st.errs...)
}

// sweepState is what the passes of one sweep have done so far.
type sweepState struct {
	quarantine string
	out        []Persisted
	gone       []string // moved out of the workspace
	errs       []error
	listed     map[string]bool
	// rolled are git directories whose repository's metadata a pass
	// rolled back (persist.Rollback), and why: what the pass took out is
	// gone from the next pass's view, the reason must not be.
	rolled map[string]string
}

// sweepPass judges what is new since the start, as the workspace is
// after, and moves out what the rules refuse. It returns how many
// entries it moved.
func (p *persistPlan) sweepPass(after *persist.Scan, c *persist.Checker, st *sweepState) int {
	cands, notes := p.candidates(after, c)
	for _, n := range notes {
		if !st.listed[n.Path] {
			st.listed[n.Path] = true
			st.out = append(st.out, n)
		}
	}
	moved := p.rollBack(c, st)
	for _, cd := range cands {
		if under(cd.rel, st.gone) {
			continue // it went with a directory above it
		}
		var v persist.Verdict
		target := cd.rel
		switch {
		case cd.repo:
			v, target = p.judgeRepo(c, cd.rel, p.scan)
		case cd.why != "":
			v = persist.Verdict{Action: persist.Refuse, Why: cd.why}
		default:
			v = judgeTree(c, p.ws, cd.rel)
		}
		switch v.Action {
		case persist.Keep:
			continue
		case persist.List:
			if !st.listed[cd.rel] {
				st.listed[cd.rel] = true
				st.out = append(st.out, Persisted{Path: cd.rel, Action: "listed", Why: v.Why})
			}
			continue
		}
		moved += p.quarantine(strings.Split(target, "\x00"), v.Why, st)
	}
	return moved
}

// rollBack takes out what the run created for the linked worktrees and
// submodules of each repository whose metadata the rules roll back
// (their new git directories and work trees: the rest of a unit, its
// gitfiles and .gitmodules, goes as a candidate), and remembers the
// repository for restoreHistory. It returns how many entries it moved.
func (p *persistPlan) rollBack(c *persist.Checker, st *sweepState) int {
	moved := 0
	for _, rb := range c.Rollbacks() {
		for _, g := range rb.GitDirs {
			if st.rolled[g] == "" {
				st.rolled[g] = rb.Why
			}
		}
		moved += p.quarantine(rb.Paths, rb.Why, st)
	}
	return moved
}

// quarantine moves each target out of the workspace.
func (p *persistPlan) quarantine(targets []string, why string, st *sweepState) int {
	moved := 0
	for _, t := range targets {
		if under(t, st.gone) {
			continue
		}
		q, err := quarantineEntry(p.ws, t, st.quarantine)
		if err != nil {
			st.errs = append(st.errs, err)
			continue
		}
		st.gone = append(st.gone, t)
		moved++
		act := "quarantined"
		if q == "" {
			act = "removed"
		}
		st.out = append(st.out, Persisted{Path: t, Action: act, Why: why, Quarantine: q})
	}
	return moved
}

// restoreHistory puts back the history files of each repository whose
// new history the rules refuse.
func (p *persistPlan) restoreHistory(hc *persist.Checker, st *sweepState) {
	for rel, snap := range p.history {
		if under(rel, st.gone) || !snap.changed() {
			continue
		}
		why := st.rolled[rel]
		if why == "" {
			why = hc.RolledBack(rel)
		}
		for _, g := range st.gone {
			// A link moved out from where git keeps history (refs/ as a
			// symlink) leaves a hole the snapshot fills.
			if sub, ok := strings.CutPrefix(g, rel+"/"); ok && persist.HistoryFile(sub) && why == "" {
				why = g + " was not kept"
			}
		}
		if why != "" {
			if err := snap.restore(); err != nil {
				st.errs = append(st.errs, fmt.Errorf("restore the history of %s: %w", rel, err))
			}
			st.out = append(st.out, Persisted{Path: rel, Action: "restored", Why: why + "; its refs, index and reflogs were put back as they were before the run"})
		}
	}
}

// candidates lists what is new in the workspace since the start and may
// matter, and the instruction files to list.
func (p *persistPlan) candidates(after *persist.Scan, c *persist.Checker) ([]candidate, []Persisted) {
	ws := p.ws
	var cands []candidate
	add := func(c candidate) { cands = append(cands, c) }
	// changed adds rel when what is there is not what was watched there.
	changed := func(rel string) {
		if id, _, err := lstatID(filepath.Join(ws, rel)); err == nil && p.watch[rel] != id {
			add(candidate{rel: rel})
		}
	}
	for rel, before := range p.watch {
		now, _, err := lstatID(filepath.Join(ws, rel))
		if err != nil {
			continue
		}
		if now != before && !(rel == ".git" && p.repos[".git"] == now) {
			cands = append(cands, candidate{rel: rel})
		}
	}
	for _, rel := range after.WithMark(".git") {
		dotgit := filepath.Join(rel, ".git")
		id, st, err := lstatID(filepath.Join(ws, dotgit))
		if err == nil && !st.IsDir() && p.watch[dotgit] != id {
			// A new gitfile or symlink: git would take a repository from
			// wherever it points.
			cands = append(cands, candidate{rel: dotgit})
		}
	}
	p.repoCandidates(after, c, add, changed)
	// A directory replaced by a symlink: judged as the link it is now
	// (one into a tree the rules do not check is refused).
	for rel := range p.scan.Dirs {
		if _, still := after.Dirs[rel]; still || rel == "" {
			continue
		}
		if st, err := os.Lstat(filepath.Join(ws, rel)); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			add(candidate{rel: rel})
		}
	}
	notes := p.namedCandidates(after, add, changed)
	for _, rel := range after.Redirects(ws, p.m) {
		changed(rel)
	}
	p.uncheckable(after, add)
	sort.Slice(cands, func(a, b int) bool { return cands[a].rel < cands[b].rel })
	return cands, notes
}

// repoCandidates are the repositories that are new or replaced, the
// caller's own relative hooks in each work tree, and symlinks the run
// made inside a repository that was there (refs/, logs/, info/ pointing
// elsewhere: a change the watched paths do not see). add and changed
// add to what candidates returns.
func (p *persistPlan) repoCandidates(after *persist.Scan, c *persist.Checker, add func(candidate), changed func(string)) {
	ws := p.ws
	for _, r := range after.Repos(ws, persist.Host{}) {
		if r.Dotgit {
			// Your own relative core.hooksPath, in every work tree.
			for _, h := range c.GlobalHooks() {
				changed(filepath.Join(r.At, h))
			}
		}
		if r.Gitfile {
			continue // the .git file itself is watched above
		}
		rel, ok := within(ws, r.GitDir)
		if !ok {
			continue
		}
		if id, _, err := lstatID(r.GitDir); err == nil && p.repos[rel] != id {
			add(candidate{rel: rel, repo: true})
			continue
		}
		walkGitDir(r.GitDir, p.since, func(path string, d fs.DirEntry) {
			if d.Type()&fs.ModeSymlink != 0 {
				var st unix.Stat_t
				if unix.Lstat(path, &st) == nil && st.Ctim.Nano() >= p.since {
					lrel, _ := filepath.Rel(ws, path)
					add(candidate{rel: lrel})
				}
			}
		})
	}
}

// namedCandidates are protected names that are new or replaced, and the
// instruction files that changed, to list.
func (p *persistPlan) namedCandidates(after *persist.Scan, add func(candidate), changed func(string)) []Persisted {
	ws := p.ws
	var notes []Persisted
	for _, rel := range after.Named(ws, p.m) {
		// A name reached through a new symlink: the symlink is the change.
		if link := firstLink(ws, rel); link != "" {
			changed(link)
			continue
		}
		id, st, err := lstatID(filepath.Join(ws, rel))
		if errors.Is(err, fs.ErrPermission) {
			// Behind a directory the command locked: what cannot be
			// checked is not kept.
			add(candidate{rel: rel, why: "sandboxd cannot read " + rel + " to check it, so it is not kept"})
			continue
		}
		if err != nil {
			continue
		}
		n, _, _ := p.m.Match(rel)
		if n.Kind == persist.Instruction {
			if ct := st.Sys().(*syscall.Stat_t).Ctim.Nano(); p.named[rel] != id || p.ctimes[rel] != ct {
				notes = append(notes, Persisted{Path: rel, Action: "listed", Why: n.Pattern + ": " + n.Why()})
			}
			continue
		}
		if listedOnChange(n) {
			// Judged by the rules: listed, or refused where a hook now
			// runs it.
			if ct, ok := p.ctimes[rel]; !ok || p.named[rel] != id || ct != st.Sys().(*syscall.Stat_t).Ctim.Nano() {
				add(candidate{rel: rel})
			}
			continue
		}
		if p.named[rel] != id {
			add(candidate{rel: rel})
		}
	}
	return notes
}

// uncheckable: what the scan could not follow, it cannot clear: the
// highest new directory on the way goes.
func (p *persistPlan) uncheckable(after *persist.Scan, add func(candidate)) {
	start := p.scan
	for _, rel := range append(append([]string(nil), after.TooDeep...), after.Unread...) {
		if slices.Contains(start.TooDeep, rel) || slices.Contains(start.Unread, rel) {
			continue
		}
		top := ""
		for q := rel; q != "." && q != ""; q = filepath.Dir(q) {
			if _, existed := start.Dirs[q]; existed {
				break
			}
			top = q
		}
		why := "sandboxd cannot check " + rel + " (too deep, or unreadable), so it is not kept"
		if top == "" {
			top = rel
		}
		add(candidate{rel: top, why: why})
	}
}

// firstLink returns the first element of rel (workspace-relative) that is
// a symlink, before its last element; "" when there is none.
func firstLink(ws, rel string) string {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		q := strings.Join(parts[:i], "/")
		if st, err := os.Lstat(filepath.Join(ws, q)); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			return q
		}
	}
	return ""
}

func rescan(p *persistPlan, after *persist.Scan) error {
	s, err := persist.Scanner{Names: p.m, Unlock: true, Owner: p.uid}.Scan(p.ws, after)
	if err != nil {
		return err
	}
	s.MarkFresh()
	p.scan = s
	return nil
}

func under(rel string, dirs []string) bool {
	for _, d := range dirs {
		if rel == d || strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
}

// walkGitDir calls fn for gd and everything in it but the objects
// themselves (named by their content, of no use to anyone who cannot
// find a hash's preimage): objects/ and objects/info are visited, the
// directories of loose objects and packs only when objects/ changed since
// the run began (an entry made or replaced there moves its change time).
func walkGitDir(gd string, since int64, fn func(path string, d fs.DirEntry)) {
	filepath.WalkDir(gd, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		sub, _ := filepath.Rel(gd, path)
		if sub == "objects" {
			fn(path, d)
			var st unix.Stat_t
			if unix.Lstat(path, &st) != nil || st.Ctim.Nano() < since {
				// Unchanged: its info/ only.
				walkGitDir(path+"/info", 0, fn)
				return filepath.SkipDir
			}
			return nil
		}
		fn(path, d)
		if d.IsDir() && strings.HasPrefix(sub, "objects/") && sub != "objects/info" {
			return filepath.SkipDir
		}
		return nil
	})
}

// judgeTree checks rel and, when it is a directory, everything below it.
func judgeTree(c *persist.Checker, ws, rel string) persist.Verdict {
	var v persist.Verdict
	filepath.WalkDir(filepath.Join(ws, rel), func(path string, d fs.DirEntry, err error) error {
		r, _ := filepath.Rel(ws, path)
		if errors.Is(err, fs.ErrPermission) {
			// Locked by the command (chmod 0): what cannot be checked is
			// not kept.
			v = persist.Verdict{Action: persist.Refuse, Why: "sandboxd cannot read " + r + " to check it, so it is not kept"}
			return filepath.SkipAll
		}
		if err != nil {
			return nil
		}
		k := persist.File
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			k = persist.Symlink
		case d.IsDir():
			k = persist.Dir
		}
		if x := c.Check(r, k); x.Action > v.Action {
			v = x
		}
		if v.Action == persist.Refuse {
			return filepath.SkipAll
		}
		return nil
	})
	return v
}

// judgeRepo decides a git directory the command made (or made out of a
// directory that was there): kept when it carries nothing that runs code
// (the rules of package persist for each of its files, and a config with
// only what git init and clone write). Otherwise the whole of it goes
// when it is new; when the directory was there before, only what made it
// a repository in this run goes (a HEAD, objects, refs or commondir that
// is new or changed; HEAD when none is), and what it held stays. The
// targets to quarantine are NUL-separated.
func (p *persistPlan) judgeRepo(c *persist.Checker, rel string, start *persist.Scan) (persist.Verdict, string) {
	gd := filepath.Join(p.ws, rel)
	v := judgeTree(c, p.ws, rel)
	// A linked worktree or submodule git made is judged with all of its
	// repository by the rules (persist.Checker.Linked), not as a new one.
	if v.Action != persist.Refuse && !c.Linked(rel) {
		if why, ok := safeNewRepo(c, p.ws, gd); !ok {
			v = persist.Verdict{Action: persist.Refuse, Why: "a new git repository " + why}
		}
	}
	if v.Action != persist.Refuse {
		return v, ""
	}
	if _, existed := start.Dirs[rel]; !existed || filepath.Base(rel) == ".git" {
		return v, rel
	}
	var markers []string
	for _, mk := range []string{"HEAD", "objects", "refs", "commondir"} {
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(gd, mk), &st) != nil {
			continue
		}
		if was, ok := p.markers[filepath.Join(rel, mk)]; !ok || was != (markID{st.Ino, st.Ctim.Nano()}) {
			markers = append(markers, filepath.Join(rel, mk))
		}
	}
	if len(markers) == 0 {
		// Something they point at changed: without HEAD it is no
		// repository.
		markers = []string{filepath.Join(rel, "HEAD")}
	}
	v.Why = "this made " + rel + " a git repository, and " + strings.TrimPrefix(v.Why, "a new git repository ")
	return v, strings.Join(markers, "\x00")
}

// narrow takes group and other write away from git directories, hooks and
// configs that gained it (unless sharing allows it), and from any
// directory of the workspace that gained it.
func (p *persistPlan) narrow(after *persist.Scan, gone []string) []Persisted {
	var out []Persisted
	fix := func(rel string, startMode uint32, hadStart bool, allowed uint32, why string) {
		path := filepath.Join(p.ws, rel) // rel "" is the workspace itself
		st, err := os.Lstat(path)
		if err != nil || st.Mode()&fs.ModeSymlink != 0 {
			return
		}
		mode := uint32(st.Mode().Perm())
		keep := allowed
		if hadStart {
			keep |= startMode & 0o022
		}
		strip := mode & 0o022 &^ keep
		if strip == 0 {
			return
		}
		if err := os.Chmod(path, os.FileMode(mode&^strip)|st.Mode()&(fs.ModeSticky)); err != nil {
			return
		}
		out = append(out, Persisted{Path: rel, Action: "narrowed", Why: why})
	}
	for _, r := range after.Repos(p.ws, persist.Host{}) {
		rel, ok := within(p.ws, r.GitDir)
		if !ok || under(rel, gone) {
			continue
		}
		allowed := p.shared[rel]
		// Everything in it but the objects themselves (named by their
		// content): sequencer state, refs, hooks, config, info.
		var items []string
		walkGitDir(r.GitDir, p.since, func(path string, d fs.DirEntry) {
			if d.Type()&fs.ModeSymlink != 0 {
				return
			}
			// A mode or an ACL set moves the change time: what did not
			// change since the run began gained nothing.
			var st unix.Stat_t
			if unix.Lstat(path, &st) != nil || st.Ctim.Nano() < p.since {
				return
			}
			it, _ := filepath.Rel(p.ws, path)
			items = append(items, it)
		})
		for _, it := range items {
			m, had := p.modes[it]
			fix(it, m, had, allowed, "other accounts could write what git reads there; group/other write removed")
			if st, err := os.Lstat(filepath.Join(p.ws, it)); err == nil && st.IsDir() {
				if added := persist.DirACL(filepath.Join(p.ws, it)) &^ p.acls[it]; added != 0 {
					p.dropACL(it, added)
					out = append(out, Persisted{Path: it, Action: "narrowed", Why: "the command gave git's directory an ACL; removed"})
				}
			}
		}
	}
	for rel, d := range after.Dirs {
		if rel != "" && under(rel, gone) {
			continue
		}
		s, existed := p.scan.Dirs[rel]
		existed = existed && s.Ino == d.Ino
		added := d.ACL
		if existed {
			added &^= s.ACL
		}
		if added != 0 {
			// An ACL can grant other accounts write, and a default ACL
			// overrides the umask of every file made there later.
			p.dropACL(rel, added)
			out = append(out, Persisted{Path: rel, Action: "narrowed", Why: "the command gave the directory an ACL; removed"})
		}
		if existed {
			fix(rel, s.Mode, true, 0, "the directory gained group/other write during the run; removed")
		} else if d.Mode&p.umask&0o022 != 0 {
			fix(rel, 0, true, 0o022&^p.umask, "a new directory gets no more than your umask allows; group/other write removed")
		}
	}
	return out
}

// dropACL removes the ACLs (persist.ACLNames bits) from the directory rel.
func (p *persistPlan) dropACL(rel string, bits uint8) {
	for i, name := range persist.ACLNames() {
		if bits&(1<<i) != 0 {
			unix.Lremovexattr(filepath.Join(p.ws, rel), name)
		}
	}
}

// safeNewRepo accepts a repository the command created (git init, git
// clone) when it carries nothing that runs code: only sample hooks,
// config keys from a short list, and no redirects, nested repositories
// or operation in progress, but for the submodules and worktrees git made
// in it that the rules commit whole (git clone --recurse-submodules). It
// says why not.
func safeNewRepo(c *persist.Checker, ws, gd string) (string, bool) {
	st, err := os.Lstat(gd)
	if err != nil || !st.IsDir() {
		return "that is not a plain directory", false
	}
	hooks, err := os.ReadDir(filepath.Join(gd, "hooks"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "with unreadable hooks", false
	}
	for _, h := range hooks {
		if !h.Type().IsRegular() || !strings.HasSuffix(h.Name(), ".sample") {
			return "with the hook " + h.Name(), false
		}
	}
	if st, err := os.Lstat(filepath.Join(gd, "config")); err != nil || !st.Mode().IsRegular() {
		return "without a plain config file", false
	}
	for _, f := range gitNested() {
		if why, ok := linkedOnly(c, ws, filepath.Join(gd, f)); !ok {
			return "with " + f + "/" + why, false
		}
	}
	for _, f := range gitWatched() {
		if f == "remotes" || f == "branches" {
			continue // checked below
		}
		if _, err := os.Lstat(filepath.Join(gd, f)); err == nil {
			return "with " + f, false
		}
	}
	for _, f := range []string{"remotes", "branches"} {
		if ents, err := os.ReadDir(filepath.Join(gd, f)); err == nil && len(ents) > 0 {
			return "with " + f + "/", false
		}
	}
	b, err := os.ReadFile(filepath.Join(gd, "config"))
	if err != nil {
		return "with an unreadable config", false
	}
	if !safeGitConfig(string(b)) {
		return "whose config has entries beyond what git init and clone write", false
	}
	return "", true
}

// linkedOnly reports whether dir (a git directory's modules/ or
// worktrees/) holds nothing but the git directories of submodules and
// worktrees the rules commit whole (persist.Checker.Linked), and the
// directories on the way to them.
func linkedOnly(c *persist.Checker, ws, dir string) (string, bool) {
	why := ""
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == dir {
				return nil
			}
			why = " (unreadable)"
			return filepath.SkipAll
		}
		if path == dir {
			return nil
		}
		if !d.IsDir() {
			why = " holding " + filepath.Base(path)
			return filepath.SkipAll
		}
		if _, err := os.Lstat(filepath.Join(path, "HEAD")); err == nil {
			rel, _ := filepath.Rel(ws, path)
			if !c.Linked(rel) {
				why = " holding " + filepath.Base(path) + ", which is no submodule or worktree git made whole"
				return filepath.SkipAll
			}
			return filepath.SkipDir // judged with its unit
		}
		return nil
	})
	if err != nil && why == "" {
		why = " (unreadable)"
	}
	return why, why == ""
}

// safeGitConfig accepts only config keys from a short list of those a
// new repository normally has (git init, git clone, and the submodules a
// recursive clone initializes); anything else, or a file that does not
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
		case "submodule":
			// git submodule init copies url (and update) from .gitmodules
			// and sets active; each must be one git acts on safely.
			if e.Subsection == "" && e.Key == "active" {
				// A pathspec of the submodules that are active (clone
				// --recurse-submodules writes "."): it runs nothing.
			} else if e.Subsection == "" {
				return false
			} else if e.Key == "active" {
				if _, err := strconv.ParseBool(strings.ToLower(e.Value)); err != nil && e.Value != "" {
					return false
				}
			} else if e.Key != "url" && e.Key != "update" || persist.SubmoduleEntryRisk(e) != "" {
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

// openSearching opens rel below the directory root with how, giving a
// directory on the way that the command made unsearchable for its owner
// (chmod 0) search back, as the scan's Unlock reads it: the sweep must
// reach whatever the command left.
func openSearching(root int, rel string, how *unix.OpenHow) (int, error) {
	fd, err := unix.Openat2(root, rel, how)
	if !errors.Is(err, unix.EACCES) {
		return fd, err
	}
	cur, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	for _, part := range strings.Split(rel, "/") {
		next, err := unix.Openat2(cur, part, how)
		if errors.Is(err, unix.EACCES) {
			restore, cerr := ownerMay(cur, unix.S_IXUSR)
			if cerr == nil {
				next, err = unix.Openat2(cur, part, how)
				restore()
			}
		}
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// ownerMay adds the owner permission bits to the directory fd (an O_PATH
// descriptor, changed through /proc/self/fd, which names that very
// directory) and returns what puts its mode back.
func ownerMay(fd int, bits uint32) (func(), error) {
	p := fmt.Sprintf("/proc/self/fd/%d", fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if err := unix.Chmod(p, st.Mode&0o7777|bits); err != nil {
		return nil, err
	}
	return func() { unix.Chmod(p, st.Mode&0o7777) }, nil
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
		pfd, err = openSearching(root, parent, &how)
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
	if errors.Is(err, unix.EACCES) {
		// The command took write away from its own directory (chmod
		// 555): the caller, who owns it, gives it back for the move.
		restore, cerr := ownerMay(pfd, unix.S_IWUSR|unix.S_IXUSR)
		if cerr == nil {
			err = unix.Renameat2(pfd, filepath.Base(rel), dfd, filepath.Base(dest), unix.RENAME_NOREPLACE)
			restore()
		}
	}
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
