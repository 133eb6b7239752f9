package persist

import (
	"errors"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/gitconfig"
)

// A repository the command made: kept only when it carries nothing that
// runs code. The one rule for it, whichever way the run wrote the
// workspace: a layer's commit meets it as a directory change (check: a
// git directory that was not there before) and as a change that makes a
// directory a repository (gitRule's markers); a run without a layer as
// a repository its sweep finds new or replaced (judgeRepo).

// newRepo says why the git directory rel (workspace-relative), which the
// run made, or made a repository, is not kept: "" when it is. It is kept
// when it carries nothing that runs code (only sample hooks, config keys
// from a short list, and no redirects, nested repositories or operation
// in progress, but for the submodules and worktrees git made in it that
// the rules commit whole: git clone --recurse-submodules), or when it is
// itself such a worktree or submodule (Linked), which the rules judge
// with all of its repository. Read in the final tree; memoized.
func (c *Checker) newRepo(rel string) string {
	if c.Linked(rel) {
		return ""
	}
	if why, ok := c.newRepos[rel]; ok {
		return why
	}
	// The families of the repository (its submodules and worktrees) are
	// known before its modules/ and worktrees/ are judged.
	c.familyOf(c.abs(rel))
	why := c.newRepoWhy(c.abs(rel))
	c.newRepos[rel] = why
	return why
}

// newRepoWhy is newRepo's reason for the git directory gd (absolute),
// "" when there is none.
func (c *Checker) newRepoWhy(gd string) string {
	fsys := c.cfg.Final
	if st, err := fsys.Lstat(gd); err != nil || !st.IsDir() {
		return "that is not a plain directory"
	}
	if why := c.newRepoHooks(gd); why != "" {
		return why
	}
	if st, err := fsys.Lstat(gd + "/config"); err != nil || !st.IsRegular() {
		return "without a plain config file"
	}
	for _, f := range gitNested() {
		if why := c.linkedOnly(gd + "/" + f); why != "" {
			return "with " + f + "/" + why
		}
	}
	for _, f := range gitWatched() {
		if f == "remotes" || f == "branches" {
			continue // checked below
		}
		if present(fsys, gd+"/"+f) {
			return "with " + f
		}
	}
	for _, f := range []string{"remotes", "branches"} {
		if p, st, err := Stat(fsys, gd+"/"+f); err == nil && st.IsDir() {
			if names, err := listNames(fsys, p); err == nil && len(names) > 0 {
				return "with " + f + "/"
			}
		}
	}
	b, err := fsys.ReadFile(gd+"/config", gitconfig.MaxSize+1)
	if err != nil {
		return "with an unreadable config"
	}
	if !safeGitConfig(string(b)) {
		return "whose config has entries beyond what git init and clone write"
	}
	return ""
}

// newRepoHooks says why the hooks of the new git directory gd are not
// kept: anything but a plain sample, or hooks that cannot be listed. ""
// when there are none, or only samples.
func (c *Checker) newRepoHooks(gd string) string {
	fsys := c.cfg.Final
	st, err := fsys.Lstat(gd + "/hooks")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ""
	case err != nil || !st.IsDir():
		return "with unreadable hooks"
	}
	names, err := listNames(fsys, gd+"/hooks")
	if err != nil {
		return "with unreadable hooks"
	}
	sort.Strings(names)
	for _, n := range names {
		if st, err := fsys.Lstat(gd + "/hooks/" + n); err != nil || !st.IsRegular() || !strings.HasSuffix(n, ".sample") {
			return "with the hook " + n
		}
	}
	return ""
}

// present reports whether something is at p in fsys (symlinks on the way
// followed, the last one not).
func present(fsys FS, p string) bool {
	r, err := Resolve(fsys, p, false)
	if err != nil {
		return false
	}
	_, err = fsys.Lstat(r)
	return err == nil
}

// linkedOnly says why dir (a git directory's modules/ or worktrees/)
// holds more than the git directories of submodules and worktrees the
// rules commit whole (Linked) and the directories on the way to them: ""
// when it does not (or is not a directory). Anything it cannot read
// counts.
func (c *Checker) linkedOnly(dir string) string {
	fsys := c.cfg.Final
	st, err := fsys.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return ""
	case err != nil:
		return " (unreadable)"
	case !st.IsDir():
		return "" // holds nothing; gitRule judges the entry itself
	}
	var visit func(d string) string
	visit = func(d string) string {
		names, err := listNames(fsys, d)
		if err != nil {
			return " (unreadable)"
		}
		sort.Strings(names)
		for _, n := range names {
			p := d + "/" + n
			st, err := fsys.Lstat(p)
			switch {
			case err != nil:
				return " (unreadable)"
			case !st.IsDir():
				return " holding " + n
			case present(fsys, p+"/HEAD"):
				if rel, _ := c.within(p); !c.Linked(rel) {
					return " holding " + n + ", which is no submodule or worktree git made whole"
				}
				continue // judged with its unit
			}
			if why := visit(p); why != "" {
				return why
			}
		}
		return ""
	}
	return visit(dir)
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
			} else if e.Key != "url" && e.Key != "update" || SubmoduleEntryRisk(e) != "" {
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
