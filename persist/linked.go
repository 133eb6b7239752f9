package persist

import (
	"errors"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/gitconfig"
	"github.com/sandboxd/sandboxd/pathtree"
)

// Git's own linked structures. `git worktree add` and `git submodule add`
// (and `git submodule update --init`, `git clone --recurse-submodules`)
// write one piece of state in several places, each of which the rules
// alone refuse: a worktree's git directory holds a commondir, a
// submodule's config a core.worktree, their work trees a ".git" file, and
// the superproject's .gitmodules is a protected name. Read from git's
// builtin/worktree.c (add_worktree), worktree.c
// (write_worktree_linking_files, get_linked_worktree),
// builtin/submodule--helper.c (add, clone_submodule), submodule.c
// (submodule_name_to_gitdir, connect_work_tree_and_git_dir) and
// submodule-config.c (parse_config, check_submodule_name,
// check_submodule_url).
//
// A unit is one such structure the run created: a new git directory
// <common>/worktrees/<id> or <gd>/modules/<name>. Its structure is
// accepted exactly when it is what git writes, pointing only at itself
// and inside the workspace; everything else in it is then judged by the
// ordinary rules, and the unit is committed whole or not at all
// (rollback.go).

type unitKind int

const (
	worktreeUnit unitKind = iota
	submoduleUnit
)

// unit is one linked worktree or submodule the run created.
type unit struct {
	kind   unitKind
	fam    *family
	gitDir string // absolute: <common>/worktrees/<id>, <super>/modules/<name>
	super  string // absolute: the git directory whose worktrees/ or modules/ holds it
	name   string // the worktree's id, or the submodule's name
	// tree is the work tree its structure names (absolute; "" when it
	// names none inside the workspace); path is, for a submodule, tree
	// relative to superTree, the superproject's work tree.
	tree, superTree, path string
	// trees are the work trees that go with it: tree, and directories
	// whose .git file names its git directory.
	trees []string
	why   string // why its structure is not git's own; "" when it is
}

// workflow names the unit for a person.
func (u *unit) workflow(c *Checker) string {
	tree := u.tree
	if tree == "" && len(u.trees) > 0 {
		tree = u.trees[0]
	}
	if u.kind == worktreeUnit {
		if tree == "" {
			return "the new linked worktree whose git directory is " + c.relName(u.gitDir) + " (git worktree add)"
		}
		return "the new linked worktree " + c.relName(tree) + " (git worktree add)"
	}
	if tree == "" {
		return "the new submodule " + quoted(u.name) + " whose git directory is " + c.relName(u.gitDir) + " (git submodule add, or update --init)"
	}
	return "the new submodule " + quoted(u.name) + " at " + c.relName(tree) + " (git submodule add, or update --init)"
}

// worktreeEntry reports the names git keeps in a linked worktree's own git
// directory: what path.c's common_list does not send to the common
// directory, and the files that link the two.
func worktreeEntry(n string) bool {
	switch n {
	case "HEAD", "index", "logs", "refs", "commondir", "gitdir", "locked", "config.worktree", "info",
		"rebase-merge", "rebase-apply", "sequencer", "modules", "AUTO_MERGE", "MERGE_MSG", "MERGE_MODE",
		"MERGE_RR", "SQUASH_MSG", "COMMIT_EDITMSG", "TAG_EDITMSG", "index.lock", "HEAD.lock":
		return true
	}
	return strings.HasSuffix(n, "_HEAD") || strings.HasPrefix(n, "BISECT_") || strings.HasPrefix(n, "NOTES_MERGE_")
}

