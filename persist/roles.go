package persist

import (
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/gitconfig"
	"github.com/sandboxd/sandboxd/pathtree"
)

// Files a repository's config makes special, wherever they are: its config
// files (and the files they include), its hooks directory, and its
// core.hooksPath. A command cannot add such a reference (the config entries
// are exec-capable and refused), so only those the workspace's
// repositories and the caller's own git config had before count; they
// are resolved in the tree before and after, and both count.

// HookNames are the hooks git runs (githooks(5)): what a hooksPath that
// is a work tree itself may not gain. A fresh slice.
func HookNames() []string {
	return []string{"applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit",
		"pre-merge-commit", "prepare-commit-msg", "commit-msg", "post-commit",
		"pre-rebase", "post-checkout", "post-merge", "pre-push",
		"pre-receive", "update", "proc-receive", "post-receive",
		"post-update", "reference-transaction", "push-to-checkout", "pre-auto-gc",
		"post-rewrite", "sendemail-validate", "fsmonitor-watchman",
		"p4-changelist", "p4-prepare-changelist", "p4-post-changelist",
		"p4-pre-submit", "post-index-change"}
}

func hookName(n string) bool { return slices.Contains(HookNames(), n) }

// maxIncludeDepth is git's limit on nested includes.
const maxIncludeDepth = 10

func (c *Checker) addRole(p string, r role) {
	if !pathtree.Within(c.cfg.Workspace, p) {
		return // outside the workspace: not the commit's to write
	}
	if old, ok := c.roles[p]; ok && old.kind <= r.kind {
		return
	}
	c.roles[p] = r
}

// loadRoles finds every role, once.
func (c *Checker) loadRoles() {
	if c.rolesOK {
		return
	}
	c.rolesOK = true
	for _, view := range []FS{c.cfg.Before, c.cfg.Final} {
		var global []gitconfig.Entry
		for _, g := range c.cfg.GlobalConfigs {
			global = append(global, c.configRoles(view, g, "", "your git config", 0)...)
		}
		c.globalEntries = append(c.globalEntries, global...)
		for _, r := range c.cfg.StartRepos {
			c.repoRoles(view, r, global)
		}
		for _, e := range global {
			if e.Section == "core" && e.Key == "hookspath" && e.Value != "" && !filepath.IsAbs(e.Value) && !strings.HasPrefix(e.Value, "~") {
				c.globalHooks = append(c.globalHooks, filepath.Clean(e.Value))
			}
		}
		// What a settings file names that its tool runs or loads (a
		// yarnPath, a Cargo include, an hg %include) is as guarded as
		// the setting.
		c.settingsRoles(view)
		// A protected name reached through a symlink guards what it
		// points at.
		for _, rel := range c.cfg.StartNamed {
			lit := joinPath(c.cfg.Workspace, rel)
			if r, err := Resolve(view, lit, true); err == nil && r != lit {
				c.addRole(r, role{roleNamed, "", rel + " is a persistence path, and this is what it points at"})
			}
		}
	}
	// The way to every repository, work tree and role path.
	guard := func(p, why string) {
		for q := p; ; q = filepath.Dir(q) {
			if _, below := pathtree.Below(c.cfg.Workspace, q); !below {
				break
			}
			if _, ok := c.ancestors[q]; !ok {
				c.ancestors[q] = why
			}
		}
	}
	for _, r := range c.cfg.StartRepos {
		guard(filepath.Dir(r.GitDir), "leads to the repository "+r.GitDir)
		if r.Dotgit {
			guard(joinPath(c.cfg.Workspace, r.At), "holds a repository")
		}
	}
	for p, r := range c.roles {
		guard(filepath.Dir(p), "leads to "+p+" ("+r.why+")")
	}
}

// repoRoles adds the roles of the repository r in view.
func (c *Checker) repoRoles(view FS, r Repo, global []gitconfig.Entry) {
	gd := r.GitDir
	rel := strings.TrimPrefix(strings.TrimPrefix(gd, c.cfg.Workspace), "/")
	if rel == "" {
		rel = "the workspace"
	}
	common, v := CommonDir(view, gd)
	if v != GitDir {
		common = gd
	}
	var ents []gitconfig.Entry
	for _, f := range []string{gd + "/config", gd + "/config.worktree", common + "/config"} {
		ents = append(ents, c.configRoles(view, f, gd, "config of "+rel, 0)...)
	}
	if h, err := Resolve(view, common+"/hooks", true); err == nil {
		c.addRole(h, role{roleHooks, gd, "the hooks of " + rel + " run outside the sandbox"})
	}
	trees := worktrees(view, gd, ents)
	if r.Dotgit {
		trees = append(trees, joinPath(c.cfg.Workspace, r.At))
	}
	for _, e := range append(ents, global...) {
		if e.Section != "core" || e.Key != "hookspath" || e.Value == "" {
			continue
		}
		bases := trees
		switch {
		case strings.HasPrefix(e.Value, "~/") && c.cfg.Home != "":
			bases = []string{c.cfg.Home}
		case filepath.IsAbs(e.Value):
			bases = []string{"/"}
		}
		v := strings.TrimPrefix(e.Value, "~/")
		for _, b := range bases {
			t, err := Resolve(view, b+"/"+v, true)
			if err != nil {
				continue
			}
			why := "core.hooksPath of " + rel + " names it: git runs hooks from it"
			if isTree(t, trees) {
				c.addRole(t, role{roleWorktreeHooks, gd, why})
			} else {
				c.addRole(t, role{roleHooksPath, gd, why})
			}
		}
	}
}

