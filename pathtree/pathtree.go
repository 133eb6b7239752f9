package pathtree

import "strings"

// Within reports whether p is dir or below it.
func Within(dir, p string) bool {
	_, ok := Rel(dir, p)
	return ok
}

// WithinAny reports whether p is one of dirs or below one.
func WithinAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if Within(d, p) {
			return true
		}
	}
	return false
}

// Below returns p relative to dir when p lies strictly below dir.
func Below(dir, p string) (string, bool) {
	r, ok := Rel(dir, p)
	return r, ok && r != ""
}

// Rel returns p relative to dir ("" for dir itself) when p is dir or
// below it. A trailing slash on dir is allowed ("/" is the root).
func Rel(dir, p string) (string, bool) {
	if dir == "" || p == "" {
		return "", false
	}
	if p == dir {
		return "", true
	}
	if r, ok := strings.CutPrefix(p, strings.TrimSuffix(dir, "/")+"/"); ok {
		return r, true
	}
	return "", false
}
