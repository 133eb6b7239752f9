package persist

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Realpaths answers as filepath.EvalSymlinks does on random hostile
// trees: links whose targets hold "..", ".", "//", a trailing slash,
// reach / and go above it, name other links (chains through the memo)
// and loops; asked in a random order through one Realpaths and afresh.
func TestRealpathsHostileTrees(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { hostileTree(t, seed) })
	}
}

func hostileTree(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	d := t.TempDir()
	dirs := []string{"", "a", "a/b", "a/b/c", "x", "x/y"}
	for _, dir := range dirs[1:] {
		if err := os.MkdirAll(filepath.Join(d, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"a/f", "a/b/g", "x/y/h"} {
		if err := os.WriteFile(filepath.Join(d, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	up := strings.Repeat("../", strings.Count(d, "/"))
	pieces := []string{"..", ".", "", "a", "b", "c", "f", "g", "x", "y", "h", "l0", "l1", "l2", "l3", "l4", "l5", "missing"}
	var links []string
	for i := 0; i < 12; i++ {
		dir := dirs[rng.Intn(len(dirs))]
		name := filepath.Join(d, dir, fmt.Sprintf("l%d", i%6))
		if _, err := os.Lstat(name); err == nil {
			continue
		}
		var parts []string
		for n := 1 + rng.Intn(4); n > 0; n-- {
			parts = append(parts, pieces[rng.Intn(len(pieces))])
		}
		target := strings.Join(parts, "/")
		switch rng.Intn(6) {
		case 0:
			target = d + "/" + target
		case 1:
			target = up + target
		case 2:
			target = up + "../" + target
		case 3:
			target += "/"
		}
		if target == "" {
			target = "."
		}
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
		links = append(links, strings.TrimPrefix(name, d+"/"))
	}
	var paths []string
	for _, base := range append(append([]string{}, dirs...), links...) {
		for _, rest := range []string{"", "l0", "l1/f", "b", "b/c", "f", "..", "l2/..", "y/h", "g"} {
			p := filepath.Join(d, base, rest)
			paths = append(paths, p)
		}
	}
	rng.Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
	shared := NewRealpaths()
	for _, p := range paths {
		want, werr := filepath.EvalSymlinks(p)
		for _, r := range []*Realpaths{shared, NewRealpaths()} {
			got, err := r.Eval(p)
			if (err == nil) != (werr == nil) || (err == nil && got != want) {
				var tree []string
				for _, l := range links {
					tg, _ := os.Readlink(filepath.Join(d, l))
					tree = append(tree, l+" -> "+tg)
				}
				t.Errorf("Eval(%q) = %q, %v; EvalSymlinks says %q, %v\nlinks: %s", p, got, err, want, werr, strings.Join(tree, "; "))
			}
		}
	}
}
