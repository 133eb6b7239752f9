package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReadable checks the carve-out's semantics on paths: a deny entry
// strictly below a read root (and at or above the path) removes it from
// that root; an entry at or above the root does not remove the root.
func TestReadable(t *testing.T) {
	home := t.TempDir()
	for _, d := range []string{".cache/go-build", "go/pkg/mod", ".ssh", "data/x"} {
		os.MkdirAll(filepath.Join(home, d), 0o755)
	}
	os.Symlink(filepath.Join(home, "data"), filepath.Join(home, "link"))
	j := func(rel string) string { return filepath.Join(home, rel) }
	cases := []struct {
		name       string
		p          string
		read, deny []string
		want       bool
	}{
		{"no deny", j(".cache/go-build"), []string{"/"}, nil, true},
		{"denied itself", j(".ssh"), []string{"/"}, []string{j(".ssh")}, false},
		{"below a deny", j(".cache/go-build"), []string{"/"}, []string{j(".cache")}, false},
		{"below a glob deny", j(".cache/go-build"), []string{"/"}, []string{j(".ca*")}, false},
		{"deny below is not the path", j(".cache"), []string{"/"}, []string{j(".cache/go-build")}, true},
		{"strict: home denied", j(".cache/go-build"), []string{"/"}, []string{home}, false},
		{"strict: re-allowed", j("go/pkg/mod"), []string{"/", j("go")}, []string{home}, true},
		{"strict: re-allowed, secret between", j("go/pkg/mod"), []string{"/", j("go")}, []string{home, j("go/pkg")}, false},
		{"root through a symlink: its spelling is matched", j("data/x"), []string{j("link")}, []string{j("link/x")}, false},
		{"root through a symlink", j("data/x"), []string{j("link")}, []string{j("data/x")}, true},
		{"not under any root", j("data/x"), []string{j("go")}, nil, false},
		{"not clean", j("data/x") + "/", []string{"/"}, nil, false},
	}
	for _, tc := range cases {
		if got := Readable(tc.p, tc.read, tc.deny); got != tc.want {
			t.Errorf("%s: Readable(%s, %q, %q) = %v", tc.name, tc.p, tc.read, tc.deny, got)
		}
	}
}

func TestCoveredAndMasks(t *testing.T) {
	deny := []string{"/h/.ssh", "/h/.cache/go-build/sub/key", "/h/.cache/go-build/*.pem", "/h/.cache/g*", "/h/.cache/pip/[x"}
	if d, ok := CoveredBy("/h/.ssh/x", deny); !ok || d != "/h/.ssh" {
		t.Errorf("CoveredBy(/h/.ssh/x) = %q, %v", d, ok)
	}
	if d, ok := CoveredBy("/h/.cache/go-build/y", deny); !ok || d != "/h/.cache/g*" {
		t.Errorf("CoveredBy(go-build/y) = %q, %v", d, ok)
	}
	if _, ok := CoveredBy("/h/.cache/pip", deny); ok {
		t.Errorf("CoveredBy(pip) matched")
	}
	got := MasksBelow("/h/.cache/go-build", deny)
	if want := []string{"sub/key", "*.pem"}; !slices.Equal(got, want) {
		t.Errorf("MasksBelow = %q, want %q", got, want)
	}
}
