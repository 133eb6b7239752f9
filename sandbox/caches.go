package sandbox

import (
	"path/filepath"
	"regexp"
	"strings"

	"github.com/sandboxd/sandboxd/landlock"
)

// The rules below decide, on paths alone, whether a host tool cache may
// be a private cache's lower layer. A lower is used only where the
// command could read it anyway (landlock.Carveout, the rule the ruleset
// enforces), and they fail closed: a path they cannot judge is not
// readable.

// Readable reports whether the carve-out of read except deny grants
// reading p, an absolute, clean path without symlinks, and listing it
// (a default profile's carve-out: carved directories may be listed).
func Readable(p string, read, deny []string) bool {
	return landlock.NewCarveout(landlock.ResolveRoots(read), deny, true).Grants(p, landlock.ReadAccess)
}

// CoveredBy returns the first entry naming p or one of its ancestors;
// an entry's last element may be a filepath.Match pattern.
func CoveredBy(p string, entries []string) (string, bool) {
	for _, d := range entries {
		d = filepath.Clean(d)
		for a := p; ; a = filepath.Dir(a) {
			if names(d, a) {
				return d, true
			}
			if a == "/" || a == "." {
				break
			}
		}
	}
	return "", false
}

// names reports whether the entry d (its last element may be a glob)
// names the path a.
func names(d, a string) bool {
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

// MasksBelow lists the entries strictly below p, relative to it (the
// last element may be a glob, as in the entry; a glob character above it
// is a literal name, as for the carve-out): what a view of p must hide.
func MasksBelow(p string, entries []string) []string {
	var out []string
	for _, d := range entries {
		d = filepath.Clean(d)
		if !strings.HasPrefix(d, strings.TrimSuffix(p, "/")+"/") {
			continue
		}
		out = append(out, strings.TrimPrefix(d, strings.TrimSuffix(p, "/")+"/"))
	}
	return out
}

func hasGlob(s string) bool { return strings.ContainsAny(s, `*?[`) }

// pathWithin reports whether p is dir or below it (both clean and absolute).
func pathWithin(dir, p string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// Overlaps reports whether a and b are the same path or one holds the
// other.
func Overlaps(a, b string) bool { return pathWithin(a, b) || pathWithin(b, a) }

// cacheName is what a cache layer's name may be: it names a directory.
var cacheName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
