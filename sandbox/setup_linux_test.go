package sandbox

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestSkeletonDirs(t *testing.T) {
	base := t.TempDir()
	// t.TempDir's own parent is private; open the path above base.
	os.Chmod(filepath.Dir(base), 0o755)
	locked := filepath.Join(base, "locked")
	os.MkdirAll(filepath.Join(locked, "home", "ws"), 0o755)
	os.Chmod(locked, 0o700)
	open := filepath.Join(base, "open", "ws")
	os.MkdirAll(open, 0o755)
	os.Chmod(base, 0o755)
	got := skeletonDirs([]string{filepath.Join(locked, "home", "ws"), open}, 100000, 100000)
	if !reflect.DeepEqual(got, []string{locked}) {
		t.Fatalf("skeletonDirs = %q, want [%s]", got, locked)
	}
	// A target below another target is reached through it.
	got = skeletonDirs([]string{filepath.Join(locked, "home"), filepath.Join(locked, "home", "ws")}, 100000, 100000)
	if !reflect.DeepEqual(got, []string{locked}) {
		t.Fatalf("nested: skeletonDirs = %q, want [%s]", got, locked)
	}
}
