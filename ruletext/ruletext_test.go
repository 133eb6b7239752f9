package ruletext

import (
	"path"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFields(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"fs  write_file\t/etc/hosts\n", []string{"fs", "write_file", "/etc/hosts"}},
		{`fs read /a\ b`, []string{"fs", "read", `/a\ b`}},
		{"fs read /a\\\tb\\\nc", []string{"fs", "read", "/a\\\tb\\\nc"}},
		{"fs read /a\\\u00a0b c", []string{"fs", "read", "/a\\\u00a0b", "c"}},
		{"fs read /a\u00a0b", []string{"fs", "read", "/a", "b"}}, // as strings.Fields
		{`fs read \\ x`, []string{"fs", "read", `\\`, "x"}},
		{`\ `, []string{`\ `}},
		{"", nil},
	} {
		got, err := Fields(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Fields(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`fs read /a\`, `\`} {
		if got, err := Fields(bad); err == nil {
			t.Errorf("Fields(%q) = %q, want an error", bad, got)
		}
	}
}

func TestMatchAndLiteral(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		yes, no []string
		literal string // "" when none
	}{
		{"/home/u/data/**", []string{"/home/u/data", "/home/u/data/a/b"}, []string{"/home/u/datax", "/home/u"}, ""},
		{`/a/b\*`, []string{"/a/b*"}, []string{"/a/bc", "/a/b"}, "/a/b*"},
		{`/a/\*\*/c`, []string{"/a/**/c"}, []string{"/a/c", "/a/x/c"}, "/a/**/c"},
		{`/a/x\ y`, []string{"/a/x y"}, []string{"/a/x\\ y", "/a/xy"}, "/a/x y"},
		{`/a/\[x]`, []string{"/a/[x]"}, []string{"/a/x"}, "/a/[x]"},
		{`/a/\\`, []string{`/a/\`}, []string{"/a/x"}, `/a/\`},
		{"/a/b/", []string{"/a/b"}, []string{"/a/b/c"}, "/a/b"},
		{"/", []string{"/"}, []string{"/a"}, "/"},
		{"/a/../b", nil, []string{"/b", "/a/b"}, ""},
		{"/a//b", nil, []string{"/a/b"}, ""},
		{"/a/?", []string{"/a/x"}, []string{"/a/xy"}, ""},
	} {
		for _, n := range tc.yes {
			if !Match(tc.pattern, n) {
				t.Errorf("%q does not match %q", tc.pattern, n)
			}
		}
		for _, n := range tc.no {
			if Match(tc.pattern, n) {
				t.Errorf("%q matches %q", tc.pattern, n)
			}
		}
		lit, ok := Literal(tc.pattern)
		if ok != (tc.literal != "") || lit != tc.literal {
			t.Errorf("Literal(%q) = %q, %v; want %q", tc.pattern, lit, ok, tc.literal)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, ok := range []string{"/a/**", `/a/\*`, "/a/[a-z]*", `/a/x\ y`} {
		if err := Check(ok); err != nil {
			t.Errorf("Check(%q) = %v", ok, err)
		}
	}
	// "a\/b" splits into "a\" and "b": refused, not a pattern that
	// silently never matches (a deny rule like that would protect
	// nothing).
	for _, bad := range []string{"a/b", "/a[", `/a\/b`, `/a\`, "/a\x00"} {
		if err := Check(bad); err == nil {
			t.Errorf("Check(%q) passed", bad)
		}
	}
}

func TestExpandHome(t *testing.T) {
	for _, tc := range []struct{ pattern, home, want string }{
		{"~/data/**", "/home/u", "/home/u/data/**"},
		{"~", "/home/u", "/home/u"},
		{"~/x", "/home/a*b [1]", `/home/a\*b\ \[1\]/x`},
		{"~x", "/home/u", "~x"},
		{"/abs", "", "/abs"},
	} {
		got, err := ExpandHome(tc.pattern, tc.home)
		if err != nil || got != tc.want {
			t.Errorf("ExpandHome(%q, %q) = %q, %v; want %q", tc.pattern, tc.home, got, err, tc.want)
		}
	}
	if _, err := ExpandHome("~/x", ""); err == nil {
		t.Error("~ expanded without a home")
	}
	// A home holding wildcards names itself only.
	p, _ := ExpandHome("~/.toprc", "/home/*")
	if Match(p, "/home/other/.toprc") || !Match(p, "/home/*/.toprc") {
		t.Fatalf("%q: the home's wildcard widened it", p)
	}
}

// FuzzEscape: an escaped name is one field, matches that name, is its
// own literal, and matches no name one change away.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"/a/b", "/a b/c\td", "/x/*?[]\\", "/n\nl", "/u/\u00a0\u3000é", "/~/x", "/", "/a/**", "/\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if len(name) > 4096 || !strings.HasPrefix(name, "/") || path.Clean(name) != name || strings.IndexByte(name, 0) >= 0 {
			return
		}
		e := Escape(name)
		fs, err := Fields("fs read " + e + " ")
		if err != nil || len(fs) != 3 || fs[2] != e {
			t.Fatalf("%q: escaped %q splits as %q, %v", name, e, fs, err)
		}
		if err := Check(e); err != nil {
			t.Fatalf("%q: escaped %q: %v", name, e, err)
		}
		if !Match(e, name) {
			t.Fatalf("%q: escaped %q does not match it", name, e)
		}
		if lit, ok := Literal(e); !ok || lit != name {
			t.Fatalf("%q: escaped %q names %q, %v", name, e, lit, ok)
		}
		for _, other := range neighbours(name) {
			// Requests carry clean absolute paths only (the broker
			// refuses any other as malformed).
			if other != name && strings.HasPrefix(other, "/") && path.Clean(other) == other && Match(e, other) {
				t.Fatalf("%q: escaped %q matches %q too", name, e, other)
			}
		}
	})
}

// neighbours are names one step from name: a child, the parent, a
// sibling, and each byte changed, dropped or doubled.
func neighbours(name string) []string {
	out := []string{path.Join(name, "x"), path.Join(name, "*"), path.Dir(name), name + "x", name + "*"}
	if name != "/" {
		out = append(out, path.Join(path.Dir(name), "x"), path.Join(path.Dir(name), "*"))
	}
	for i := 0; i < len(name) && i < 64; i++ {
		out = append(out, name[:i]+name[i+1:], name[:i]+name[i:i+1]+name[i:], name[:i]+"x"+name[i+1:], name[:i]+"?"+name[i+1:])
		if r, n := utf8.DecodeRuneInString(name[i:]); r != utf8.RuneError {
			out = append(out, name[:i]+string(r+1)+name[i+n:])
		}
	}
	return out
}