// worktreeStructure checks a new <common>/worktrees/<id> against what git
// worktree add writes: a commondir resolving to the repository it is in,
// a gitdir naming <tree>/.git inside the workspace, <tree>/.git a gitfile
// naming it back, and only what git keeps per worktree. It sets u.tree.
func (c *Checker) worktreeStructure(u *unit) string {
	fsys := c.cfg.Final
	name := c.relName(u.gitDir)
	if r, err := Resolve(fsys, u.gitDir, true); err != nil || r != u.gitDir {
		return name + " is reached through a symlink"
	}
	if why := c.plainFile(u.gitDir + "/commondir"); why != "" {
		return why
	}
	if common, v := CommonDir(fsys, u.gitDir); v != GitDir || common != u.fam.common {
		return name + "/commondir names " + quoted(common) + ", not the repository it is in (" + c.relName(u.fam.common) + ")"
	}
	if why := c.plainFile(u.gitDir + "/gitdir"); why != "" {
		return why
	}
	b, _ := fsys.ReadFile(u.gitDir+"/gitdir", gitfileLimit)
	p := strings.TrimRight(string(b), " \t\n\r\v\f") // strbuf_rtrim
	if !strings.HasSuffix(p, "/.git") {
		return name + "/gitdir names " + quoted(p) + ", not a work tree's .git"
	}
	if !filepath.IsAbs(p) {
		p = u.gitDir + "/" + p
	}
	tree := filepath.Dir(filepath.Clean(p))
	if why := c.treeRisk(tree, name+"/gitdir"); why != "" {
		return why
	}
	u.tree = tree
	if why := c.gitfileNames(tree, u.gitDir); why != "" {
		return why
	}
	names, err := listNames(fsys, u.gitDir)
	if err != nil {
		return name + " cannot be listed"
	}
	for _, n := range names {
		switch {
		case n == "hooks":
			return name + " has a hooks directory: git takes a worktree's hooks from its repository, and nothing else should be there"
		case !worktreeEntry(n):
			return name + " holds " + quoted(n) + ", which git keeps in the repository, not in a worktree's git directory"
		}
	}
	return ""
}

// submoduleStructure checks a new <super>/modules/<name> against what git
// submodule add and update write: a repository of its own (no commondir,
// not bare) whose core.worktree names <path> in the superproject's work
// tree, <path>/.git a gitfile naming it, and the superproject's
// .gitmodules declaring <name> at <path>. Its hooks and config are judged
// by the ordinary rules, as members. It sets u.tree, u.superTree, u.path.
func (c *Checker) submoduleStructure(u *unit) string {
	fsys := c.cfg.Final
	name := c.relName(u.gitDir)
	if why := submoduleNameRisk(u.name); why != "" {
		return name + ": " + why
	}
	if r, err := Resolve(fsys, u.gitDir, true); err != nil || r != u.gitDir {
		return name + " is reached through a symlink"
	}
	if IsGitDir(fsys, u.gitDir) != GitDir {
		return name + " is not a git directory git can use"
	}
	if _, err := fsys.Lstat(u.gitDir + "/commondir"); err == nil {
		return name + " has a commondir: a submodule's git directory is a repository of its own"
	}
	tree, why := c.submoduleTree(u)
	if why != "" {
		return why
	}
	u.superTree = c.workTreeOf(u.super)
	rel, ok := pathtree.Below(u.superTree, tree)
	if u.superTree == "" || !ok {
		return name + "/config: core.worktree names " + quoted(c.relName(tree)) + ", not a path in the work tree of " + c.relName(u.super)
	}
	if why := c.treeRisk(tree, name+"/config core.worktree"); why != "" {
		return why
	}
	u.tree, u.path = tree, rel
	if why := c.gitfileNames(tree, u.gitDir); why != "" {
		return why
	}
	return c.declares(u)
}

// submoduleTree is the work tree a submodule's config names
// (core.worktree, the last value; relative to the git directory).
func (c *Checker) submoduleTree(u *unit) (string, string) {
	name := c.relName(u.gitDir)
	if why := c.plainFile(u.gitDir + "/config"); why != "" {
		return "", why
	}
	b, _ := c.cfg.Final.ReadFile(u.gitDir+"/config", gitconfig.MaxSize)
	ents, err := gitconfig.Parse(b)
	if err != nil {
		return "", name + "/config cannot be parsed (" + reason(err) + ")"
	}
	worktree := ""
	for _, e := range ents {
		switch {
		case e.Section == "core" && e.Key == "worktree":
			worktree = e.Value
		case e.Section == "core" && e.Key == "bare" && (e.NoValue || strings.EqualFold(e.Value, "true")):
			return "", name + " is a bare repository, not a submodule's git directory"
		}
	}
	if worktree == "" {
		return "", name + "/config names no work tree (core.worktree), which git submodule always writes"
	}
	if !filepath.IsAbs(worktree) {
		worktree = u.gitDir + "/" + worktree
	}
	return filepath.Clean(worktree), ""
}

