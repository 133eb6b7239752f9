package persist

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"

	"github.com/sandboxd/sandboxd/gitconfig"
	"github.com/sandboxd/sandboxd/pathtree"
)

// Git's history is a second copy of the work tree: a commit, the index, a
// stash, a branch or a pending rebase the command wrote can carry a hook,
// an .envrc or a .vscode task that the work tree check refused, and the
// user's next `git checkout .`, `git stash pop`, `git reset --hard`,
// branch switch or `git rebase --continue` writes it.
//
// So when a repository's history files change (historyFile), every place
// git would check out from is compared with what it named before: each
// ref's new commit with its old one (or, for a new ref, with the commit
// HEAD named before), each new reflog entry, stash, ORIG_HEAD-like file
// and sequencer pick likewise, and the index with the index before.
// Where they differ at a path the work tree rules refuse a change at, the
// new content must be what the work tree will hold; a submodule's commit
// is followed into its own repository. Replace refs and grafts, which
// change what every commit means, are refused outright; anything that
// cannot be read (a missing object, reftable, a split index) counts as a
// refusal. A refusal keeps the repository's history files as they were
// (the new objects stay, unreachable). Only reads: objects are found as
// git finds them (loose, packs, alternates), so where the command put
// them does not matter, and neither does when.

// historyFile reports the files of a git directory (rest is relative to
// it) that name commits or stage content for the work tree: refs,
// packed-refs, HEAD and the other *_HEAD files, reflogs, the index, grafts
// and shallow, operation state.
func historyFile(rest string) bool {
	first, _, _ := strings.Cut(rest, "/")
	switch {
	case rest == "index", rest == "packed-refs", rest == "HEAD", rest == "shallow", rest == "info/grafts",
		first == "reftable":
		return true
	case first == "refs", first == "logs", sequencerDir(first):
		return true
	case !strings.Contains(rest, "/") && strings.HasSuffix(rest, "_HEAD"):
		return true
	}
	return false
}

// History says why the history the change adds to the git directory gd
// (workspace-relative) is refused, "" when it is not. Memoized.
func (c *Checker) History(gd string) string { return c.history(gd) }

func (c *Checker) history(gd string) string {
	if why, ok := c.histories[gd]; ok {
		return why
	}
	c.loadFamilies()
	c.histories[gd] = "" // while it is judged (a check it makes never loops back)
	h := &historyCheck{c: c, gd: c.abs(gd), done: map[string]bool{}}
	why := h.run()
	c.histories[gd] = why
	return why
}

type historyCheck struct {
	c          *Checker
	gd, common string // absolute, the same in both views
	before     *store
	final      *store
	hash       func() hash.Hash
	rawLen     int
	trees      []string // where checkouts of gd write (absolute)
	done       map[string]bool
	compared   int
}

// maxCompared bounds the tree pairs one check compares.
const maxCompared = 100_000

func (h *historyCheck) run() string {
	before, final := h.c.cfg.Before, h.c.cfg.Final
	cfg := h.setup(before, final)
	h.trees = h.workTrees(cfg)
	if len(h.trees) == 0 {
		// A bare repository: no checkout writes a work tree.
		return ""
	}
	if why := h.refusedOutright(before, final); why != "" {
		return why
	}
	h.before = newStore(before, h.common+"/objects", h.rawLen)
	h.final = newStore(final, h.common+"/objects", h.rawLen)

	head, why := h.refTips(before, final)
	if why != "" {
		return why
	}
	// New reflog entries (stash@{1}, HEAD@{2}, ...) and sequencer picks.
	for _, id := range h.newLogShas(before, final) {
		if why := h.tip(head, id); why != "" {
			return why
		}
	}
	if why := h.picks(before, final); why != "" {
		return why
	}
	if a, b := readOr(before, h.gd+"/index"), readOr(final, h.gd+"/index"); a != b {
		if why := h.index(a, b); why != "" {
			return why
		}
	}
	return ""
}

