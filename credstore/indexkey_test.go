package credstore

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Two configurations whose lists print alike (one path with a space in
// it, or two paths) are not one index's: a scan after a scan of the
// other finds what a scan without an index finds. With the lists
// printed as %v both had one key, and a directory left out of the first
// (skipped) stayed out of the second.
func TestIndexKeyListsUnambiguous(t *testing.T) {
	h := t.TempDir()
	x, y := filepath.Join(h, "x"), filepath.Join(h, "y")
	for _, d := range []string{filepath.Join(x, ".aws"), y} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(x, ".aws", "credentials"), []byte("[default]\n"), 0o600)
	later := func() time.Time { return time.Now().Add(time.Hour) }
	scan := func(skip []string, index string) []string {
		t.Helper()
		res, err := Scan(context.Background(), ScanConfig{Home: h, Skip: skip, Index: index, Now: later, Cache: NewIndexCache(), UID: os.Getuid()})
		if err != nil {
			t.Fatal(err)
		}
		var paths []string
		for _, f := range res.Found {
			paths = append(paths, f.Path)
		}
		return paths
	}
	pairs := [][2][]string{
		{{x, y}, {x + " " + y}},
		{{x + " " + y}, {x, y}},
		{{x + "] [" + y}, {x, y}},
	}
	for i, p := range pairs {
		index := filepath.Join(t.TempDir(), "credstores.index")
		scan(p[0], index)
		got, want := scan(p[1], index), scan(p[1], "")
		if !slices.Equal(got, want) {
			t.Errorf("pair %d: skip %q after skip %q found %q; without an index %q", i, p[1], p[0], got, want)
		}
	}
}
