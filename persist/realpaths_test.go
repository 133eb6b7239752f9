package persist

import (
	"os"
	"path/filepath"
	"testing"
)

// Realpaths answers as filepath.EvalSymlinks does, for every path of a
// tree with absolute, relative, chained, dangling and looping links, a
// link through "..", and a file used as a directory.
func TestRealpathsAsEvalSymlinks(t *testing.T) {
	d := t.TempDir()
	mk := func(dir string) {
		if err := os.MkdirAll(filepath.Join(d, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(d, name)); err != nil {
			t.Fatal(err)
		}
	}
	mk("real/a/b")
	mk("other/c")
	if err := os.WriteFile(filepath.Join(d, "real/a/f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link(filepath.Join(d, "real"), "abs")     // absolute
	link("real/a", "rel")                     // relative
	link("abs", "chain")                      // to a link
	link("../other/c", "real/a/up")           // through ..
	link("nowhere", "dangling")               // to nothing
	link("loop2", "loop1")                    // a cycle
	link("loop1", "loop2")                    //
	link("../../other", "real/a/b/twoup")     // .. twice
	link("up/../../a", "real/a/b/upthrough")  // a link, then .. from its target
	link("f", "real/a/tofile")                // to a file
	link(filepath.Join(d, "abs"), "real/abs") // absolute, to a link
	var paths []string
	for _, base := range []string{"real", "abs", "rel", "chain", "dangling", "loop1", "real/a/up", "real/a/b/twoup",
		"real/a/b/upthrough", "real/a/tofile", "real/abs", "other/c", "missing"} {
		for _, rest := range []string{"", "a", "a/b", "b", "f", "f/x", "x/y", "c", "up", "up/..", "a/up/x", "tofile/x", "a/f/../b"} {
			paths = append(paths, filepath.Join(d, base, rest), filepath.Join(d, base)+"/"+rest)
		}
	}
	paths = append(paths, "/", d, "relative/path", "")
	// One Realpaths asked everything in order, one per path: the memo of
	// earlier answers must not change a later one.
	shared := NewRealpaths()
	for _, p := range paths {
		want, werr := filepath.EvalSymlinks(p)
		for _, r := range []*Realpaths{shared, NewRealpaths()} {
			got, err := r.Eval(p)
			if (err == nil) != (werr == nil) || (err == nil && got != want) {
				t.Errorf("Eval(%q) = %q, %v; EvalSymlinks says %q, %v", p, got, err, want, werr)
			}
		}
	}
}

// A Realpaths is one look at the tree: a link changed after it was
// asked is seen by a new one (a plan makes its own), not by the old.
func TestRealpathsOneLook(t *testing.T) {
	d := t.TempDir()
	for _, dir := range []string{"one", "two"} {
		if err := os.Mkdir(filepath.Join(d, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	l := filepath.Join(d, "l")
	if err := os.Symlink("one", l); err != nil {
		t.Fatal(err)
	}
	old := NewRealpaths()
	if got, _ := old.Eval(l + "/x"); got != "" {
		t.Fatalf("Eval of a missing path = %q", got)
	}
	if got, err := old.Eval(l); err != nil || got != filepath.Join(d, "one") {
		t.Fatalf("Eval(l) = %q, %v", got, err)
	}
	if err := os.Remove(l); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("two", l); err != nil {
		t.Fatal(err)
	}
	if got, err := NewRealpaths().Eval(l); err != nil || got != filepath.Join(d, "two") {
		t.Fatalf("a new look: Eval(l) = %q, %v", got, err)
	}
}
