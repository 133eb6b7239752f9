package policy

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/filecache"
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

// settle waits until files written now have settled (filecache.SettleTime).
func settle() { time.Sleep(filecache.SettleTime + 100*time.Millisecond) }

// TestCacheRacy: a file that changed within filecache.SettleTime of its read is
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
	if n, _ := c.files.Len(); n != 0 {
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
	if n, _ := c.files.Len(); n != 1 {
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
	if n, _ := c.files.Len(); n != 0 {
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
	if n, _ := c.files.Len(); n != 2 {
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
	if !c.files.Kept(1000, user) {
		t.Fatal("not kept for uid 1000")
	}
	// What uid 1000 has kept is not what uid 1001 gets: plant a
	// different parse under uid 1000's entry and load as 1001.
	var st syscall.Stat_t
	if err := syscall.Stat(user, &st); err != nil {
		t.Fatal(err)
	}
	planted := &parsedFile{vals: Policy{Limits: Limits{Pids: 7}}, set: [][]int{pidsIndex(t)}}
	data, err := os.ReadFile(user)
	if err != nil {
		t.Fatal(err)
	}
	c.files.Keep(1000, user, filecache.StatOf(&st), time.Now(), data, planted)
	if got := loadPids(t, c, 1000, user); got != 7 {
		t.Fatalf("uid 1000's own entry: pids %d, want the planted 7", got)
	}
	if got := loadPids(t, c, 1001, user); got != 1001 {
		t.Fatalf("uid 1001 got uid 1000's entry: pids %d", got)
	}
	if n, _ := c.files.Len(); n != 2 {
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

// TestCacheBounds: a Cache keeps at most its bounds (filecache keeps
// them; see its tests for the eviction order).
func TestCacheBounds(t *testing.T) {
	c := NewCache()
	dir := t.TempDir()
	var st syscall.Stat_t
	for i := range maxCachedFiles + 10 {
		p := writeFile(t, filepath.Join(dir, fmt.Sprint(i, ".toml")), pidsPolicy(1000+i))
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		c.files.Keep(0, p, filecache.StatOf(&st), time.Now().Add(time.Hour), []byte(pidsPolicy(1000+i)), &parsedFile{})
	}
	if n, b := c.files.Len(); n != maxCachedFiles || b > maxCachedBytes {
		t.Fatalf("%d entries of %d bytes, bounds %d and %d", n, b, maxCachedFiles, maxCachedBytes)
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
	if n, _ := c.files.Len(); n != 2 {
		t.Fatalf("%d entries, want the two good files", n)
	}
}
