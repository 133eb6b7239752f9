package persist

import (
	"bytes"
	"path/filepath"
	"strings"
)

// What git takes for a repository, following git's own setup.c (v2.39,
// unchanged in substance since): the rules below decide which
// directories' config and hooks a later `git` on the host would use, so
// they must be git's, not a likeness of them. Everything follows symlinks
// where git does, and a directory can be a git directory whatever its
// name.

// Git is what git would make of a directory: its verdict on it.
type Git int

const (
	// NotGitDir: git would not use it as a repository.
	NotGitDir Git = iota
	// GitDir: git would use it.
	GitDir
	// Fatal: git would stop with an error looking at it (an unreadable
	// commondir, a bad gitfile). Callers treat it as a git directory:
	// another git version may read it.
	Fatal
)

// repoMarkers are the entries that make a directory a git directory
// (IsGitDir: a HEAD, objects and refs, or a commondir naming where the
// objects and refs are): the scan marks them wherever they are, and a
// change to one can make a directory a repository.
func repoMarkers() []string { return []string{"HEAD", "objects", "refs", "commondir"} }

// headLimit is how much of HEAD git reads (validate_headref's buffer).
const headLimit = 255

// gitfileLimit is the largest gitfile git reads (read_gitfile_gently).
const gitfileLimit = 1 << 20

// IsGitDir is setup.c's is_git_directory: HEAD is a valid ref or object
// id, and the common directory (commondir, else dir itself) has objects
// and refs that the caller may search (access(X_OK): a directory, or a
// file with an execute bit, following symlinks).
func IsGitDir(fsys FS, dir string) Git {
	dir, err := Resolve(fsys, dir, true)
	if err != nil {
		return NotGitDir
	}
	if !validHead(fsys, filepath.Join(dir, "HEAD")) {
		return NotGitDir
	}
	common, v := CommonDir(fsys, dir)
	if v == Fatal {
		return Fatal
	}
	for _, sub := range []string{"objects", "refs"} {
		p, st, err := Stat(fsys, filepath.Join(common, sub))
		if err != nil || !fsys.Searchable(p, st) {
			return NotGitDir
		}
	}
	return GitDir
}

// validHead is validate_headref: a symlink whose target starts with
// "refs/" (the target need not exist), or a file that starts with "ref:",
// optional whitespace and "refs/", or with 40 hex digits.
func validHead(fsys FS, head string) bool {
	st, err := fsys.Lstat(head)
	if err != nil {
		return false
	}
	if st.IsSymlink() {
		t, err := fsys.Readlink(head)
		return err == nil && strings.HasPrefix(truncate(t, headLimit), "refs/")
	}
	b, err := readFollow(fsys, head, headLimit)
	if err != nil {
		return false
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i] // git reads it as a C string
	}
	if ref, ok := bytes.CutPrefix(b, []byte("ref:")); ok {
		ref = bytes.TrimLeft(ref, gitSpace)
		if bytes.HasPrefix(ref, []byte("refs/")) {
			return true
		}
	}
	return hexPrefix(b, 40)
}

// gitSpace is git's isspace (sane_ctype GIT_SPACE): not \v or \f.
const gitSpace = " \t\n\r"

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func hexPrefix(b []byte, n int) bool {
	if len(b) < n {
		return false
	}
	for _, c := range b[:n] {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
		default:
			return false
		}
	}
	return true
}

// CommonDir is get_common_dir_noenv: the directory named by dir/commondir
// (relative to dir; trailing newlines and carriage returns trimmed),
// else dir. A commondir that exists (lstat: a dangling symlink counts)
// but cannot be read or is empty makes git die: Fatal.
func CommonDir(fsys FS, dir string) (string, Git) {
	f := filepath.Join(dir, "commondir")
	if _, err := fsys.Lstat(f); err != nil {
		return dir, GitDir
	}
	b, err := readFollow(fsys, f, gitfileLimit)
	if err != nil || len(b) == 0 {
		return "", Fatal
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	b = bytes.TrimRight(b, "\r\n")
	p := string(b)
	if !filepath.IsAbs(p) {
		p = dir + "/" + p
	}
	// strbuf_realpath with die_on_error: only the last element may be
	// missing.
	r, err := Resolve(fsys, p, true)
	if err != nil {
		return "", Fatal
	}
	return r, GitDir
}

// Discovered is where git found a repository from one directory.
type Discovered struct {
	// GitDir is the git directory (resolved); "" when none.
	GitDir string
	// Gitfile is the ".git" file that pointed there, if any.
	Gitfile string
	// Bare is set when the directory itself is the git directory.
	Bare bool
}

// Discover is one step of setup.c's discovery in dir, before git moves
// to the parent: dir/.git when it is a directory (or a symlink to one)
// that IsGitDir, or a gitfile ("gitdir: PATH") naming one; else dir
// itself when it IsGitDir (a bare repository; safe.bareRepository
// defaults to "all"). A .git that exists but is neither makes git die
// when it is a bad gitfile (Fatal) and is skipped when it is a directory
// that is not a repository.
func Discover(fsys FS, dir string) (Discovered, Git) {
	dir, err := Resolve(fsys, dir, true)
	if err != nil {
		return Discovered{}, NotGitDir
	}
	dotgit := filepath.Join(dir, ".git")
	p, st, err := Stat(fsys, dotgit)
	switch {
	case err != nil:
		// READ_GITFILE_ERR_STAT_FAILED: as if there were no .git.
	case !st.IsRegular():
		switch v := IsGitDir(fsys, dotgit); v {
		case GitDir, Fatal:
			return Discovered{GitDir: p}, v
		}
	default:
		target, v := ReadGitfile(fsys, dotgit)
		if v != GitDir {
			return Discovered{Gitfile: dotgit}, Fatal
		}
		return Discovered{GitDir: target, Gitfile: dotgit}, GitDir
	}
	switch v := IsGitDir(fsys, dir); v {
	case GitDir, Fatal:
		return Discovered{GitDir: dir, Bare: true}, v
	}
	return Discovered{}, NotGitDir
}

// ReadGitfile is read_gitfile_gently for the gitfile at path (followed if
// a symlink): it must start with "gitdir: ", the rest (trailing \n and \r
// trimmed, relative to the gitfile's directory) must be a git directory.
// Anything else is Fatal: git stops with "invalid gitfile format" or "not
// a git repository".
func ReadGitfile(fsys FS, path string) (string, Git) {
	p, st, err := Stat(fsys, path)
	if err != nil || !st.IsRegular() || st.Size > gitfileLimit {
		return "", Fatal
	}
	b, err := fsys.ReadFile(p, gitfileLimit)
	if err != nil {
		return "", Fatal
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	rest, ok := bytes.CutPrefix(b, []byte("gitdir: "))
	if !ok {
		return "", Fatal
	}
	target := string(bytes.TrimRight(rest, "\r\n"))
	if target == "" {
		return "", Fatal
	}
	if !filepath.IsAbs(target) {
		target = filepath.Dir(path) + "/" + target // not Join: no lexical ".."
	}
	if IsGitDir(fsys, target) != GitDir {
		return "", Fatal
	}
	r, err := Resolve(fsys, target, true)
	if err != nil {
		return "", Fatal
	}
	return r, GitDir
}