// setup finds the repository's common directory and object format and
// returns its config (as it was before, or else as it is now).
func (h *historyCheck) setup(before, final FS) []gitconfig.Entry {
	common, v := CommonDir(before, h.gd)
	if _, err := before.Lstat(h.gd); err != nil || v != GitDir {
		// New in this run (a linked worktree's commondir is only
		// accepted when it names its own repository), or unreadable.
		if common, v = CommonDir(final, h.gd); v != GitDir {
			common = h.gd
		}
	}
	h.common = common
	cfg := h.config(before)
	if len(cfg) == 0 {
		cfg = h.config(final)
	}
	h.hash, h.rawLen = sha1.New, 20
	for _, e := range cfg {
		if e.Section == "extensions" && e.Key == "objectformat" && strings.EqualFold(e.Value, "sha256") {
			h.hash, h.rawLen = sha256.New, 32
		}
	}
	return cfg
}

// refusedOutright says why the repository's history is refused before
// any commit is read, "" when it is not: refs sandboxd cannot read, or
// grafts that change what every commit holds.
func (h *historyCheck) refusedOutright(before, final FS) string {
	common := h.common
	for _, view := range []FS{before, final} {
		if _, err := view.Lstat(common + "/reftable"); err == nil {
			return "the repository keeps its refs in a reftable, which sandboxd cannot read"
		}
	}
	for _, f := range []string{common + "/info/grafts", common + "/shallow"} {
		if a, b := readOr(before, f), readOr(final, f); a != b && f == common+"/info/grafts" {
			return "info/grafts changed: it changes what every commit holds"
		}
	}
	return ""
}

// refTips checks every ref that changed: its new commit against its old
// one or, for a new ref, against the commit HEAD named before. It returns
// that HEAD, and why the history is refused ("" when it is not).
func (h *historyCheck) refTips(before, final FS) (head, why string) {
	oldRefs, err := h.refs(before)
	if err != nil {
		return "", reason(err)
	}
	newRefs, err := h.refs(final)
	if err != nil {
		return "", reason(err)
	}
	head = oldRefs["HEAD"]
	for name, id := range newRefs {
		if oldRefs[name] == id {
			continue
		}
		if strings.HasPrefix(name, "refs/replace/") {
			return head, name + " replaces an object: it changes what every commit holds"
		}
		if strings.HasPrefix(name, "refs/notes/") {
			continue // notes are shown, never checked out
		}
		base := oldRefs[name]
		if base == "" {
			base = head
		}
		if why := h.tip(base, id); why != "" {
			return head, why
		}
	}
	return head, ""
}

// picks checks the commits a pending rebase or cherry-pick names, in the
// sequencer files that changed.
func (h *historyCheck) picks(before, final FS) string {
	for _, sd := range sequencerDirs() {
		for _, f := range pickLists() {
			p := h.gd + "/" + sd + "/" + f
			if readOr(before, p) == readOr(final, p) {
				continue
			}
			for _, id := range h.shas(readOr(final, p)) {
				if why := h.pick(id); why != "" {
					return why
				}
			}
		}
	}
	return ""
}

// refLimit bounds a loose ref or a *_HEAD file as read here: a ref is
// one line, FETCH_HEAD one line per fetched ref.
const refLimit = 1 << 20

// readRef is a ref file's content ("" when unreadable), at most
// refLimit bytes.
func readRef(fsys FS, p string) string {
	b, err := readFollow(fsys, p, refLimit)
	if err != nil {
		return ""
	}
	return string(b)
}

func readOr(fsys FS, p string) string {
	b, err := readFollow(fsys, p, 1<<30)
	if err != nil {
		return ""
	}
	return string(b)
}

func (h *historyCheck) config(view FS) []gitconfig.Entry {
	b, err := readFollow(view, h.common+"/config", gitconfig.MaxSize)
	if err != nil {
		return nil
	}
	ents, _ := gitconfig.Parse(b)
	return ents
}

