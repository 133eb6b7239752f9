package landlock

import (
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/pathtree"
)

// Carveout is what the read rules let a command read: each read root,
// except the denied paths strictly below it. It is the one home of that
// rule. Ruleset.Carve enforces it; Grants answers it for one path, for
// those who must know without asking the kernel (the judge of observed
// reads, and the check that a host cache may be a lower layer), so the
// answer and the enforcement cannot disagree. A Carveout is immutable;
// the zero value grants nothing.
//
// The rule: a root grants the whole hierarchy below it, unless a deny
// entry lies strictly below it; then it is carved: each directory on the
// way to a denied path gets only the carved access (listing, or nothing),
// every other entry of it a rule of its own, and the denied entries
// none. A deny entry at or above a root does not remove the root (the
// strict profile denies $HOME and grants a few paths inside it). Deny
// entries are absolute and clean; the last element may be a
// filepath.Match pattern. Entries are matched in the spelling of the
// root they are below; a root is where its symlinks resolve.
type Carveout struct {
	roots []Root
	deny  *denySet
	// list: a carved directory may be listed (AccessReadDir), though
	// its denied entries' contents may not be read.
	list bool
}

// Root is one read root.
type Root struct {
	// Path is the root as the policy spells it, cleaned: the deny
	// entries below it are matched in this spelling.
	Path string
	// Real is Path with its symlinks resolved, where the rule attaches;
	// "" when it does not resolve, and then the root grants nothing.
	Real string
}

// ResolveRoots resolves each read root's symlinks (as whoever calls it:
// a root the caller cannot resolve grants nothing).
func ResolveRoots(paths []string) []Root {
	out := make([]Root, 0, len(paths))
	for _, p := range paths {
		r := Root{Path: filepath.Clean(p)}
		if real, err := filepath.EvalSymlinks(r.Path); err == nil && filepath.IsAbs(real) {
			r.Real = real
		}
		out = append(out, r)
	}
	return out
}

// NewCarveout is the carve-out of roots except deny; listCarved lets
// the directories above a denied path be listed.
func NewCarveout(roots []Root, deny []string, listCarved bool) Carveout {
	return Carveout{roots: append([]Root(nil), roots...), deny: newDenySet(deny), list: listCarved}
}

// carvedAccess is what a carved directory itself is granted.
func (c Carveout) carvedAccess() Access {
	if c.list {
		return AccessReadDir
	}
	return 0
}

// Grants reports whether the carve-out grants every right of access (a
// subset of ReadAccess) on p, an absolute, clean path without symlinks.
// A carved directory's access holds for its whole hierarchy (Landlock's
// rules are inherited): where carved directories may be listed, so may
// every directory below a carved root, a denied one too. On a carved
// directory itself read_file and execute are no question (they are
// rights on files).
func (c Carveout) Grants(p string, access Access) bool {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || access&^ReadAccess != 0 {
		return false
	}
	for _, root := range c.roots {
		rel, ok := pathtree.Rel(root.Real, p)
		if !ok {
			continue // not below this root, or the root did not resolve
		}
		v := c.walk(root, rel)
		rest := access
		if v != granted {
			// Below a carved root: what every carved directory has.
			rest &^= c.carvedAccess()
		}
		switch {
		case v == granted, rest == 0:
			return true
		case v == carved && rest&AccessReadDir == 0:
			return true
		}
	}
	return false
}

// walk follows rel down from root as Carve does, to the verdict on the
// path it names.
func (c Carveout) walk(root Root, rel string) verdict {
	if !c.deny.below[root.Path] {
		return granted
	}
	v, dir := carved, root.Path
	for _, name := range strings.Split(rel, "/") {
		if name == "" || v != carved {
			break
		}
		// Every element is a directory but maybe the last; a last one
		// with a denial below it could only be one too.
		v, dir = c.deny.step(dir, name, true), filepath.Join(dir, name)
	}
	return v
}

// DeniedBelow lists the deny entries strictly below p, relative to it
// (the last element may be a glob, as in the entry; a glob character
// above it is a literal name, as for the carve-out): what a view of p
// must hide for it to show no more than the carve-out does.
func (c Carveout) DeniedBelow(p string) []string {
	if c.deny == nil {
		return nil // the zero Carveout: nothing is read, nothing denied
	}
	var out []string
	for _, d := range c.deny.list {
		if rel, ok := pathtree.Below(p, d); ok {
			out = append(out, rel)
		}
	}
	return out
}

// Names reports whether the deny entry d (clean; its last element may
// be a glob) names the path a.
func Names(d, a string) bool {
	if d == a {
		return true
	}
	dir, base := filepath.Split(d)
	if !hasGlob(base) || filepath.Clean(dir) != filepath.Dir(a) {
		return false
	}
	ok, err := filepath.Match(base, filepath.Base(a))
	return ok && err == nil
}

func hasGlob(s string) bool { return strings.ContainsAny(s, `*?[`) }

// verdict is the carve-out's answer for one path.
type verdict int

const (
	skipped verdict = iota // denied: no rule, nothing below it either
	carved                 // a directory with a denial below it: carvedAccess, and its entries each their own
	granted                // a rule for all of it
)

// denySet indexes denied paths for the carve-out.
type denySet struct {
	list  []string            // the entries, cleaned, absolute, not "/"
	exact map[string]bool     // denied paths
	globs map[string][]string // parent directory -> patterns for its entries
	below map[string]bool     // directories with a denial strictly below them
}

func newDenySet(deny []string) *denySet {
	d := &denySet{exact: map[string]bool{}, globs: map[string][]string{}, below: map[string]bool{}}
	for _, p := range deny {
		p = filepath.Clean(p)
		if !filepath.IsAbs(p) || p == "/" {
			continue
		}
		d.list = append(d.list, p)
		parent, base := filepath.Dir(p), filepath.Base(p)
		if hasGlob(base) {
			d.globs[parent] = append(d.globs[parent], base)
		} else {
			d.exact[p] = true
		}
		for a := parent; ; a = filepath.Dir(a) {
			d.below[a] = true
			if a == "/" {
				break
			}
		}
	}
	return d
}

// step is the carve-out's verdict on the entry name of the carved
// directory dir (spelled as its root is).
func (d *denySet) step(dir, name string, isDir bool) verdict {
	p := filepath.Join(dir, name)
	switch {
	case d.denied(dir, p, name):
		return skipped
	case isDir && d.below[p]:
		return carved
	}
	return granted
}

func (d *denySet) denied(dir, path, name string) bool {
	if d.exact[path] {
		return true
	}
	for _, pat := range d.globs[dir] {
		if ok, _ := filepath.Match(pat, name); ok {
			return true
		}
	}
	return false
}