// declares checks that the superproject's .gitmodules declares the
// submodule u at its path, once.
func (c *Checker) declares(u *unit) string {
	ents, err := c.gitmodules(c.cfg.Final, u.superTree)
	if err != nil {
		return c.relName(u.superTree+"/.gitmodules") + " cannot be read (" + reason(err) + ")"
	}
	var paths []string
	for _, e := range ents {
		if e.Section == "submodule" && e.Subsection == u.name && e.Key == "path" {
			paths = append(paths, e.Value)
		}
	}
	if len(paths) != 1 || paths[0] != u.path {
		return c.relName(u.superTree+"/.gitmodules") + " does not declare the submodule " + quoted(u.name) + " at " + quoted(u.path) + " (once)"
	}
	return ""
}

// gitmodules reads the .gitmodules of the work tree tree in fsys (none:
// no entries).
func (c *Checker) gitmodules(fsys FS, tree string) ([]gitconfig.Entry, error) {
	p := tree + "/.gitmodules"
	st, err := fsys.Lstat(p)
	if err != nil {
		return nil, nil
	}
	if !st.IsRegular() {
		return nil, errNotPlain
	}
	b, err := fsys.ReadFile(p, gitconfig.MaxSize+1)
	if err != nil {
		return nil, err
	}
	return gitconfig.Parse(b)
}

// treeRisk says why tree (absolute, named by what) cannot be a linked
// work tree: outside the workspace, reached through a symlink, a path git
// would not check out into, or inside a git directory. "" when it can.
func (c *Checker) treeRisk(tree, what string) string {
	rel, ok := pathtree.Below(c.cfg.Workspace, tree)
	if !ok {
		return what + " names " + quoted(tree) + ", outside the workspace"
	}
	if !validRelPath(rel) {
		return what + " names " + quoted(rel) + ", a path git would not check out into"
	}
	if r, err := Resolve(c.cfg.Final, tree, true); err != nil || r != tree {
		return what + " names " + quoted(rel) + ", which is reached through a symlink"
	}
	parts := strings.Split(rel, "/")
	for i := 1; i <= len(parts); i++ {
		if d := strings.Join(parts[:i], "/"); c.isOrNamed(d) {
			return what + " names " + quoted(rel) + ", inside the git directory " + d
		}
	}
	return ""
}

// gitfileNames says why tree/.git is not a gitfile naming gd ("" when it
// is).
func (c *Checker) gitfileNames(tree, gd string) string {
	f := tree + "/.git"
	if st, err := c.cfg.Final.Lstat(f); err != nil || !st.IsRegular() {
		return c.relName(f) + " is not a gitfile"
	}
	if target, v := ReadGitfile(c.cfg.Final, f); v != GitDir || target != gd {
		return c.relName(f) + " does not name " + c.relName(gd) + " (it names " + quoted(c.relName(target)) + ")"
	}
	return ""
}

// plainFile says why p is not a regular file ("" when it is).
func (c *Checker) plainFile(p string) string {
	if st, err := c.cfg.Final.Lstat(p); err != nil || !st.IsRegular() {
		return c.relName(p) + " is missing or not a plain file"
	}
	return ""
}

// workTreeOf is the work tree of the git directory gd in the final tree:
// a new linked worktree's, a submodule's core.worktree, a linked
// worktree's gitdir, the parent of a .git directory. "" when none.
func (c *Checker) workTreeOf(gd string) string {
	if u := c.units[gd]; u != nil && u.kind == worktreeUnit {
		return u.tree
	}
	fsys := c.cfg.Final
	if b, err := readFollow(fsys, gd+"/config", gitconfig.MaxSize); err == nil {
		if ents, err := gitconfig.Parse(b); err == nil {
			wt := ""
			for _, e := range ents {
				if e.Section == "core" && e.Key == "worktree" {
					wt = e.Value
				}
			}
			if wt != "" {
				if !filepath.IsAbs(wt) {
					wt = gd + "/" + wt
				}
				if r, err := Resolve(fsys, wt, true); err == nil {
					return r
				}
			}
		}
	}
	if b, err := readFollow(fsys, gd+"/gitdir", gitfileLimit); err == nil {
		if p := strings.TrimRight(string(b), " \t\n\r"); strings.HasSuffix(p, "/.git") && filepath.IsAbs(p) {
			return filepath.Dir(filepath.Clean(p))
		}
	}
	if filepath.Base(gd) == ".git" {
		return filepath.Dir(gd)
	}
	return ""
}

