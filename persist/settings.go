package persist

import (
	"path/filepath"
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/gitconfig"
)

// A tool's configuration file often mixes ordinary settings (a registry,
// a lint level) with a few that name a program the tool then runs (npm's
// script-shell, Yarn's yarnPath, a Mercurial hook). Such a file is a
// Settings name: each is read as its tool reads it, and a change is
// refused when it adds a program-naming setting or changes one's value,
// the way a change to git's own config is judged (gitconfig.Compare).
// A file the tool would read but sandboxd cannot is refused whole.

// Setting is one entry of a tool's configuration file that names a
// program the tool runs, or that sandboxd cannot tell is harmless.
type Setting struct {
	// Key names the setting as the tool spells it ("script-shell",
	// "yarnPath", "hooks.pre-commit").
	Key string
	// Value is its value as the tool reads it.
	Value string
	// Why says what the tool does with it.
	Why string
}

// SettingsRule reads one tool's configuration file as the tool does and
// returns its program-naming settings; an error means the tool would read
// the file in a way sandboxd cannot follow, so it is refused.
type SettingsRule func(b []byte, env SettingsEnv) ([]Setting, error)

// SettingsEnv is what a rule may ask about the tree around the file.
type SettingsEnv interface {
	// Plantable reports whether a local path (absolute, "~/...", or
	// relative to the file's directory or its parent) reaches a place the
	// command could write unchecked (a private cache, an extra writable
	// root): a repository planted there runs its own hooks when a tool
	// pulls from it.
	Plantable(path string) bool
	// SubmoduleURL says why a .gitmodules URL is refused, "" when it is
	// not (relative URLs are resolved against the superproject).
	SubmoduleURL(u string) string
}

// maxSettings bounds a Settings file sandboxd reads: larger ones are
// refused (no tool's configuration file needs more).
const maxSettings = 1 << 20

// settingsEnv is the Checker's SettingsEnv for one file.
type settingsEnv struct {
	c   *Checker
	dir string // the file's directory (absolute)
}

func (e settingsEnv) Plantable(p string) bool {
	return e.c.plantable(p, e.dir) || e.c.plantable(p, filepath.Dir(e.dir))
}

func (e settingsEnv) SubmoduleURL(u string) string {
	super := ""
	if d, v := Discover(e.c.cfg.Final, e.dir); v == GitDir {
		super = d.GitDir
	}
	return e.c.submoduleURLRisk(u, super, e.dir)
}

// settingsChange decides the change k at rel, at or below the Settings
// name n that begins at rel's element at.
func (c *Checker) settingsChange(rel string, k Change, n Name, at int) Verdict {
	if k == Remove {
		// Removing runs nothing; what it uncovers (an ancestor's file,
		// the user's own) is either checked too or the user's.
		return Verdict{}
	}
	if at+strings.Count(n.Pattern, "/")+1 != strings.Count(rel, "/")+1 {
		return Verdict{Refuse, rel + " is inside " + n.Pattern + ", which " + n.Tool + " reads as a file: " + n.Why()}
	}
	if k != File {
		return Verdict{Refuse, rel + " must stay a plain file: " + n.Why()}
	}
	b, err := c.cfg.Final.ReadFile(c.abs(rel), maxSettings+1)
	if err != nil {
		return Verdict{Refuse, "cannot read " + rel + " (" + reason(err) + ")"}
	}
	var before []byte
	if st, err := c.cfg.Before.Lstat(c.abs(rel)); err == nil && st.IsRegular() {
		before, _ = c.cfg.Before.ReadFile(c.abs(rel), maxSettings+1)
	}
	if why, bad := c.settingsAdded(rel, n, before, b); bad {
		return Verdict{Refuse, why}
	}
	return Verdict{}
}

// settingsAdded says why content now, at the Settings name n at rel, is
// refused against before (nil: the file was not there): it cannot be
// read, or it has a program-naming setting before did not have with that
// value.
func (c *Checker) settingsAdded(rel string, n Name, before, now []byte) (string, bool) {
	if len(now) > maxSettings {
		return rel + " is too large to check: " + n.Why(), true
	}
	env := settingsEnv{c: c, dir: filepath.Dir(c.abs(rel))}
	got, err := n.Settings(now, env)
	if err != nil {
		return rel + " cannot be read as " + n.Tool + " reads it (" + reason(err) + "): " + n.Why(), true
	}
	had := map[string]bool{}
	if before != nil && len(before) <= maxSettings {
		// A file the tool could not read ran nothing: every setting of
		// the new one counts as added.
		if old, err := n.Settings(before, env); err == nil {
			for _, s := range old {
				had[s.Key+"\x00"+s.Value] = true
			}
		}
	}
	for _, s := range got {
		if !had[s.Key+"\x00"+s.Value] {
			return rel + " gains " + s.Key + ": " + s.Why + " (" + n.Tool + ", " + n.When + ")", true
		}
	}
	return "", false
}

