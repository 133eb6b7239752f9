package credstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/gob"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/filecache"
	"golang.org/x/sys/unix"
)

// writeIndex writes an index whose key is key (keys of one length make
// files of one size) and returns the file's mtime.
func writeIndex(t *testing.T, p, key string) time.Time {
	t.Helper()
	if err := saveIndex(p, &index{Key: key, Dirs: map[string]*dirRec{"/d": {Ino: 1}}}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.ModTime()
}

// rewriteInPlace writes the index again into the same inode, same size,
// with the mtime it had: only its change time (and content) differ.
func rewriteInPlace(t *testing.T, p, key string, mtime time.Time) {
	t.Helper()
	old, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	writeIndex(t, p+".new", key)
	b, err := os.ReadFile(p + ".new")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != len(old) {
		t.Fatalf("the rewrite is %d bytes, the index %d: not a same-size rewrite", len(b), len(old))
	}
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func keyOf(t *testing.T, p string, uid int, c *IndexCache) (string, *index) {
	t.Helper()
	x, err := readIndex(p, uid, c)
	if err != nil {
		t.Fatal(err)
	}
	return x.Key, x
}

// kept says whether c holds an entry for uid's file p.
func kept(c *IndexCache, uid int, p string) bool { return c.files.Kept(uid, p) }

// An index that changed within filecache.SettleTime of its read is never kept: a
// same-size rewrite in the same tick, with the mtime put back, is read.
func TestIndexCacheRacy(t *testing.T) {
	p := filepath.Join(t.TempDir(), "index")
	c := NewIndexCache()
	mtime := writeIndex(t, p, "key-1")
	if k, _ := keyOf(t, p, 1000, c); k != "key-1" || kept(c, 1000, p) {
		t.Fatalf("a fresh index: key %q, kept %v; want key-1, not kept", k, kept(c, 1000, p))
	}
	rewriteInPlace(t, p, "key-2", mtime)
	if k, _ := keyOf(t, p, 1000, c); k != "key-2" {
		t.Fatalf("a same-size rewrite in place, same mtime: read %q, want key-2", k)
	}
}

// A settled index is kept for the uid that read it and no other, and
// any change to the file (in place, same size, same mtime; replaced;
// removed) is seen by the next read.
func TestIndexCacheSettled(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the index to settle")
	}
	t.Parallel()
	p := filepath.Join(t.TempDir(), "index")
	mtime := writeIndex(t, p, "key-1")
	time.Sleep(filecache.SettleTime + 100*time.Millisecond)
	c := NewIndexCache()
	k, first := keyOf(t, p, 1000, c)
	if k != "key-1" || !kept(c, 1000, p) {
		t.Fatalf("a settled index: key %q, kept %v; want key-1, kept", k, kept(c, 1000, p))
	}
	if _, again := keyOf(t, p, 1000, c); again != first {
		t.Fatal("a settled index unchanged was decoded again")
	}
	// Another caller, the same file: decoded for it, never given the
	// first caller's entry.
	if _, other := keyOf(t, p, 1001, c); other == first {
		t.Fatal("uid 1001 was given uid 1000's decoded index")
	}
	if !kept(c, 1001, p) || !kept(c, 1000, p) {
		t.Fatal("each caller's entry is its own")
	}
	rewriteInPlace(t, p, "key-2", mtime)
	for _, uid := range []int{1000, 1001} {
		if k, _ := keyOf(t, p, uid, c); k != "key-2" {
			t.Fatalf("uid %d after a same-size rewrite in place: read %q, want key-2", uid, k)
		}
	}
	writeIndex(t, p, "key-3") // a new file in its place
	if k, _ := keyOf(t, p, 1000, c); k != "key-3" {
		t.Fatalf("after the index was replaced: read %q, want key-3", k)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if x := loadIndex(p, "key-3", 1000, c); len(x.Dirs) != 0 {
		t.Fatal("a removed index was read from memory")
	}
}

// Scans through a cache see the home as it is: a store added between
// two scans is found, one removed is no longer.
func TestScanWithCacheSeesChanges(t *testing.T) {
	home := t.TempDir()
	idx := filepath.Join(t.TempDir(), "index")
	c := NewIndexCache()
	scan := func() []string {
		t.Helper()
		res, err := Scan(context.Background(), ScanConfig{Home: home, Index: idx, Cache: c, UID: os.Getuid()})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range res.Found {
			out = append(out, filepath.Base(f.Path))
		}
		return out
	}
	netrc := filepath.Join(home, ".netrc")
	for i, step := range []struct {
		do   func() error
		want []string
	}{
		{func() error { return nil }, nil},
		{func() error { return os.WriteFile(netrc, []byte("x"), 0o600) }, []string{".netrc"}},
		{func() error { return nil }, []string{".netrc"}},
		{func() error { return os.Remove(netrc) }, nil},
	} {
		if err := step.do(); err != nil {
			t.Fatal(err)
		}
		if got := scan(); !slices.Equal(got, step.want) {
			t.Fatalf("step %d: found %q, want %q", i, got, step.want)
		}
	}
}

// The index key is made of the same bytes whether the rules' part is
// formatted once per cache or per scan. (Its roots are quoted since
// TestIndexKeyListsUnambiguous: an index an older build made is read
// again once.)
func TestIndexKeyUnchanged(t *testing.T) {
	cfg := ScanConfig{Home: "/home/u", StateDirs: []string{"/home/u/.config"}, CacheDirs: []string{"/home/u/.cache"},
		Covered: []string{"/home/u/.netrc"}, Skip: []string{"/x"}}
	h := sha256.New()
	fmt.Fprintf(h, "%q|%q|%q|%q|%q|%v|%v|%v\n", cfg.Home, cfg.StateDirs, cfg.CacheDirs, cfg.Covered, cfg.Skip, maxDepth, cacheDepth, skipHome)
	fmt.Fprintf(h, "%v|%v|%v|%v|v2\n", namePatterns(), notStores, codeExts, backupSuffixes)
	want := hex.EncodeToString(h.Sum(nil))
	for _, c := range []*IndexCache{nil, NewIndexCache()} {
		cfg.Cache = c
		s := &scanner{cfg: cfg, pats: namePatterns()}
		for i := 0; i < 2; i++ {
			if got := s.indexKey(); got != want {
				t.Fatalf("cache %v, key %d: %s, want %s", c != nil, i, got, want)
			}
		}
	}
}

// A fifo in the index's place is no index, and the scan does not wait
// on it.
func TestIndexFifo(t *testing.T) {
	p := filepath.Join(t.TempDir(), "index")
	if err := unix.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan *index, 1)
	go func() { done <- loadIndex(p, "k", os.Getuid(), NewIndexCache()) }()
	select {
	case x := <-done:
		if len(x.Dirs) != 0 {
			t.Fatal("a fifo read as an index")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("loading the index waited on a fifo")
	}
}

// An index file over maxIndexBytes (the caller's to make as large as it
// likes) is not read: the scan starts afresh. The file is sparse, so a
// read of it whole would show as the test's time and memory.
func TestIndexTooLarge(t *testing.T) {
	p := filepath.Join(t.TempDir(), "index")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(maxIndexBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := readIndex(p, os.Getuid(), NewIndexCache()); err == nil || !strings.Contains(err.Error(), "over 256 MiB") {
		t.Fatalf("readIndex of a file over the bound: %v", err)
	}
	if x := loadIndex(p, "k", os.Getuid(), nil); len(x.Dirs) != 0 {
		t.Fatal("an index over the bound was read")
	}
}

// A kept index is read only: scans through the cache, at once, of a
// home changed since it was made (a sniffed key rewritten in place, a
// store added, a directory made), leave its bytes as they were
// decoded, and find what is there now.
func TestIndexCacheNotMutated(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the home and its index to settle")
	}
	t.Parallel()
	home, idx := t.TempDir(), filepath.Join(t.TempDir(), "index")
	key := filepath.Join(home, "a", "b", "id_rsa")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("-----BEGIN OPENSSH PRIVATE KEY-----\nx\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := NewIndexCache()
	cfg := ScanConfig{Home: home, Index: idx, Cache: c, UID: os.Getuid()}
	scan := func() int {
		res, err := Scan(context.Background(), cfg)
		if err != nil {
			t.Error(err)
		}
		return len(res.Found)
	}
	time.Sleep(filecache.SettleTime + 100*time.Millisecond)
	scan() // the home settled: its index is written
	time.Sleep(filecache.SettleTime + 100*time.Millisecond)
	scan() // the index settled: kept
	var st syscall.Stat_t
	if err := syscall.Stat(idx, &st); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	kept, ok := c.files.Get(cfg.UID, idx, filecache.StatOf(&st), data)
	if !ok {
		t.Fatal("the settled index was not kept")
	}
	var before bytes.Buffer
	if err := gob.NewEncoder(&before).Encode(kept); err != nil {
		t.Fatal(err)
	}
	// All at once, before scans that each start from the kept index
	// (the first of them to end writes the next one).
	for _, change := range []func() error{
		func() error { return os.WriteFile(key, []byte("-----BEGIN OPENSSH PRIVATE KEY----- no more\n"), 0o600) },
		func() error {
			return os.WriteFile(filepath.Join(home, ".netrc"), []byte("machine m password p\n"), 0o600)
		},
		func() error { return os.MkdirAll(filepath.Join(home, "a", "c"), 0o700) },
	} {
		if err := change(); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); scan() }()
	}
	wg.Wait()
	var after bytes.Buffer
	if err := gob.NewEncoder(&after).Encode(kept); err != nil {
		t.Fatal(err)
	}
	// Compared decoded: gob writes a map in no fixed order.
	var was, is index
	if gob.NewDecoder(&before).Decode(&was) != nil || gob.NewDecoder(&after).Decode(&is) != nil {
		t.Fatal("the kept index does not decode")
	}
	if !reflect.DeepEqual(was, is) {
		t.Fatal("scans through the cache changed the index it keeps")
	}
	if n := scan(); n != 2 {
		t.Fatalf("found %d stores, want 2 (.netrc, and id_rsa by its name)", n)
	}
}