// submoduleValueRisk judges the value of one .gitmodules setting, by what
// git's parse_config (submodule-config.c) accepts for it: why it is bad
// ("" when it is not), and whether key is a setting git acts on at all.
func submoduleValueRisk(key string, e gitconfig.Entry) (string, bool) {
	v := e.Value
	bad := func(why string) (string, bool) { return why, false }
	switch key {
	case "path":
		if e.NoValue || !validSubmodulePath(v) {
			return bad("path must be a plain relative path inside the work tree")
		}
	case "url":
		if e.NoValue || v == "" {
			return bad("url has no value")
		}
	case "update":
		switch v {
		case "checkout", "rebase", "merge", "none":
		default:
			return bad("update is not checkout, rebase, merge or none (\"!command\" runs a program)")
		}
	case "branch":
		if e.NoValue || v == "" || strings.HasPrefix(v, "-") || hasControl(v) {
			return bad("branch is not a plain branch name")
		}
	case "ignore":
		switch v {
		case "untracked", "dirty", "all", "none":
		default:
			return bad("ignore is not untracked, dirty, all or none")
		}
	case "shallow":
		if !e.NoValue && !gitBool(v) {
			return bad("shallow is not a boolean")
		}
	case "fetchrecursesubmodules":
		if !e.NoValue && !gitBool(v) && !strings.EqualFold(v, "on-demand") {
			return bad("fetchRecurseSubmodules is not a boolean or on-demand")
		}
	default:
		return "", false
	}
	return "", true
}

// SubmoduleEntryRisk says why one .gitmodules entry is not one git itself
// acts on safely: a setting of a submodule with a valid name, whose value
// is plain; URLs are judged further by the caller, where they lead. ""
// when it is.
func SubmoduleEntryRisk(e gitconfig.Entry) string {
	if e.Section != "submodule" || e.Subsection == "" {
		return entryName(e) + " is not a submodule setting"
	}
	if why := submoduleNameRisk(e.Subsection); why != "" {
		return why
	}
	why, ok := submoduleValueRisk(e.Key, e)
	switch {
	case why != "":
		return entryName(e) + ": " + why
	case !ok:
		return entryName(e) + " is not a submodule setting git acts on (path, url, update, branch, ignore, shallow, fetchRecurseSubmodules)"
	}
	if e.Key == "url" {
		return submoduleURLSyntax(e.Value)
	}
	return ""
}

// submoduleNameRisk is check_submodule_name: not empty, no ".." component
// (either separator).
func submoduleNameRisk(name string) string {
	if name == "" {
		return "the submodule name is empty"
	}
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '/' || r == '\\' }) {
		if part == ".." {
			return "the submodule name " + quoted(name) + " has a \"..\" component, which git refuses"
		}
	}
	return ""
}

// validSubmodulePath: a relative path inside the work tree, with no "."
// or ".." or empty component, not in a .git directory, not option-like,
// no control characters.
func validSubmodulePath(p string) bool {
	return !strings.HasPrefix(p, "-") && !strings.HasPrefix(p, "/") && !hasControl(p) && validRelPath(p)
}

// submoduleURLSyntax is check_submodule_url's syntax part, and a
// transport helper: not option-like, no newline once decoded, a relative
// URL that does not climb out to a host part. "" when it passes.
func submoduleURLSyntax(u string) string {
	if strings.HasPrefix(u, "-") {
		return "the submodule URL " + quoted(u) + " looks like an option"
	}
	dec, err := url.PathUnescape(u)
	if err != nil {
		dec = u
	}
	if hasControl(u) || hasControl(dec) {
		return "the submodule URL " + quoted(u) + " holds a control character"
	}
	if relativeURL(u) {
		rest := u
		n := 0
		for strings.HasPrefix(rest, "../") {
			rest, n = rest[3:], n+1
		}
		if n > 0 && (strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, "/")) {
			return "the submodule URL " + quoted(u) + " climbs out of its base, which git refuses"
		}
	}
	e := gitconfig.Entry{Section: "submodule", Subsection: "x", Key: "url", Value: u}
	if why, bad := gitconfig.ExecCapable(e); bad {
		return "the submodule URL " + quoted(u) + ": " + why
	}
	return ""
}