// runsHooks says whether the repository whose work tree holds the name
// at element at of rel runs hooks, before or after the run: a hook
// installed in its hooks directory, or a core.hooksPath or hook.*
// setting in its config or the caller's own. A hook manager's file
// outside any repository runs nothing.
func (c *Checker) runsHooks(rel string, at int) (string, bool) {
	c.loadRoles()
	for _, e := range c.globalEntries {
		if why, ok := hookSetting(e); ok {
			return "your own git config " + why, true
		}
	}
	parts := strings.Split(rel, "/")
	dir := c.abs(strings.Join(parts[:at], "/"))
	// The repository that holds it as the run leaves the tree (the one
	// whose hooks will read it), else as it was.
	gd := ""
	for _, view := range []FS{c.cfg.Final, c.cfg.Before} {
		for d := dir; gd == ""; d = filepath.Dir(d) {
			if found, v := Discover(view, d); v != NotGitDir {
				if v == Fatal || found.GitDir == "" {
					return "git stops on a broken repository at " + d + ", which sandboxd cannot check for hooks", true
				}
				gd = found.GitDir
			}
			if d == "/" {
				break
			}
		}
		if gd != "" {
			break
		}
	}
	if gd == "" {
		return "", false
	}
	for _, view := range []FS{c.cfg.Before, c.cfg.Final} {
		common, v := CommonDir(view, gd)
		if v != GitDir {
			common = gd
		}
		for _, hooks := range []string{gd + "/hooks", common + "/hooks"} {
			st, err := view.Lstat(hooks)
			if err != nil {
				continue
			}
			l, ok := view.(lister)
			if !st.IsDir() || !ok {
				return "its repository's hooks directory cannot be listed", true
			}
			names, err := l.ReadDir(hooks)
			if err != nil {
				return "its repository's hooks directory cannot be listed", true
			}
			sort.Strings(names)
			for _, h := range names {
				if !strings.HasSuffix(h, ".sample") {
					return "its repository runs the hook " + h, true
				}
			}
		}
		for _, f := range []string{common + "/config", gd + "/config", gd + "/config.worktree"} {
			b, err := readFollow(view, f, gitconfig.MaxSize)
			if err != nil {
				continue // no config: nothing set
			}
			if _, err := gitconfig.Parse(b); err != nil {
				return "its repository's config cannot be parsed", true
			}
			for _, e := range c.configEntries(view, f, 0, nil) {
				if why, ok := hookSetting(e); ok {
					return "its repository's config " + why, true
				}
			}
		}
	}
	return "", false
}

// hookSetting reports a git config entry that makes git run hooks from
// somewhere other than an empty hooks directory.
func hookSetting(e gitconfig.Entry) (string, bool) {
	switch {
	case e.Section == "core" && e.Key == "hookspath" && e.Value != "":
		return "sets core.hooksPath", true
	case e.Section == "hook":
		return "configures hooks (hook.*)", true
	}
	return "", false
}

// gitmodulesSettings is the SettingsRule of .gitmodules: every entry must
// be one git acts on safely (SubmoduleEntryRisk: a plain path, a URL
// without a transport helper or option, a known update mode, ...), and a
// URL must not reach a repository the command could have planted (whose
// hooks run when git submodule update clones it).
func gitmodulesSettings(b []byte, env SettingsEnv) ([]Setting, error) {
	ents, err := gitconfig.Parse(b)
	if err != nil {
		return nil, err
	}
	var out []Setting
	for _, e := range ents {
		why := SubmoduleEntryRisk(e)
		if why == "" && e.Key == "url" {
			why = env.SubmoduleURL(e.Value)
		}
		if why != "" {
			out = append(out, Setting{Key: entryName(e), Value: e.Value, Why: why})
		}
	}
	return out, nil
}