// workTrees are where a checkout of gd writes, as git decides it and as
// it was before the run (nothing the command wrote since moves them):
// the directories the start scan found it from (a .git entry, a gitfile),
// the parent of a .git directory, and core.worktree (config.worktree only
// with extensions.worktreeConfig; the last value wins). A repository with
// core.bare = true has none. In phases: the settings, then each place a
// work tree can come from, inside the workspace only.
func (h *historyCheck) workTrees(cfg []gitconfig.Entry) []string {
	s := h.perWorktree(worktreeSettingsOf(cfg))
	if s.bare == "true" && s.worktree == "" {
		return nil
	}
	var out []string
	out = h.inWorkspace(out, h.foundTrees()...)
	out = h.inWorkspace(out, h.configuredTree(s.worktree)...)
	out = h.inWorkspace(out, h.unitTree()...)
	if len(out) == 0 && s.bare != "true" {
		// A linked worktree or a submodule, found as it was before.
		out = h.inWorkspace(out, h.linkedTree()...)
	}
	return out
}

// worktreeSettings are the settings that say where a repository's work
// tree is: core.bare (lower case; "" when unset), core.worktree (the last
// value) and extensions.worktreeConfig.
type worktreeSettings struct {
	bare, worktree string
	perWorktree    bool
}

// worktreeSettingsOf reads them from a repository's config.
func worktreeSettingsOf(cfg []gitconfig.Entry) worktreeSettings {
	var s worktreeSettings
	for _, e := range cfg {
		switch {
		case e.Section == "core" && e.Key == "bare":
			s.bare = strings.ToLower(e.Value)
		case e.Section == "core" && e.Key == "worktree":
			s.worktree = e.Value
		case e.Section == "extensions" && e.Key == "worktreeconfig":
			s.perWorktree = e.NoValue || strings.EqualFold(e.Value, "true")
		}
	}
	return s
}

// perWorktree lays gd's config.worktree, as it was before the run, over
// s when extensions.worktreeConfig says git reads it.
func (h *historyCheck) perWorktree(s worktreeSettings) worktreeSettings {
	if !s.perWorktree {
		return s
	}
	b, err := readFollow(h.c.cfg.Before, h.gd+"/config.worktree", gitconfig.MaxSize)
	if err != nil {
		return s
	}
	ents, err := gitconfig.Parse(b)
	if err != nil {
		return s
	}
	for _, e := range ents {
		if e.Section == "core" && e.Key == "worktree" {
			s.worktree = e.Value
		}
		if e.Section == "core" && e.Key == "bare" {
			s.bare = strings.ToLower(e.Value)
		}
	}
	return s
}

// inWorkspace adds to out the paths of ps that lie in the workspace.
func (h *historyCheck) inWorkspace(out []string, ps ...string) []string {
	for _, p := range ps {
		if pathtree.Within(h.c.cfg.Workspace, p) {
			out = append(out, p)
		}
	}
	return out
}

// foundTrees are the work trees the start scan found gd from (a .git
// entry), and the parent of gd when it is a .git directory.
func (h *historyCheck) foundTrees() []string {
	var out []string
	for _, r := range h.c.cfg.StartRepos {
		if r.GitDir == h.gd && r.Dotgit {
			out = append(out, joinPath(h.c.cfg.Workspace, r.At))
		}
	}
	if strings.HasSuffix(h.gd, "/.git") {
		out = append(out, h.gd[:len(h.gd)-len("/.git")])
	}
	return out
}

// configuredTree is core.worktree (relative to gd), resolved as the tree
// was before the run.
func (h *historyCheck) configuredTree(worktree string) []string {
	if worktree == "" {
		return nil
	}
	p := worktree
	if !strings.HasPrefix(p, "/") {
		p = h.gd + "/" + p
	}
	r, err := Resolve(h.c.cfg.Before, p, true)
	if err != nil {
		return nil
	}
	return []string{r}
}

// unitTree is the work tree of a linked worktree or submodule the run
// created whose structure is git's own: where it says.
func (h *historyCheck) unitTree() []string {
	if u := h.c.units[h.gd]; u != nil && u.why == "" && u.tree != "" {
		return []string{u.tree}
	}
	return nil
}

// linkedTree is the work tree a linked worktree's or submodule's gitdir
// file named before the run (the directory of its .git).
func (h *historyCheck) linkedTree() []string {
	b, err := readFollow(h.c.cfg.Before, h.gd+"/gitdir", 4096)
	if err != nil {
		return nil
	}
	p := strings.TrimRight(string(b), "\r\n")
	if !strings.HasSuffix(p, "/.git") {
		return nil
	}
	return []string{p[:len(p)-len("/.git")]}
}