// relativeURL: git resolves "./" and "../" URLs against the superproject's
// remote.
func relativeURL(u string) bool { return strings.HasPrefix(u, "./") || strings.HasPrefix(u, "../") }

// resolveURL resolves a relative submodule URL against base, as
// submodule--helper's relative_url does in substance: each "../" drops
// one component of base, "./" none.
func resolveURL(base, rel string) string {
	base = strings.TrimRight(base, "/")
	for {
		switch {
		case strings.HasPrefix(rel, "./"):
			rel = rel[2:]
		case strings.HasPrefix(rel, "../"):
			rel = rel[3:]
			switch i := strings.LastIndexAny(strings.TrimSuffix(base, ":"), "/:"); {
			case i < 0:
				base = "."
			case base[i] == ':':
				base = base[:i+1] // scp-like host:path keeps its host
			default:
				base = base[:i]
			}
		default:
			switch {
			case rel == "":
				return base
			case strings.HasSuffix(base, ":"):
				return base + rel
			}
			return base + "/" + rel
		}
	}
}

// submoduleURLRisk judges a submodule URL of the superproject git
// directory super (absolute) by where it leads: the syntax rules, then,
// resolved against the superproject's remote (or its work tree), the
// rule for remotes (urlRisk). "" when it is safe.
func (c *Checker) submoduleURLRisk(u, super, superTree string) string {
	if why := submoduleURLSyntax(u); why != "" {
		return why
	}
	if relativeURL(u) {
		u = resolveURL(c.superRemote(super, superTree), u)
	}
	if why, bad := c.urlRisk(u, c.relOf(super)); bad {
		return "the submodule URL " + why
	}
	return ""
}

// superRemote is the URL git resolves relative submodule URLs against:
// the remote of the superproject's current branch (else origin), else
// its work tree.
func (c *Checker) superRemote(super, superTree string) string {
	b, err := readFollow(c.cfg.Final, super+"/config", gitconfig.MaxSize)
	if err != nil {
		return superTree
	}
	ents, _ := gitconfig.Parse(b)
	branch := ""
	if h, err := c.cfg.Final.ReadFile(super+"/HEAD", headLimit); err == nil {
		branch = strings.TrimPrefix(strings.TrimSpace(strings.TrimPrefix(string(h), "ref:")), "refs/heads/")
	}
	remote := "origin"
	for _, e := range ents {
		if e.Section == "branch" && e.Subsection == branch && e.Key == "remote" && e.Value != "" {
			remote = e.Value
		}
	}
	for _, e := range ents {
		if e.Section == "remote" && e.Subsection == remote && e.Key == "url" && e.Value != "" {
			return e.Value
		}
	}
	return superTree
}

