package sandbox

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/landlock"
	"github.com/sandboxd/sandboxd/pathtree"
)

// Whether a host tool cache may be a private cache's lower layer is
// decided here, once, at run time and as the caller: a symlink-free
// directory the command could read anyway (the run's carve-out), that is
// no secret and lies inside none, that holds neither the home nor all of
// the XDG cache, apart from every writable root, sandboxd's own state,
// configuration and runtime directories and what the helper hides or
// replaces, and, for a root caller, inside the id-mapped home. The
// secrets below it are hidden inside, however its path is spelled.
// Anything uncertain means no lower layer.

// lowerCheck is everything that decides whether a host cache may be a
// lower layer.
type lowerCheck struct {
	// reads is the run's carve-out: a lower layer shows only what the
	// command could read anyway, and hides the deny entries below it.
	reads landlock.Carveout
	// secrets: a host cache that is one, or lies inside one, is never
	// shown.
	secrets []string
	// whole are directories a host cache must not be or hold (the home,
	// the XDG cache directory).
	whole []string
	// apart are the roots a host cache must neither be in nor hold.
	apart []string
	// hidden are what the helper hides or replaces: a lower layer there
	// would show what the command cannot see.
	hidden []string
	// root: the caller is host root, whose command reads the host only
	// through the id-mapped home, idHome ("" when there is none).
	root   bool
	idHome string
}

// host checks the host cache spelled p, as found in the caller's
// environment and files, and returns it resolved, with the deny entries
// below it (however p is spelled) to hide inside.
func (c lowerCheck) host(p string) (lower string, masks []string, why string) {
	real, err := filepath.EvalSymlinks(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil, "no host cache at " + p
	case err != nil:
		return "", nil, "cannot resolve " + p
	}
	if st, err := os.Stat(real); err != nil || !st.IsDir() {
		return "", nil, p + " is not a directory"
	}
	forms := []string{p}
	if real != p {
		forms = append(forms, real)
	}
	if why := c.refuse(p, forms); why != "" {
		return "", nil, why
	}
	if !c.reads.Grants(real, landlock.ReadAccess) {
		return "", nil, "the host cache " + p + " is not readable inside"
	}
	for _, f := range forms {
		for _, m := range c.reads.DeniedBelow(f) {
			if !slices.Contains(masks, m) {
				masks = append(masks, m)
			}
		}
	}
	return real, masks, ""
}

// refuse says why a host cache spelled p (forms: p and its resolved
// path) may not be a lower layer, or "".
func (c lowerCheck) refuse(p string, forms []string) string {
	for _, f := range forms {
		if d, ok := coveredBy(f, c.secrets); ok {
			return "the host cache " + p + " is a secret or inside one (" + d + ")"
		}
		for _, h := range withReal(c.whole...) {
			if pathtree.Within(f, h) {
				return "the host cache " + p + " holds " + h
			}
		}
		for _, a := range c.apart {
			if a != "" && overlaps(a, f) {
				return "the host cache " + p + " overlaps " + a
			}
		}
	}
	return ""
}

// inside checks the host cache lower (resolved, from host) against what
// the command's mount namespace shows, in a run that has one: an overlay
// on nothing is not worth its mount, a hidden directory stays hidden,
// and a root caller's command sees the host only in its id-mapped home.
func (c lowerCheck) inside(lower string, masks []string) (string, []string, string) {
	if emptyDir(lower) {
		return "", nil, "the host cache " + lower + " is empty"
	}
	for _, h := range c.hidden {
		if overlaps(h, lower) {
			return "", nil, "the host cache " + lower + " is not visible inside (" + h + ")"
		}
	}
	if c.root && !pathtree.Within(c.idHome, lower) {
		return "", nil, "the host cache " + lower + " is outside the id-mapped home"
	}
	for _, m := range masks {
		if filepath.IsAbs(m) || filepath.Clean(m) != m || m == "." || m == ".." || strings.HasPrefix(m, "../") {
			return "", nil, "a secret below the host cache cannot be hidden (" + m + ")"
		}
	}
	return lower, masks, ""
}

// withReal lists each non-empty path and, when it differs, its
// resolved form.
func withReal(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		out = append(out, p)
		if r, err := filepath.EvalSymlinks(p); err == nil && r != p {
			out = append(out, r)
		}
	}
	return out
}

// emptyDir reports whether the directory p has no entries (or cannot be
// read).
func emptyDir(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return true
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}

// coveredBy returns the first entry naming p or one of its ancestors;
// an entry's last element may be a filepath.Match pattern.
func coveredBy(p string, entries []string) (string, bool) {
	for _, d := range entries {
		d = filepath.Clean(d)
		for a := p; ; a = filepath.Dir(a) {
			if landlock.Names(d, a) {
				return d, true
			}
			if a == "/" || a == "." {
				break
			}
		}
	}
	return "", false
}

// overlaps reports whether a and b are the same path or one holds the
// other.
func overlaps(a, b string) bool { return pathtree.Within(a, b) || pathtree.Within(b, a) }

// cacheName is what a cache layer's name may be: it names a directory.
var cacheName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
