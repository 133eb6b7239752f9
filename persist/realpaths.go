package persist

import (
	"io/fs"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Realpaths is filepath.EvalSymlinks on the host's tree for one look at
// it: each path it is asked about, and each directory on the way, is
// looked at (lstat) once for its life, where EvalSymlinks looks at every
// element of every path again. A plan resolves a few hundred paths that
// share a few directories (the home, ~/.config, ~/.local/share): it
// reads each of them once instead of once per path below it.
//
// It is the tree as it was when first asked: make one per look (one
// plan's policy, one guard's construction) and drop it; never keep one
// across runs. Not safe for concurrent use.
type Realpaths struct {
	memo map[string]realpath
}

// realpath is one answer of Realpaths.
type realpath struct {
	path string
	err  error
}

// NewRealpaths returns an empty Realpaths.
func NewRealpaths() *Realpaths { return &Realpaths{memo: map[string]realpath{}} }

// Eval returns what filepath.EvalSymlinks(p) returns, nil error or not
// (the error itself may differ in wording), with one exception: a path
// whose links number more than EvalSymlinks' bound (255) all told, but
// no more at any one element, is resolved where EvalSymlinks gives up
// (each element's links are counted apart). Never the other way: a
// path EvalSymlinks resolves, Eval resolves alike. A p that is not
// absolute and clean is EvalSymlinks' alone ("a/f/.." and "f/" are
// looked at before they are cleaned).
func (r *Realpaths) Eval(p string) (string, error) {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return filepath.EvalSymlinks(p)
	}
	if got, ok := r.memo[p]; ok {
		return got.path, got.err
	}
	got := r.eval(p)
	r.memo[p] = got
	return got.path, got.err
}

// eval resolves p (absolute, clean) from its parent's answer: the
// symlinks on the way to a path are its parent's and its own last
// element's. Only a last element that is a link is resolved whole by
// EvalSymlinks (rare: its target may hold "..", or links of its own).
func (r *Realpaths) eval(p string) realpath {
	if p == "/" {
		return realpath{path: "/"}
	}
	dir, err := r.Eval(filepath.Dir(p))
	if err != nil {
		return realpath{err: err}
	}
	q := filepath.Join(dir, filepath.Base(p))
	var st unix.Stat_t
	if err := unix.Lstat(q, &st); err != nil {
		return realpath{err: &fs.PathError{Op: "lstat", Path: q, Err: err}}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return realpath{path: q}
	}
	t, err := filepath.EvalSymlinks(q)
	return realpath{path: t, err: err}
}