func gitBool(v string) bool {
	switch strings.ToLower(v) {
	case "true", "false", "yes", "no", "on", "off", "1", "0", "":
		return true
	}
	return false
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

var errNotPlain = errors.New("it is not a plain file")

// listNames lists the directory dir of fsys, when fsys can list.
func listNames(fsys FS, dir string) ([]string, error) {
	l, ok := fsys.(lister)
	if !ok {
		return nil, errors.New("cannot list")
	}
	return l.ReadDir(dir)
}

// quoted shows a value that may come from the command.
func quoted(s string) string { return "\"" + s + "\"" }

// unitGitfile reports that the workspace path gd (a ".git") is the gitfile
// of a new unit whose structure is git's own.
func (c *Checker) unitGitfile(gd string) bool {
	c.loadFamilies()
	p := c.abs(gd)
	u := c.unitFiles[p]
	return u != nil && u.why == "" && u.tree != "" && p == u.tree+"/.git"
}

// unitCommondir reports that the workspace directory gd is a new linked
// worktree's git directory whose structure (commondir included) is git's
// own.
func (c *Checker) unitCommondir(gd string) bool {
	c.loadFamilies()
	u := c.units[c.abs(gd)]
	return u != nil && u.kind == worktreeUnit && u.why == ""
}

// unitWorktree drops from added (config entries a change to the file p
// adds) the core.worktree of a new submodule's config that names the
// submodule's own work tree, as git submodule writes it.
func (c *Checker) unitWorktree(p string, added []gitconfig.Entry) []gitconfig.Entry {
	c.loadFamilies()
	u := c.units[filepath.Dir(p)]
	if u == nil || u.kind != submoduleUnit || u.why != "" || p != u.gitDir+"/config" {
		return added
	}
	out := added[:0:0]
	for _, e := range added {
		if e.Section == "core" && e.Key == "worktree" {
			wt := e.Value
			if !filepath.IsAbs(wt) {
				wt = u.gitDir + "/" + wt
			}
			if filepath.Clean(wt) == u.tree {
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// declaration decides a change to a .gitmodules (the name n matched at
// element at of rel) that declares submodules the run created in that
// work tree: every entry must be one git acts on safely (URLs by where
// they lead), the entries it had must stay, and the new ones must be
// settings of those submodules. ok is false when the change is not such a
// declaration: then .gitmodules is a protected name like any other.
func (c *Checker) declaration(rel string, k Change, n Name, at int) (Verdict, bool) {
	if n.Pattern != ".gitmodules" || at != strings.Count(rel, "/") || k != File {
		return Verdict{}, false
	}
	c.loadFamilies()
	tree := filepath.Dir(c.abs(rel))
	units := map[string]*unit{}
	var names []string
	for _, u := range c.declaring[tree] {
		if u.why == "" {
			units[u.name] = u
			names = append(names, quoted(u.name))
		}
	}
	if len(units) == 0 {
		return Verdict{}, false
	}
	now, err := c.gitmodules(c.cfg.Final, tree)
	if err != nil {
		return Verdict{}, false
	}
	before, _ := c.gitmodules(c.cfg.Before, tree)
	left := map[entryID]int{}
	for _, e := range now {
		left[idOf(e)]++
	}
	for _, e := range before {
		if left[idOf(e)] == 0 {
			return Verdict{Refuse, rel + " loses or changes " + entryName(e) + ": a submodule's declaration may only be added"}, true
		}
		left[idOf(e)]--
	}
	for _, e := range now {
		if why := SubmoduleEntryRisk(e); why != "" {
			return Verdict{Refuse, rel + ": " + why}, true
		}
		if e.Key == "url" {
			super := c.declaring[tree][0].super
			if u := units[e.Subsection]; u != nil {
				super = u.super
			}
			if why := c.submoduleURLRisk(e.Value, super, tree); why != "" {
				return Verdict{Refuse, rel + ": " + why}, true
			}
		}
		if left[idOf(e)] > 0 {
			left[idOf(e)]--
			if units[e.Subsection] == nil {
				return Verdict{}, false // a new entry for no submodule of this run
			}
		}
	}
	why := ".gitmodules declares " + strings.Join(names, ", ") + ", which git made in this run; each entry is one git acts on safely"
	for _, u := range c.declaring[tree] {
		if u.why == "" && !c.initialized(u) {
			why += "; " + quoted(u.name) + " is not initialized (" + c.relName(u.super) + "/config does not name it; `git submodule init` does)"
		}
	}
	return Verdict{List, why}, true
}

// initialized reports whether the superproject's config names the
// submodule u (submodule.<name>.url), as git submodule add and init
// write it.
func (c *Checker) initialized(u *unit) bool {
	b, err := readFollow(c.cfg.Final, u.fam.common+"/config", gitconfig.MaxSize)
	if err != nil {
		return false
	}
	ents, _ := gitconfig.Parse(b)
	for _, e := range ents {
		if e.Section == "submodule" && e.Subsection == u.name && e.Key == "url" {
			return true
		}
	}
	return false
}

// entryID is a config entry without its place.
type entryID struct {
	section, subsection, key, value string
	noValue                         bool
}

func idOf(e gitconfig.Entry) entryID {
	return entryID{e.Section, e.Subsection, e.Key, e.Value, e.NoValue}
}
