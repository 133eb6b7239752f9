package persist

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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
// through more links than EvalSymlinks follows all told (255) may be
// resolved where EvalSymlinks gives up (each element's links are
// counted apart, and a chain longer than maxChain is handed to
// EvalSymlinks, which counts afresh). Never the other way: a
// path EvalSymlinks resolves, Eval resolves alike. A p that is not
// absolute and clean is EvalSymlinks' alone ("a/f/.." and "f/" are
// looked at before they are cleaned).
func (r *Realpaths) Eval(p string) (string, error) {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return filepath.EvalSymlinks(p)
	}
	got := r.at(p, 0)
	return got.path, got.err
}

// maxChain bounds the links Eval follows one from another itself (links
// of links, and links on the way to a link's target) before it hands the
// rest of the chain to EvalSymlinks: Linux's own bound (MAXSYMLINKS).
const maxChain = 40

// at is Eval for an absolute, clean p reached through links links
// followed one from another: the memo's answer, or eval's, kept.
func (r *Realpaths) at(p string, links int) realpath {
	if got, ok := r.memo[p]; ok {
		return got
	}
	got := r.eval(p, links)
	r.memo[p] = got
	return got
}

// eval resolves p (absolute, clean) from its parent's answer: the
// symlinks on the way to a path are its parent's and its own last
// element's.
func (r *Realpaths) eval(p string, links int) realpath {
	if p == "/" {
		return realpath{path: "/"}
	}
	dir := r.at(filepath.Dir(p), links)
	if dir.err != nil {
		return realpath{err: dir.err}
	}
	q := filepath.Join(dir.path, filepath.Base(p))
	var st unix.Stat_t
	if err := unix.Lstat(q, &st); err != nil {
		return realpath{err: &fs.PathError{Op: "lstat", Path: q, Err: err}}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return realpath{path: q}
	}
	return r.link(q, links)
}

// link resolves q, a link in a resolved directory. EvalSymlinks goes on
// from q's directory (from / for an absolute target) through the
// target's elements, a ".." taking one element off what it has resolved:
// for a clean target whose ".." elements stay below / (Clean leaves
// them only at the start), that is the answer of the path they lead to,
// asked of the memo (the directories PATH's links point into,
// /etc/alternatives and ../lib/..., are looked at once). Any other
// target, and a chain longer than maxChain, is resolved by EvalSymlinks
// whole.
func (r *Realpaths) link(q string, links int) realpath {
	t, err := os.Readlink(q)
	var to string
	if err == nil && links < maxChain {
		to = linkedPath(filepath.Dir(q), t)
	}
	if to == "" {
		p, err := filepath.EvalSymlinks(q)
		return realpath{path: p, err: err}
	}
	return r.at(to, links+1)
}

// linkedPath is the path a link in dir (resolved, clean) with target t
// names, "" unless t is clean and its ".." elements stay below /.
func linkedPath(dir, t string) string {
	if t == "" || t == "." || filepath.Clean(t) != t {
		return ""
	}
	if filepath.IsAbs(t) {
		return t
	}
	for t == ".." || strings.HasPrefix(t, "../") {
		if dir == "/" || filepath.Dir(dir) == "/" {
			return "" // above /: EvalSymlinks keeps the ".."
		}
		dir, t = filepath.Dir(dir), strings.TrimPrefix(strings.TrimPrefix(t, ".."), "/")
	}
	return filepath.Join(dir, t)
}
