package landlock

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCarveoutGrants checks the carve-out's semantics on paths: a deny
// entry strictly below a read root (and at or above the path) removes it
// from that root; an entry at or above the root does not remove the
// root. (These were sandbox.Readable's cases: the host cache check asks
// for every read right.)
func TestCarveoutGrants(t *testing.T) {
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
		{"a root spelled unclean is carved all the same", j(".cache/go-build"), []string{home + "/"}, []string{j(".cache")}, false},
	}
	for _, tc := range cases {
		c := NewCarveout(ResolveRoots(tc.read), tc.deny, true)
		if got := c.Grants(tc.p, ReadAccess); got != tc.want {
			t.Errorf("%s: Grants(%s, %q, %q) = %v", tc.name, tc.p, tc.read, tc.deny, got)
		}
	}
}

// TestCarveoutListing: a carved directory itself, and every directory
// below a carved root, may be listed exactly when carved directories
// may; files keep their own verdict.
func TestCarveoutListing(t *testing.T) {
	roots := []Root{{Path: "/", Real: "/"}}
	deny := []string{"/h/.ssh"}
	for _, tc := range []struct {
		p      string
		access Access
		list   bool
		want   bool
	}{
		{"/h", AccessReadDir, true, true},
		{"/h", AccessReadDir, false, false},
		{"/h", AccessReadFile, false, true}, // a directory: no file right asked
		{"/h/.ssh", AccessReadDir, true, true},
		{"/h/.ssh", AccessReadDir, false, false},
		{"/h/.ssh/id_rsa", AccessReadFile, true, false},
		{"/h/x", ReadAccess, false, true},
		{"/", AccessReadDir, false, false},
		{"/", AccessReadDir, true, true},
	} {
		if got := NewCarveout(roots, deny, tc.list).Grants(tc.p, tc.access); got != tc.want {
			t.Errorf("Grants(%s, %v) with list=%v = %v, want %v", tc.p, tc.access, tc.list, got, tc.want)
		}
	}
}

func TestCarveoutDeniedBelow(t *testing.T) {
	// sandbox.MasksBelow's case, with the entries no carve-out takes.
	c := NewCarveout(nil, []string{"/h/.ssh", "/h/.cache/go-build/sub/key", "/h/.cache/go-build/*.pem", "/h/.cache/g*", "/h/.cache/pip/[x", "/", "rel/x"}, true)
	got := c.DeniedBelow("/h/.cache/go-build")
	if len(got) != 2 || got[0] != "sub/key" || got[1] != "*.pem" {
		t.Errorf("DeniedBelow = %q", got)
	}
}

// TestCarveSymlinkedRoot: the kernel and Carveout.Grants agree on a root
// reached through a symlink, its deny entries spelled through it, a glob
// and a root spelled unclean (runChild compares every probe).
func TestCarveSymlinkedRoot(t *testing.T) {
	root := tree(t, "data/x/a", "data/y/b", "data/keys/k.pem", "data/keys/k.pub", "other/.cache/c")
	j := func(p string) string { return filepath.Join(root, p) }
	os.Symlink(j("data"), j("link"))
	got := runChild(t, childSpec{
		Roots: []string{j("link"), j("other") + "/"},
		Deny:  []string{j("link/x"), j("link/keys/*.pem"), j("other/.cache")},
		Probe: []string{j("data/x/a"), j("data/y/b"), j("data/keys/k.pem"), j("data/keys/k.pub"), j("other/.cache/c")},
	})
	check(t, got, map[string]bool{
		"read " + j("data/x/a"):        false,
		"read " + j("data/y/b"):        true,
		"read " + j("data/keys/k.pem"): false,
		"read " + j("data/keys/k.pub"): true,
		"read " + j("other/.cache/c"):  false,
	})
}
