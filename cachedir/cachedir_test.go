package cachedir

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func mkCache(t *testing.T, root, id, ws string, size int, used time.Time) string {
	t.Helper()
	dir := filepath.Join(root, id)
	if err := os.MkdirAll(filepath.Join(dir, "go-mod", "ro"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go-mod", "ro", "f"), make([]byte, size), 0o444); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, "go-mod", "ro"), 0o555) // as Go's module cache leaves it
	release, err := Use(root, dir, ws)
	if err != nil {
		t.Fatal(err)
	}
	release()
	b := []byte(`{"workspace":"` + ws + `","last_used":"` + used.UTC().Format(time.RFC3339Nano) + `"}`)
	os.WriteFile(filepath.Join(root, id+".use"), b, 0o600)
	return dir
}

// TestPruneLRU: the least recently used caches go first, only until the
// rest fit; read-only directories are removed; a symlink out of a cache
// is removed, never followed; a cache in use stays.
func TestPruneLRU(t *testing.T) {
	root := filepath.Join(t.TempDir(), "cache")
	outside := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(outside, []byte("keep"), 0o644)
	now := time.Now()
	old := mkCache(t, root, "aa", "/w/old", 1<<20, now.Add(-3*time.Hour))
	os.Symlink(filepath.Dir(outside), filepath.Join(old, "link"))
	mid := mkCache(t, root, "bb", "/w/mid", 1<<20, now.Add(-2*time.Hour))
	mkCache(t, root, "cc", "/w/new", 1<<20, now.Add(-time.Hour))
	busy := mkCache(t, root, "dd", "/w/busy", 1<<20, now.Add(-4*time.Hour))
	release, err := Use(root, busy, "/w/busy")
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	removed, err := Prune(root, 2<<20+1<<19) // room for two and a half
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 2 || removed[0].ID != "aa" || removed[1].ID != "bb" {
		t.Fatalf("removed %+v, want aa then bb (dd is in use)", removed)
	}
	for _, d := range []string{old, mid} {
		if _, err := os.Lstat(d); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", d, err)
		}
	}
	if b, err := os.ReadFile(outside); err != nil || string(b) != "keep" {
		t.Fatalf("the symlink's target was touched: %q %v", b, err)
	}
	ents, _ := List(root)
	if len(ents) != 2 || ents[0].Workspace != "/w/new" || !ents[1].InUse || ents[1].Workspace != "/w/busy" { // Use made dd the latest
		t.Fatalf("left %+v", ents)
	}
	if _, err := Remove(root, []string{"dd"}); err == nil {
		t.Fatal("removed a cache in use")
	}
}

func TestUseRefusesOtherDirs(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{filepath.Join(root, "x", "aa"), filepath.Join(root, "ZZ"), "/etc"} {
		if _, err := Use(root, d, "/w"); err == nil {
			t.Errorf("Use(%s) accepted", d)
		}
	}
}