func isTree(p string, trees []string) bool {
	for _, t := range trees {
		if p == t {
			return true
		}
	}
	return false
}

// worktrees are the directories a relative core.hooksPath of gd may be
// relative to: its work tree(s), or gd itself when bare.
func worktrees(view FS, gd string, ents []gitconfig.Entry) []string {
	out := []string{gd}
	if filepath.Base(gd) == ".git" {
		out = append(out, filepath.Dir(gd))
	}
	for _, e := range ents {
		if e.Section == "core" && e.Key == "worktree" && e.Value != "" {
			p := e.Value
			if !filepath.IsAbs(p) {
				p = gd + "/" + p
			}
			if r, err := Resolve(view, p, true); err == nil {
				out = append(out, r)
			}
		}
	}
	// A linked worktree's git directory names its .git file.
	if b, err := readFollow(view, gd+"/gitdir", 4096); err == nil {
		p := strings.TrimRight(string(b), "\r\n")
		if !filepath.IsAbs(p) {
			p = gd + "/" + p
		}
		if r, err := Resolve(view, filepath.Dir(p), true); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// configRoles adds the config file f (and what it includes) as roles of gd
// and returns its entries. Relative includes are relative to the
// including file's directory, as git opened it.
func (c *Checker) configRoles(view FS, f, gd, why string, depth int) []gitconfig.Entry {
	return c.configEntries(view, f, depth, func(p string, d int) {
		if r, err := Resolve(view, p, true); err == nil {
			c.addRole(r, role{roleConfig, gd, strings.Repeat("included by ", d-depth) + why})
		}
	})
}

// configEntries reads the git config file f in view and the files it
// includes, as git does (relative to the including file, "~/" the home,
// at most maxIncludeDepth deep), calling visit for each file it opens.
func (c *Checker) configEntries(view FS, f string, depth int, visit func(path string, depth int)) []gitconfig.Entry {
	if depth > maxIncludeDepth {
		return nil
	}
	if visit != nil {
		visit(f, depth)
	}
	b, err := readFollow(view, f, gitconfig.MaxSize)
	if err != nil {
		return nil
	}
	ents, err := gitconfig.Parse(b)
	if err != nil {
		return nil
	}
	out := ents
	for _, e := range ents {
		if (e.Section == "include" || e.Section == "includeif") && e.Key == "path" && e.Value != "" {
			p := e.Value
			switch {
			case strings.HasPrefix(p, "~/") && c.cfg.Home != "":
				p = c.cfg.Home + p[1:]
			case !filepath.IsAbs(p):
				p = filepath.Dir(f) + "/" + p
			}
			out = append(out, c.configEntries(view, p, depth+1, visit)...)
		}
	}
	return out
}

// roleRule decides a change at rel against the roles.
func (c *Checker) roleRule(rel string, k Change) Verdict {
	c.loadRoles()
	if k != Remove && len(c.globalHooks) > 0 {
		// Your own core.hooksPath, relative: hooks in every work tree
		// (or bare repository), new ones too.
		parts := strings.Split(rel, "/")
		for i := 0; i < len(parts); i++ {
			w := strings.Join(parts[:i], "/")
			inside := strings.Join(parts[i:], "/")
			for _, h := range c.globalHooks {
				if !pathtree.Within(h, inside) {
					continue
				}
				if c.isOrNamed(w) {
					return Verdict{Refuse, "core.hooksPath in your git config makes " + joinRel(w, h) + " the hooks of " + orWorkspace(w)}
				}
				if d, v := Discover(c.cfg.Final, c.abs(w)); v != NotGitDir && !d.Bare {
					return Verdict{Refuse, "core.hooksPath in your git config makes " + joinRel(w, h) + " the hooks of the repository in " + orWorkspace(w)}
				}
			}
		}
	}
	if len(c.roles) == 0 {
		return Verdict{}
	}
	p := c.abs(rel)
	for q := p; ; q = filepath.Dir(q) {
		if r, ok := c.roles[q]; ok {
			if v := c.applyRole(r, q, p, k); v.Action != Keep {
				return v
			}
		}
		if q == c.cfg.Workspace || q == "/" {
			break
		}
	}
	return Verdict{}
}

func (c *Checker) applyRole(r role, at, p string, k Change) Verdict {
	gd := strings.TrimPrefix(strings.TrimPrefix(r.owner, c.cfg.Workspace), "/")
	switch r.kind {
	case roleConfig:
		if at == p {
			return c.configChange(p, k, gd)
		}
	case roleHooks:
		switch {
		case k == Remove:
		case at == p:
			if k != Dir {
				return Verdict{Refuse, r.why + "; it must stay a directory"}
			}
		case k == File && strings.HasSuffix(p, ".sample") && filepath.Dir(p) == at:
		default:
			return Verdict{Refuse, r.why}
		}
	case roleHooksPath, roleNamed:
		if k != Remove {
			return Verdict{Refuse, r.why}
		}
	case roleWorktreeHooks:
		if k != Remove && filepath.Dir(p) == at && hookName(filepath.Base(p)) {
			return Verdict{Refuse, r.why}
		}
	}
	return Verdict{}
}

// RoleKind says what a start repository's config makes a path.
type RoleKind int

const (
	// ConfigFile: git reads it as the repository's config.
	ConfigFile RoleKind = iota
	// HooksDir: the repository's hooks directory.
	HooksDir
	// HooksPath: a core.hooksPath directory.
	HooksPath
	// WorktreeHooks: a core.hooksPath that is a work tree; only the hook
	// names in it are hooks.
	WorktreeHooks
	// NamedTarget: what a protected name reaches through a symlink.
	NamedTarget
)

// RolePath is one path a repository's config makes special.
type RolePath struct {
	Path  string // absolute, inside the workspace
	Kind  RoleKind
	Owner string // the git directory, absolute
}

// Roles lists the workspace paths the start repositories' config (and the
// caller's own) make special, sorted.
func (c *Checker) Roles() []RolePath {
	c.loadRoles()
	var out []RolePath
	for p, r := range c.roles {
		out = append(out, RolePath{Path: p, Kind: RoleKind(r.kind), Owner: r.owner})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Path < out[b].Path })
	return out
}

// GlobalHooks are the relative core.hooksPath values of the caller's own
// git config: a hooks directory in every work tree.
func (c *Checker) GlobalHooks() []string {
	c.loadRoles()
	return slices.Compact(append([]string(nil), c.globalHooks...))
}

// settingsRoles adds, for every Settings file the workspace held, the
// files its program-naming settings name (a path in their value,
// relative to the file's directory or its parent: Cargo resolves
// programs from the directory holding .cargo).
func (c *Checker) settingsRoles(view FS) {
	for _, rel := range c.cfg.StartNamed {
		n, at, ok := c.cfg.Names.Match(rel)
		if !ok || n.Kind != Settings || at+strings.Count(n.Pattern, "/") != strings.Count(rel, "/") {
			continue
		}
		p := c.abs(rel)
		b, err := readFollow(view, p, maxSettings)
		if err != nil {
			continue
		}
		dir := filepath.Dir(p)
		sets, err := n.Settings(b, settingsEnv{c: c, dir: dir})
		if err != nil {
			continue
		}
		for _, st := range sets {
			for _, v := range settingPaths(st.Value) {
				for _, base := range []string{dir, filepath.Dir(dir)} {
					q := v
					switch {
					case strings.HasPrefix(q, "~/") && c.cfg.Home != "":
						q = c.cfg.Home + q[1:]
					case !filepath.IsAbs(q):
						q = base + "/" + q
					}
					if r, err := Resolve(view, filepath.Clean(q), true); err == nil {
						c.addRole(r, role{roleNamed, "", rel + " names it (" + st.Key + "), and " + n.Why()})
					}
				}
			}
		}
	}
}

// quotedString is a Go-quoted string in a setting's canonical value.
var quotedString = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// settingPaths are the words of a program-naming setting's value that
// may be local paths (every word but options and URLs: a Cargo include
// or a yarnPath is a bare file name too), quoted ones unquoted.
func settingPaths(v string) []string {
	if _, after, ok := strings.Cut(v, "\x00"); ok {
		v = after // an ini value after its section
	}
	var words []string
	if q := quotedString.FindAllString(v, -1); len(q) > 0 {
		for _, s := range q {
			if u, err := strconv.Unquote(s); err == nil {
				words = append(words, strings.Fields(u)...)
			}
		}
	} else {
		words = strings.Fields(v)
	}
	var out []string
	for _, w := range words {
		w = strings.TrimPrefix(w, "path:")
		if _, after, ok := strings.Cut(w, "="); ok && strings.HasPrefix(w, "-") {
			w = after // --require=./x.js
		}
		w = strings.Trim(w, `"'`)
		if w == "" || strings.HasPrefix(w, "-") || strings.Contains(w, "://") {
			continue
		}
		out = append(out, w)
	}
	return out
}
