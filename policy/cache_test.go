package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// pidsPolicy is a policy file setting limits.pids to n: the same size
// for every n of the same number of digits.
func pidsPolicy(n int) string { return fmt.Sprintf("[limits]\npids = %d\n", n) }

// loadPids loads user (explicit) and ws through c for uid and returns
// limits.pids.
func loadPids(t *testing.T, c *Cache, uid int, user string, ws ...string) int64 {
	t.Helper()
	p, err := c.Load(uid, nil, user, true, ws...)
	if err != nil {
		t.Fatal(err)
	}
	return p.Limits.Pids
}

// settle waits until files written now have settled (settleTime).
func settle() { time.Sleep(settleTime + 100*time.Millisecond) }

// TestCacheRacy: a file that changed within settleTime of its read is
// never kept, so an edit of the same size in the same second (its mtime
// put back) is seen; a settled file is kept, and still seen when edited.
func TestCacheRacy(t *testing.T) {
	t.Parallel()
	c := NewCache()
	user := writeFile(t, filepath.Join(t.TempDir(), "user.toml"), pidsPolicy(1001))
	st, err := os.Stat(user)
	if err != nil {
		t.Fatal(err)
	}
	if got := loadPids(t, c, 0, user); got != 1001 {
		t.Fatalf("pids %d, want 1001", got)
	}
	if n, _ := c.len(); n != 0 {
		t.Fatalf("a file written just now was kept (%d entries)", n)
	}
	writeFile(t, user, pidsPolicy(1002))
	if err := os.Chtimes(user, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if got := loadPids(t, c, 0, user); got != 1002 {
		t.Fatalf("an edit of the same size and mtime: pids %d, want 1002", got)
	}

	settle()
	loadPids(t, c, 0, user)
	if n, _ := c.len(); n != 1 {
		t.Fatalf("a settled file was not kept (%d entries)", n)
	}
	if got := loadPids(t, c, 0, user); got != 1002 {
		t.Fatalf("kept file: pids %d, want 1002", got)
	}
	st, _ = os.Stat(user)
	writeFile(t, user, pidsPolicy(1003))
	if err := os.Chtimes(user, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if got := loadPids(t, c, 0, user); got != 1003 {
		t.Fatalf("a kept file edited in place (same size, mtime put back): pids %d, want 1003", got)
	}
	if n, _ := c.len(); n != 0 {
		t.Fatalf("the edit just made was kept (%d entries)", n)
	}
}

// TestCacheReplacedRemoved: a kept file renamed over, removed, or
// turned into what its kind refuses is seen on the next load.
func TestCacheReplacedRemoved(t *testing.T) {
	t.Parallel()
	c := NewCache()
	dir := t.TempDir()
	user := writeFile(t, filepath.Join(dir, "user.toml"), pidsPolicy(1001))
	ws := writeFile(t, filepath.Join(dir, "ws.toml"), pidsPolicy(900))
	settle()
	if got := loadPids(t, c, 0, user, ws); got != 900 {
		t.Fatalf("pids %d, want 900", got)
	}
	if n, _ := c.len(); n != 2 {
		t.Fatalf("%d entries, want the user's and the workspace's", n)
	}

	// Renamed over, same size: another inode.
	next := writeFile(t, filepath.Join(dir, "next.toml"), pidsPolicy(1004))
	if err := os.Rename(next, user); err != nil {
		t.Fatal(err)
	}
	if got := loadPids(t, c, 0, user); got != 1004 {
		t.Fatalf("renamed over: pids %d, want 1004", got)
	}

	// A second hard link to the kept workspace file is refused.
	if err := os.Link(ws, filepath.Join(dir, "other")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(0, nil, user, true, ws); err == nil || !strings.Contains(err.Error(), "hard links") {
		t.Fatalf("a workspace policy with two links: %v", err)
	}
	os.Remove(filepath.Join(dir, "other"))

	// Removed: the workspace's is no policy; the user's explicit one
	// an error, the default one the defaults.
	if err := os.Remove(ws); err != nil {
		t.Fatal(err)
	}
	if got := loadPids(t, c, 0, user, ws); got != 1004 {
		t.Fatalf("workspace policy removed: pids %d, want 1004", got)
	}
	if err := os.Remove(user); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(0, nil, user, true); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("explicit user policy removed: %v", err)
	}
	if p, err := c.Load(0, nil, user, false); err != nil || !reflect.DeepEqual(p, Default()) {
		t.Fatalf("default user policy removed: %+v, %v", p.Limits, err)
	}
	// A symbolic link in the workspace file's place is refused.
	if err := os.Symlink(filepath.Join(dir, "elsewhere"), ws); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(0, nil, "", false, ws); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a symbolic link for the workspace policy: %v", err)
	}
}

// TestCacheCallers: an entry is given only to the uid that read it.
func TestCacheCallers(t *testing.T) {
	t.Parallel()
	c := NewCache()
	user := writeFile(t, filepath.Join(t.TempDir(), "user.toml"), pidsPolicy(1001))
	settle()
	loadPids(t, c, 1000, user)
	ref := fileRef{uid: 1000, path: user}
	if c.entries[ref] == nil {
		t.Fatal("not kept for uid 1000")
	}
	// What uid 1000 has kept is not what uid 1001 gets: plant a
	// different parse under uid 1000's entry and load as 1001.
	c.entries[ref].f = &parsedFile{vals: Policy{Limits: Limits{Pids: 7}}, set: [][]int{pidsIndex(t)}}
	if got := loadPids(t, c, 1000, user); got != 7 {
		t.Fatalf("uid 1000's own entry: pids %d, want the planted 7", got)
	}
	if got := loadPids(t, c, 1001, user); got != 1001 {
		t.Fatalf("uid 1001 got uid 1000's entry: pids %d", got)
	}
	if n, _ := c.len(); n != 2 {
		t.Fatalf("%d entries, want one per uid", n)
	}
}

// pidsIndex is limits.pids's field index.
func pidsIndex(t *testing.T) []int {
	for _, lf := range leaves(policyType()) {
		if lf.path == "limits.pids" {
			return lf.index
		}
	}
	t.Fatal("no limits.pids")
	return nil
}

// TestCacheBounds: the entries and their bytes stay within the bounds,
// the least recently used going first; a file larger than the byte
// bound is not kept.
func TestCacheBounds(t *testing.T) {
	c := NewCache()
	f := &parsedFile{}
	for i := range maxCachedFiles + 10 {
		c.put(fileRef{uid: i % 3, path: fmt.Sprint("/p/", i)}, fileStat{ino: uint64(i), size: 100}, f)
	}
	if n, b := c.len(); n != maxCachedFiles || b != int64(maxCachedFiles)*100 {
		t.Fatalf("%d entries of %d bytes, want %d", n, b, maxCachedFiles)
	}
	if c.get(fileRef{uid: 0, path: "/p/0"}, fileStat{ino: 0, size: 100}) != nil {
		t.Fatal("the oldest entry was kept")
	}
	recent := fileRef{uid: 1, path: fmt.Sprint("/p/", 10)}
	c.get(recent, fileStat{ino: 10, size: 100})
	big := int64(maxCachedBytes-2000) / 3 // room left for 20 small entries
	for i := range 3 {
		c.put(fileRef{uid: 9, path: fmt.Sprint("/big/", i)}, fileStat{ino: uint64(i), size: big}, f)
	}
	if n, b := c.len(); b > maxCachedBytes || n > maxCachedFiles {
		t.Fatalf("%d entries of %d bytes, bound %d", n, b, maxCachedBytes)
	}
	if c.get(recent, fileStat{ino: 10, size: 100}) == nil {
		t.Fatal("the most recently used small entry went before older ones")
	}
	c.put(fileRef{uid: 9, path: "/huge"}, fileStat{size: maxCachedBytes + 1}, f)
	if c.get(fileRef{uid: 9, path: "/huge"}, fileStat{size: maxCachedBytes + 1}) != nil {
		t.Fatal("a file over the byte bound was kept")
	}
}

// TestCacheSameAsLoad: through a Cache, kept or not, every file gives
// what LoadUnder gives, and what a load returns shares nothing with
// what is kept.
func TestCacheSameAsLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	user := writeFile(t, filepath.Join(dir, "user.toml"), "[filesystem]\nwritable = [\"/data\", \"~/x/../y\"]\nsecrets = [\"~/.tok\"]\n"+
		"[boundaries]\nallow = [\"net connect a.example:443\"]\n[limits]\npids = 1000\n")
	ws := writeFile(t, filepath.Join(dir, "ws.toml"), "[filesystem]\nwritable = [\"/data\"]\nsecrets = [\"~/.other\"]\n[limits]\npids = 900\n")
	bad := writeFile(t, filepath.Join(dir, "bad.toml"), "[limits]\npids = \"many\"\n")
	want, err := LoadUnder(nil, user, true, ws)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache()
	for round := range 3 {
		got, err := c.Load(0, nil, user, true, ws)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: %+v, %v; want %+v", round, got, err, want)
		}
		got.Filesystem.Writable[0] = "/changed"
		got.Filesystem.Secrets[0] = "/changed"
		_, wantErr := LoadUnder(nil, bad, true)
		if _, err := c.Load(0, nil, bad, true); err == nil || err.Error() != wantErr.Error() {
			t.Fatalf("round %d: bad file: %v, want %v", round, err, wantErr)
		}
		if round == 0 {
			settle()
		}
	}
	if n, _ := c.len(); n != 2 {
		t.Fatalf("%d entries, want the two good files", n)
	}
}