// refs reads every ref of the repository in view, resolved to object
// names: loose refs, packed-refs, HEAD and the *_HEAD files (FETCH_HEAD's
// every line).
func (h *historyCheck) refs(view FS) (map[string]string, error) {
	// A refs that is a symlink (to /usr, say) is not read through: git
	// refuses the repository's symlinks anyway, and walking it would read
	// whatever tree it names.
	if st, err := view.Lstat(h.common + "/refs"); err == nil && !st.IsDir() {
		return nil, fmt.Errorf("%s/refs is not a directory", h.c.relName(h.common))
	}
	raw := map[string]string{}
	if b, err := readFollow(view, h.common+"/packed-refs", 1<<30); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if line == "" || line[0] == '#' || line[0] == '^' {
				continue
			}
			id, name, ok := strings.Cut(line, " ")
			if ok {
				raw[name] = strings.ToLower(id)
			}
		}
	}
	walk(view, h.common+"/refs", 32, func(p string, st Info) bool {
		if st.IsRegular() {
			raw["refs"+strings.TrimPrefix(p, h.common+"/refs")] = strings.TrimSpace(readRef(view, p))
		}
		return true
	})
	for _, dir := range []string{h.gd, h.common} {
		if l, ok := view.(lister); ok {
			names, _ := l.ReadDir(dir)
			for _, n := range names {
				if n == "HEAD" || strings.HasSuffix(n, "_HEAD") {
					content := strings.TrimSpace(readRef(view, dir+"/"+n))
					if strings.HasPrefix(content, "ref:") {
						raw[n] = content
						continue
					}
					for i, id := range h.shas(content) {
						raw[fmt.Sprintf("%s#%d", n, i)] = id
						if i == 0 {
							raw[n] = id
						}
					}
				}
			}
		}
	}
	out := map[string]string{}
	for name := range raw {
		v := raw[name]
		for i := 0; i < 8 && strings.HasPrefix(v, "ref:"); i++ {
			v = raw[strings.TrimSpace(strings.TrimPrefix(v, "ref:"))]
		}
		if strings.HasPrefix(v, "ref:") {
			continue // dangling or looping symbolic ref: names nothing
		}
		if v != "" {
			if len(v) != 2*h.rawLen || !isHexString(v) {
				return nil, fmt.Errorf("the ref %s holds %q, which sandboxd cannot read", name, v)
			}
			out[name] = strings.ToLower(v)
		}
	}
	return out, nil
}

func isHexString(s string) bool {
	for _, r := range s {
		if !isHex(r) {
			return false
		}
	}
	return true
}

func isHex(r rune) bool {
	return r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F'
}

// shas finds the object names in text.
func (h *historyCheck) shas(text string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(text, func(r rune) bool { return !isHex(r) }) {
		if len(f) == 2*h.rawLen {
			out = append(out, strings.ToLower(f))
		}
	}
	return out
}

// newLogShas lists the object names that reflog lines the run added name
// (the new value of each entry).
func (h *historyCheck) newLogShas(before, final FS) []string {
	var out []string
	for _, d := range []string{h.common + "/logs", h.gd + "/logs"} {
		walk(final, d, 32, func(p string, st Info) bool {
			if !st.IsRegular() {
				return true
			}
			old, now := readOr(before, p), readOr(final, p)
			added := now
			if strings.HasPrefix(now, old) {
				added = now[len(old):]
			}
			for _, line := range strings.Split(added, "\n") {
				if f := strings.Fields(line); len(f) >= 2 && len(f[1]) == 2*h.rawLen {
					out = append(out, strings.ToLower(f[1]))
				}
			}
			return true
		})
	}
	return out
}

