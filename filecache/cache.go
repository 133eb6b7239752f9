package filecache

import (
	"bytes"
	"sync"
	"syscall"
	"time"
)

// SettleTime is how long before a read a file must have last changed for
// what was read to be trusted by its change times: a write within the
// same tick of the file system's clock can leave size, mtime and ctime
// as they were.
const SettleTime = 2 * time.Second

// Stat is what says a file is as it was: its identity and the times and
// size any write changes.
type Stat struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds
}

// StatOf is the Stat of st.
func StatOf(st *syscall.Stat_t) Stat {
	return Stat{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// Size is the file's size.
func (s Stat) Size() int64 { return s.size }

// settled reports whether the file s describes last changed (content or
// metadata, by its mtime and ctime) more than SettleTime before start,
// by the real clock: a later write then has change times no tick can
// confuse with these.
func (s Stat) settled(start time.Time) bool {
	limit := start.Add(-SettleTime).UnixNano()
	return s.mtime < limit && s.ctime < limit
}

// Cache keeps values made of files, by the uid that read each file and
// its path, bounded in entries and in the files' bytes (the least
// recently used leaving first). It is safe for concurrent use; a kept
// value must be read only.
type Cache[V any] struct {
	maxEntries int
	maxBytes   int64

	mu sync.Mutex // guards entries, tick and bytes
	// entries are the kept values by reader and path.
	entries map[ref]*entry[V]
	// tick orders uses, for evicting the least recent.
	tick uint64
	// bytes is the sum of the kept files' sizes.
	bytes int64
}

// ref names one reader's file.
type ref struct {
	uid  int
	path string
}

// entry is a value and the file as it was when the value was made: its
// stat and its bytes (a write through a shared mapping changes no time
// the stat holds: on tmpfs never, elsewhere not while the page stays
// dirty).
type entry[V any] struct {
	stat Stat
	data []byte
	v    V
	used uint64
}

// New returns an empty Cache that keeps at most maxEntries values, of
// files of maxBytes all told.
func New[V any](maxEntries int, maxBytes int64) *Cache[V] {
	return &Cache[V]{maxEntries: maxEntries, maxBytes: maxBytes, entries: map[ref]*entry[V]{}}
}

// Get returns the value kept for uid's file path as st describes it now
// and data, the whole file read now, holds it.
func (c *Cache[V]) Get(uid int, path string, st Stat, data []byte) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[ref{uid, path}]
	if e == nil || e.stat != st || !bytes.Equal(e.data, data) {
		var zero V
		return zero, false
	}
	c.tick++
	e.used = c.tick
	return e.v, true
}

// Keep keeps v, made of data, what was read of uid's file path as st
// (taken after start) describes it, when that is the whole file and the
// file had settled before start; otherwise it forgets what was kept for
// the file. Only a value made without error may be given, and data must
// not change after.
func (c *Cache[V]) Keep(uid int, path string, st Stat, start time.Time, data []byte, v V) {
	if int64(len(data)) != st.size || !st.settled(start) {
		c.Forget(uid, path)
		return
	}
	c.put(ref{uid, path}, st, data, v)
}

// put keeps v for r, evicting the least recently used entries while the
// bounds would be passed; a file larger than the byte bound is not kept.
func (c *Cache[V]) put(r ref, st Stat, data []byte, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(r)
	if st.size > c.maxBytes {
		return
	}
	for len(c.entries) > 0 && (len(c.entries) >= c.maxEntries || c.bytes+st.size > c.maxBytes) {
		var oldest ref
		first := true
		for r, e := range c.entries {
			if first || e.used < c.entries[oldest].used {
				oldest, first = r, false
			}
		}
		c.forgetLocked(oldest)
	}
	c.tick++
	c.entries[r] = &entry[V]{stat: st, data: data, v: v, used: c.tick}
	c.bytes += st.size
}

// Forget drops what is kept for uid's file path.
func (c *Cache[V]) Forget(uid int, path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(ref{uid, path})
}

// forgetLocked is Forget with c.mu held.
func (c *Cache[V]) forgetLocked(r ref) {
	if e := c.entries[r]; e != nil {
		c.bytes -= e.stat.size
		delete(c.entries, r)
	}
}

// Len is how many values c keeps, and their files' bytes.
func (c *Cache[V]) Len() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.bytes
}

// Kept reports whether c keeps a value for uid's file path, as the file
// was whatever it is now.
func (c *Cache[V]) Kept(uid int, path string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[ref{uid, path}] != nil
}
