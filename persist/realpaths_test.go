package persist

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
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
	up := strings.Repeat("../", strings.Count(d, "/"))
	link(up+"etc", "toroot")       // .. up to / and down again
	link(up+"../etc", "aboveroot") // .. above /
	link(up+"..", "onlyup")        // nothing but ..
	var paths []string
	for _, base := range []string{"real", "abs", "rel", "chain", "dangling", "loop1", "real/a/up", "real/a/b/twoup", "toroot", "aboveroot", "onlyup",
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

// Realpaths answers as filepath.EvalSymlinks does on a tree of random
// links: to "/", through /proc/self (the process's own root and working
// directory), up with "..", to links and to nothing, asked in a random
// order with one Realpaths throughout (seeded: the same tree each run).
func TestRealpathsRandomTree(t *testing.T) {
	d := t.TempDir()
	rng := rand.New(rand.NewSource(33))
	elems := []string{"a", "b", "c", "l1", "l2", "l3"}
	dirs := []string{d}
	for i := 0; i < 40; i++ {
		p := filepath.Join(dirs[rng.Intn(len(dirs))], elems[rng.Intn(3)])
		if os.MkdirAll(p, 0o755) == nil {
			dirs = append(dirs, p)
		}
	}
	targets := []string{"/", "/proc/self/root", "/proc/self/cwd", "/proc/self", "..", "../..", "../../..",
		".", "a", "b/../c", "l1", "l2/..", "../l3", "x/../a", d, d + "/l1/.."}
	for i := 0; i < 60; i++ {
		tgt := targets[rng.Intn(len(targets))]
		if rng.Intn(3) == 0 {
			tgt += "/" + elems[rng.Intn(len(elems))]
		}
		// An existing name is left as it is.
		_ = os.Symlink(tgt, filepath.Join(dirs[rng.Intn(len(dirs))], elems[3+rng.Intn(3)]))
	}
	paths := []string{"/proc/self/root/etc", "/proc/self/cwd", "/proc/self/root/proc/self/root" + d, "/dev/fd/1"}
	for i := 0; i < 2000; i++ {
		p := dirs[rng.Intn(len(dirs))]
		for j := rng.Intn(6); j > 0; j-- {
			p += "/" + []string{"a", "b", "c", "l1", "l2", "l3", "..", "."}[rng.Intn(8)]
		}
		paths = append(paths, filepath.Clean(p))
	}
	r := NewRealpaths()
	for _, p := range paths {
		want, werr := filepath.EvalSymlinks(p)
		if got, err := r.Eval(p); (err == nil) != (werr == nil) || got != want {
			t.Errorf("Eval(%q) = %q, %v; EvalSymlinks says %q, %v", p, got, err, want, werr)
		}
	}
}

// Links are counted per element: a path through more links than
// EvalSymlinks follows all told (255), but fewer at each element, is
// resolved, to the directory the links lead to (Eval's one departure
// from EvalSymlinks, which gives up).
func TestRealpathsLinksCountedPerElement(t *testing.T) {
	d := t.TempDir()
	if err := os.MkdirAll(filepath.Join(d, "real", "leaf"), 0o755); err != nil {
		t.Fatal(err)
	}
	chain := func(dir, target string, n int) string {
		for i := 0; i < n; i++ {
			name := fmt.Sprint("l", i)
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			target = name
		}
		return target
	}
	parent := chain(d, "real", 200)
	leaf := chain(filepath.Join(d, "real"), "leaf", 100)
	p := filepath.Join(d, parent, leaf)
	if _, err := filepath.EvalSymlinks(p); err == nil {
		t.Fatal("EvalSymlinks resolved 300 links: the test no longer shows the departure")
	}
	if got, err := NewRealpaths().Eval(p); err != nil || got != filepath.Join(d, "real", "leaf") {
		t.Fatalf("Eval = %q, %v; want %s", got, err, filepath.Join(d, "real", "leaf"))
	}
}