// tip checks what checking out id writes, against what base (a commit
// the repository had there, "" for none) wrote. A stash's index and
// untracked parents are what `stash pop` applies too.
func (h *historyCheck) tip(base, id string) string {
	baseTree, why := h.treeOf(h.before, h.final, base)
	if why != "" {
		return why
	}
	typ, body, err := h.final.read(id)
	if err != nil {
		return h.unreadable(id, err)
	}
	for i := 0; typ == "tag" && i < 16; i++ {
		target := header(body, "object")
		if typ, body, err = h.final.read(target); err != nil {
			return h.unreadable(target, err)
		}
	}
	var trees []string
	switch typ {
	case "commit":
		trees = append(trees, header(body, "tree"))
		// A stash commit: its second and third parents (index, untracked
		// files) are applied by `git stash pop`.
		if ps := headers(body, "parent"); len(ps) > 1 {
			for _, p := range ps[1:] {
				if t, why := h.treeOf(h.final, h.final, p); why == "" && t != "" {
					trees = append(trees, t)
				}
			}
		}
	case "tree":
		trees = append(trees, id)
	default:
		return "" // a blob or something else: nothing is checked out from it
	}
	for _, t := range trees {
		if why := h.diff(h.trees, baseTree, t, ""); why != "" {
			return why
		}
	}
	return ""
}

// pick checks a commit a pending rebase or cherry-pick would apply: what
// it changes from its first parent.
func (h *historyCheck) pick(id string) string {
	typ, body, err := h.final.read(id)
	if err != nil {
		return h.unreadable(id, err)
	}
	if typ != "commit" {
		return ""
	}
	parent := ""
	if ps := headers(body, "parent"); len(ps) > 0 {
		parent = ps[0]
	}
	pt, why := h.treeOf(h.final, h.final, parent)
	if why != "" {
		return why
	}
	return h.diff(h.trees, pt, header(body, "tree"), "")
}

// treeOf is the tree of the commit id ("" for none), read from first, or
// second.
func (h *historyCheck) treeOf(first, second *store, id string) (string, string) {
	if id == "" {
		return "", ""
	}
	typ, body, err := first.read(id)
	if err != nil {
		if typ, body, err = second.read(id); err != nil {
			return "", h.unreadable(id, err)
		}
	}
	if typ != "commit" {
		return "", "HEAD named something other than a commit before the run"
	}
	return header(body, "tree"), ""
}

func (h *historyCheck) unreadable(id string, err error) string {
	return "git history the command wrote names the object " + id + ", which sandboxd cannot read (" + reason(err) + ")"
}

