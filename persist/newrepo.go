package persist

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/gitconfig"
)

// A repository the command made: kept only when it carries nothing that
// runs code.

// safeNewRepo accepts a repository the command created (git init, git
// clone) when it carries nothing that runs code: only sample hooks,
// config keys from a short list, and no redirects, nested repositories
// or operation in progress, but for the submodules and worktrees git made
// in it that the rules commit whole (git clone --recurse-submodules). It
// says why not.
func safeNewRepo(c *Checker, ws, gd string) (string, bool) {
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
// worktrees the rules commit whole (Checker.Linked), and the
// directories on the way to them.
func linkedOnly(c *Checker, ws, dir string) (string, bool) {
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
