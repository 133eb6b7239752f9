package filecache

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// old is a time long before any test's start: a Stat with it settled.
var old = time.Unix(1_000_000_000, 0).UnixNano()

func stat(ino uint64, size int64) Stat { return Stat{ino: ino, size: size, mtime: old, ctime: old} }

// bytesOf is n bytes of b.
func bytesOf(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

// TestKeep: a value is kept only when it was made of the whole file and
// the file had settled before the read; keeping anything else forgets
// what was kept; a changed Stat is a miss; each reader has its own.
func TestKeep(t *testing.T) {
	now := time.Now()
	c := New[string](8, 1<<20)
	c.Keep(1000, "/p", stat(1, 10), now, bytesOf('a', 10), "a")
	if v, ok := c.Get(1000, "/p", stat(1, 10), bytesOf('a', 10)); !ok || v != "a" {
		t.Fatalf("settled, whole: %q, %v", v, ok)
	}
	// A write the stat does not show (through a shared mapping): the
	// bytes differ.
	if _, ok := c.Get(1000, "/p", stat(1, 10), bytesOf('b', 10)); ok {
		t.Fatal("the value was given for other bytes")
	}
	for name, s := range map[string]Stat{
		"another inode": stat(2, 10), "another size": stat(1, 11),
		"another mtime": {ino: 1, size: 10, mtime: old + 1, ctime: old},
		"another ctime": {ino: 1, size: 10, mtime: old, ctime: old + 1},
		"another dev":   {dev: 1, ino: 1, size: 10, mtime: old, ctime: old},
	} {
		if _, ok := c.Get(1000, "/p", s, bytesOf('a', 10)); ok {
			t.Errorf("%s: the kept value was given", name)
		}
	}
	if _, ok := c.Get(1001, "/p", stat(1, 10), bytesOf('a', 10)); ok {
		t.Fatal("uid 1001 was given uid 1000's value")
	}
	recent := Stat{ino: 1, size: 10, mtime: old, ctime: now.Add(-SettleTime / 2).UnixNano()}
	c.Keep(1000, "/p", recent, now, bytesOf('b', 10), "b")
	if c.Kept(1000, "/p") {
		t.Fatal("a file changed within SettleTime of its read was kept (or the old value stayed)")
	}
	c.Keep(1000, "/p", stat(1, 10), now, bytesOf('a', 10), "a")
	c.Keep(1000, "/p", stat(1, 10), now, bytesOf('a', 9), "short")
	if c.Kept(1000, "/p") {
		t.Fatal("a value made of part of the file was kept (or the old value stayed)")
	}
	recentM := Stat{ino: 1, size: 10, mtime: now.UnixNano(), ctime: old}
	if c.Keep(1000, "/p", recentM, now, bytesOf('m', 10), "m"); c.Kept(1000, "/p") {
		t.Fatal("a file whose mtime is recent was kept")
	}
}

// TestStatOf: a real file's Stat changes with a write of the same size,
// its mtime put back (the ctime moves).
func TestStatOf(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	describe := func() Stat {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		return StatOf(&st)
	}
	os.WriteFile(p, []byte("one"), 0o600)
	before, info := describe(), must(os.Stat(p))
	time.Sleep(10 * time.Millisecond)
	os.WriteFile(p, []byte("two"), 0o600)
	os.Chtimes(p, info.ModTime(), info.ModTime())
	if after := describe(); after == before || after.Size() != 3 {
		t.Fatalf("a rewrite was not seen: %+v, %+v", before, after)
	}
}

func must(fi os.FileInfo, err error) os.FileInfo {
	if err != nil {
		panic(err)
	}
	return fi
}

// TestBounds: the entries and their bytes stay within the bounds, the
// least recently used going first; a file larger than the byte bound is
// not kept and evicts nothing.
func TestBounds(t *testing.T) {
	now := time.Now()
	c := New[int](4, 1000)
	for i := range 6 {
		c.Keep(i%3, fmt.Sprint("/p/", i), stat(uint64(i), 100), now, bytesOf('p', 100), i)
		if i > 0 {
			c.Get(0, "/p/0", stat(0, 100), bytesOf('p', 100)) // stays in use
		}
	}
	if n, b := c.Len(); n != 4 || b != 400 {
		t.Fatalf("%d entries of %d bytes, want 4 of 400", n, b)
	}
	if !c.Kept(0, "/p/0") || c.Kept(1, "/p/1") {
		t.Fatal("the entry in use was evicted, or the least recent kept")
	}
	c.Keep(9, "/big", stat(9, 700), now, bytesOf('b', 700), 9)
	if n, b := c.Len(); b > 1000 || n > 4 || !c.Kept(9, "/big") {
		t.Fatalf("%d entries of %d bytes after a big one", n, b)
	}
	c.Keep(9, "/huge", stat(10, 1001), now, bytesOf('h', 1001), 10)
	if c.Kept(9, "/huge") || !c.Kept(9, "/big") {
		t.Fatal("a file over the byte bound was kept, or evicted another")
	}
	c.Forget(9, "/big")
	if _, b := c.Len(); b > 300 {
		t.Fatalf("after a forget: %d bytes counted", b)
	}
}