func header(body []byte, key string) string {
	if v := headers(body, key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func headers(body []byte, key string) []string {
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" {
			break // the message follows
		}
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}

// readTree reads a tree: the new one from the final store, the old one
// from the store before (then the final one: objects are never removed by
// adding history).
func (h *historyCheck) readTree(id string, old bool) (map[string]treeEntry, error) {
	if id == "" {
		return map[string]treeEntry{}, nil
	}
	stores := []*store{h.final}
	if old {
		stores = []*store{h.before, h.final}
	}
	var err error
	for _, s := range stores {
		var typ string
		var body []byte
		if typ, body, err = s.read(id); err == nil {
			if typ != "tree" {
				return nil, fmt.Errorf("%s is a %s, not a tree", id, typ)
			}
			return parseTree(body, h.rawLen)
		}
	}
	return nil, err
}

// diff compares the trees old and new at prefix, for the work trees trees:
// an entry that differs at a path where the work tree rules refuse a
// change must hold what the work tree will hold.
func (h *historyCheck) diff(trees []string, old, new, prefix string) string {
	if old == new {
		return ""
	}
	key := old + ":" + new + ":" + prefix
	if h.done[key] {
		return ""
	}
	h.done[key] = true
	h.compared++
	if h.compared > maxCompared {
		return "git history the command wrote is too large to check"
	}
	ot, err := h.readTree(old, true)
	if err != nil {
		return h.unreadable(old, err)
	}
	nt, err := h.readTree(new, false)
	if err != nil {
		return h.unreadable(new, err)
	}
	for name, ne := range nt {
		oe := ot[name]
		if oe == ne {
			continue
		}
		p := prefix + name
		switch ne.mode {
		case "40000":
			o := ""
			if oe.mode == "40000" {
				o = oe.id
			}
			if why := h.diff(trees, o, ne.id, p+"/"); why != "" {
				return why
			}
		case "160000":
			if why := h.submodule(trees, p, oe, ne); why != "" {
				return why
			}
		default:
			for _, t := range trees {
				if why := h.entry(t, p, ne.mode, ne.id); why != "" {
					return why
				}
			}
		}
	}
	return ""
}

// submodule follows a submodule commit that changed into the submodule's
// own repository (where `git checkout --recurse-submodules` takes it).
func (h *historyCheck) submodule(trees []string, p string, oe, ne treeEntry) string {
	for _, t := range trees {
		d, v := Discover(h.c.cfg.Final, t+"/"+p)
		if v != GitDir || d.Bare || d.GitDir == h.gd {
			continue // not checked out here: a later update fetches it from its remote
		}
		sub := &historyCheck{c: h.c, gd: d.GitDir, common: d.GitDir, hash: h.hash, rawLen: h.rawLen, done: h.done, compared: h.compared}
		if common, v := CommonDir(h.c.cfg.Final, d.GitDir); v == GitDir {
			sub.common = common
		}
		sub.before = newStore(h.c.cfg.Before, sub.common+"/objects", h.rawLen)
		sub.final = newStore(h.c.cfg.Final, sub.common+"/objects", h.rawLen)
		oldTree := ""
		if oe.mode == "160000" {
			var why string
			if oldTree, why = sub.treeOf(sub.before, sub.final, oe.id); why != "" {
				oldTree = "" // not there before: compare with nothing
			}
		}
		newTree, why := sub.treeOf(sub.final, sub.final, ne.id)
		if why != "" {
			return why
		}
		if why := sub.diff([]string{t + "/" + p}, oldTree, newTree, ""); why != "" {
			return why
		}
		h.compared = sub.compared
	}
	return ""
}

// entry checks one entry (mode, object id) at p in the work tree t.
func (h *historyCheck) entry(t, p, mode, id string) string {
	if !validRelPath(p) {
		return "git history the command wrote names the path " + p + ", which git itself would refuse"
	}
	abs := t + "/" + p
	rel := strings.TrimPrefix(strings.TrimPrefix(abs, h.c.cfg.Workspace), "/")
	v := h.c.Check(rel, File)
	if v.Action != Refuse {
		return h.settingsEntry(abs, rel, mode, id)
	}
	// A change at p is refused, so what the work tree will hold there is
	// what it held before when the run changed it.
	view := h.c.cfg.Final
	if l, ok := view.(Layered); ok && l.InLayer(abs) {
		view = h.c.cfg.Before
	}
	if worktreeHolds(view, h.hash, abs, mode, id) {
		return ""
	}
	return "git history the command wrote puts other content at " + rel + " than the work tree will hold, and a checkout would write it there (" + v.Why + ")"
}

// settingsEntry checks an entry at a Settings name whose change the work
// tree rules accept: what a checkout would write there is judged as a
// change from what the work tree will hold.
func (h *historyCheck) settingsEntry(abs, rel, mode, id string) string {
	n, at, ok := h.c.cfg.Names.Match(rel)
	if !ok || n.Kind != Settings || h.c.exempt(rel, at) != "" || at+strings.Count(n.Pattern, "/") != strings.Count(rel, "/") {
		return ""
	}
	view := h.c.cfg.Final
	if worktreeHolds(view, h.hash, abs, mode, id) {
		return ""
	}
	written := "git history the command wrote puts other content at " + rel + " than the work tree will hold, and a checkout would write it there"
	if mode != "100644" && mode != "100755" {
		return written + " (" + rel + " must stay a plain file: " + n.Why() + ")"
	}
	typ, blob, err := h.final.read(id)
	if err != nil {
		return h.unreadable(id, err)
	}
	if typ != "blob" {
		return written + " (" + id + " is a " + typ + ", not a file)"
	}
	var cur []byte
	if st, err := view.Lstat(abs); err == nil && st.IsRegular() {
		if cur, err = view.ReadFile(abs, maxSettings+1); err != nil {
			return written + "; " + rel + " cannot be read (" + reason(err) + ")"
		}
	}
	if why, bad := h.c.settingsAdded(rel, n, cur, blob); bad {
		return written + " (" + why + ")"
	}
	return ""
}

// worktreeHolds reports whether the work tree (in view) holds exactly the
// object id at p.
func worktreeHolds(view FS, newHash func() hash.Hash, p, mode, id string) bool {
	st, err := view.Lstat(p)
	if err != nil {
		return false
	}
	var content []byte
	switch {
	case mode == "120000" && st.IsSymlink():
		t, err := view.Readlink(p)
		if err != nil {
			return false
		}
		content = []byte(t)
	case (mode == "100644" || mode == "100755") && st.IsRegular():
		b, err := view.ReadFile(p, maxObject+1)
		if err != nil || len(b) > maxObject {
			return false
		}
		content = b
	default:
		return false
	}
	hh := newHash()
	fmt.Fprintf(hh, "blob %d\x00", len(content))
	hh.Write(content)
	return hex.EncodeToString(hh.Sum(nil)) == id
}

// validRelPath: what git accepts as a path in a tree.
func validRelPath(p string) bool {
	if p == "" {
		return false
	}
	for _, e := range strings.Split(p, "/") {
		if e == "" || e == "." || e == ".." || strings.EqualFold(e, ".git") {
			return false
		}
	}
	return true
}

// indexEntry is one entry of an index file.
type indexEntry struct{ mode, id string }

// index compares the index after the run with the one before: entries
// that changed at a refused path must hold what the work tree will hold.
func (h *historyCheck) index(before, after string) string {
	old, _ := parseIndex([]byte(before), h.rawLen)
	now, err := parseIndex([]byte(after), h.rawLen)
	if err != nil {
		return "the index the command wrote " + reason(err) + ", which sandboxd cannot check"
	}
	for p, e := range now {
		if old[p] == e {
			continue
		}
		if e.mode == "160000" {
			continue // a submodule's commit: checked out from its own repository (see diff)
		}
		for _, t := range h.trees {
			if why := h.entry(t, p, e.mode, e.id); why != "" {
				return why
			}
		}
	}
	return ""
}

// parseIndex reads an index file's entries (versions 2 to 4; git's
// Documentation/gitformat-index.txt), by path and stage.
func parseIndex(b []byte, rawLen int) (map[string]indexEntry, error) {
	if len(b) < 12 || string(b[:4]) != "DIRC" {
		return nil, fmt.Errorf("is not an index")
	}
	version := binary.BigEndian.Uint32(b[4:8])
	count := binary.BigEndian.Uint32(b[8:12])
	if version < 2 || version > 4 {
		return nil, fmt.Errorf("has an unknown version")
	}
	out := map[string]indexEntry{}
	off := 12
	prev := ""
	for i := uint32(0); i < count; i++ {
		name, stage, e, next, err := parseIndexEntry(b, off, version, rawLen, prev)
		if err != nil {
			return nil, err
		}
		off, prev = next, name
		key := name
		if stage != 0 {
			key = fmt.Sprintf("%s\x00%d", name, stage)
		}
		out[key] = e
	}
	if err := checkIndexExtensions(b, off, rawLen); err != nil {
		return nil, err
	}
	// Conflict stages name the same path.
	for k, e := range out {
		if name, _, ok := strings.Cut(k, "\x00"); ok {
			delete(out, k)
			out[name+"\x00"+e.id] = e
		}
	}
	return out, nil
}

// parseIndexEntry reads the index entry at off in b (prev is the path of
// the entry before it, which version 4 paths are relative to): its path,
// stage and entry, and the offset of the next entry.
func parseIndexEntry(b []byte, off int, version uint32, rawLen int, prev string) (name string, stage uint16, e indexEntry, next int, err error) {
	fixed := 40 + rawLen + 2
	if len(b) < off+fixed {
		return "", 0, indexEntry{}, 0, fmt.Errorf("is cut short")
	}
	start := off
	mode := binary.BigEndian.Uint32(b[off+24 : off+28])
	id := hex.EncodeToString(b[off+40 : off+40+rawLen])
	flags := binary.BigEndian.Uint16(b[off+40+rawLen : off+42+rawLen])
	off += fixed
	if flags&0x4000 != 0 { // extended flags (skip-worktree, intent-to-add)
		if version < 3 || len(b) < off+2 {
			return "", 0, indexEntry{}, 0, fmt.Errorf("has bad flags")
		}
		off += 2
	}
	name, off, err = parseIndexPath(b, off, start, version, prev)
	if err != nil {
		return "", 0, indexEntry{}, 0, err
	}
	m, err := indexMode(mode)
	if err != nil {
		return "", 0, indexEntry{}, 0, err
	}
	return name, (flags >> 12) & 3, indexEntry{m, id}, off, nil
}

// parseIndexPath reads the path of the index entry that starts at start,
// at off in b, and returns it with the offset past it (and, before
// version 4, past the entry's padding).
func parseIndexPath(b []byte, off, start int, version uint32, prev string) (string, int, error) {
	if version == 4 {
		strip, k := uvarint4(b[off:])
		if k <= 0 || int(strip) > len(prev) {
			return "", 0, fmt.Errorf("is cut short")
		}
		off += k
		nul := bytes.IndexByte(b[off:], 0)
		if nul < 0 {
			return "", 0, fmt.Errorf("is cut short")
		}
		name := prev[:len(prev)-int(strip)] + string(b[off:off+nul])
		return name, off + nul + 1, nil
	}
	nul := bytes.IndexByte(b[off:], 0)
	if nul < 0 {
		return "", 0, fmt.Errorf("is cut short")
	}
	name := string(b[off : off+nul])
	off += nul + 1
	for (off-start)%8 != 0 { // padding from the entry's start
		off++
	}
	return name, off, nil
}

// indexMode is the tree mode of an index entry's mode.
func indexMode(mode uint32) (string, error) {
	switch mode & 0o170000 {
	case 0o100000:
		if mode&0o111 != 0 {
			return "100755", nil
		}
		return "100644", nil
	case 0o120000:
		return "120000", nil
	case 0o160000:
		return "160000", nil
	case 0o040000:
		return "", fmt.Errorf("is a sparse index")
	}
	return "", fmt.Errorf("has an entry of unknown mode")
}

// checkIndexExtensions walks the extensions after the entries, from off
// up to the trailing checksum: a split index keeps its entries in
// another file.
func checkIndexExtensions(b []byte, off, rawLen int) error {
	for off+8 <= len(b)-rawLen {
		sig := string(b[off : off+4])
		size := int(binary.BigEndian.Uint32(b[off+4 : off+8]))
		if sig == "link" {
			return fmt.Errorf("is a split index")
		}
		if size < 0 || off+8+size > len(b) {
			break
		}
		off += 8 + size
	}
	return nil
}

// uvarint4 is the index v4 path prefix length: git's offset encoding
// (varint.c decode_varint), not encoding/binary's.
func uvarint4(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	i := 0
	c := b[i]
	i++
	val := uint64(c & 127)
	for c&128 != 0 {
		if i >= len(b) {
			return 0, 0
		}
		val++
		if val == 0 || val&^(^uint64(0)>>7) != 0 {
			return 0, 0
		}
		c = b[i]
		i++
		val = (val << 7) + uint64(c&127)
	}
	return val, i
}

// Layered is an FS that can tell what the change itself wrote (a layer's
// upper directory).
type Layered interface {
	FS
	InLayer(path string) bool
}

// historyKept ends the reason a history file is refused for.
const historyKept = "; the repository's refs, index and logs were kept as they were (the new commits stay, unreachable)"

// historyRefusal is the rules' verdict on a change to a history file of
// gd (rest relative to it): refused, with everything else of its history,
// when the history the run added is.
func (c *Checker) historyRefusal(gd, rest string) (Verdict, bool) {
	if !historyFile(rest) {
		return Verdict{}, false
	}
	if rest == "HEAD" {
		// A symbolic HEAD ("ref: refs/heads/x") names no commit itself,
		// and without it the repository would not be one.
		if b, err := c.cfg.Final.ReadFile(c.abs(joinRel(gd, rest)), 256); err == nil && strings.HasPrefix(string(b), "ref:") {
			return Verdict{}, false
		}
	}
	if why := c.history(gd); why != "" {
		return Verdict{Refuse, why + historyKept}, true
	}
	return Verdict{}, false
}
