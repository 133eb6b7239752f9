package pathtree

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestWithinAndBelow(t *testing.T) {
	for _, tc := range []struct {
		dir, p string
		within bool
		below  string // "" when p is not strictly below dir
	}{
		{"/a/b", "/a/b", true, ""},
		{"/a/b", "/a/b/c", true, "c"},
		{"/a/b", "/a/b/c/d", true, "c/d"},
		{"/a/b", "/a/bc", false, ""},
		{"/a/b", "/a", false, ""},
		{"/a/b", "/a/b/", true, ""}, // not clean, but still below
		{"/a/b/", "/a/b/c", true, "c"},
		{"/a/b/", "/a/b", false, ""},
		{"/", "/", true, ""},
		{"/", "/etc", true, "etc"},
		{"/", "/etc/passwd", true, "etc/passwd"},
		{"/", "etc", false, ""},
		{"a", "a/b", true, "b"},
		{"a", "ab", false, ""},
		{"a/b", "a/b", true, ""},
		{"", "/x", false, ""},
		{"", "", false, ""},
		{"/x", "", false, ""},
	} {
		if got := Within(tc.dir, tc.p); got != tc.within {
			t.Errorf("Within(%q, %q) = %v, want %v", tc.dir, tc.p, got, tc.within)
		}
		r, ok := Below(tc.dir, tc.p)
		if r != tc.below || ok != (tc.below != "") {
			t.Errorf("Below(%q, %q) = %q, %v, want %q", tc.dir, tc.p, r, ok, tc.below)
		}
	}
}

func TestWithinAny(t *testing.T) {
	dirs := []string{"/home/u/.ssh", "/etc"}
	for p, want := range map[string]bool{
		"/home/u/.ssh": true, "/home/u/.ssh/id_rsa": true, "/home/u/.sshx": false,
		"/etc/passwd": true, "/etcetera": false, "/home/u": false,
	} {
		if got := WithinAny(p, dirs); got != want {
			t.Errorf("WithinAny(%q) = %v, want %v", p, got, want)
		}
	}
	if WithinAny("/x", nil) {
		t.Error("WithinAny over no dirs is true")
	}
}

// FuzzWithin holds the text comparison to filepath.Rel's answer for
// clean absolute paths, the form every caller passes.
func FuzzWithin(f *testing.F) {
	for _, s := range [][2]string{{"/a", "/a/b"}, {"/", "/x"}, {"/a/b", "/a/bc"}, {"/a", "/"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, dir, p string) {
		if !filepath.IsAbs(dir) || !filepath.IsAbs(p) || filepath.Clean(dir) != dir || filepath.Clean(p) != p {
			return
		}
		rel, err := filepath.Rel(dir, p)
		want := err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
		if got := Within(dir, p); got != want {
			t.Fatalf("Within(%q, %q) = %v, filepath.Rel says %q", dir, p, got, rel)
		}
		r, below := Below(dir, p)
		if below != (want && rel != ".") || below && r != rel {
			t.Fatalf("Below(%q, %q) = %q, %v, filepath.Rel says %q", dir, p, r, below, rel)
		}
	})
}
