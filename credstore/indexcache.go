package credstore

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Index cache bounds: how many decoded indexes an IndexCache keeps, and
// how many bytes of index files, all told (a decoded index takes a few
// times its file's size).
const (
	maxCachedIndexes = 32
	maxCachedBytes   = 16 << 20
)

// maxIndexBytes bounds an index file that is read: one of the scan's
// bounds (maxEntries directories) takes well under it.
const maxIndexBytes = 256 << 20

// errIndexTooLarge refuses an index file over maxIndexBytes.
var errIndexTooLarge = fmt.Errorf("credstore: the index is over %d MiB", maxIndexBytes>>20)

// settleTime is how long before a read a file must have last changed for
// what was read to be trusted by its change time: a change within the
// same tick of the file system's clock can leave size, mtime and ctime
// as they were.
const settleTime = 2 * time.Second

// IndexCache keeps the indexes that Scan read, decoded, for a process
// that scans again and again (the daemon): an index file whose identity
// and stat are as when it was decoded is not decoded again. Each entry
// belongs to the uid that read it (ScanConfig.UID) and is given to no
// other; the file is still opened, as the caller, on every scan (what the
// caller may no longer read is not read from memory), and a file that
// changed within settleTime of its read is never kept.
//
// It is safe for concurrent use; a kept index is read only.
type IndexCache struct {
	mu sync.Mutex // guards entries, tick and bytes
	// entries are the decoded indexes by reader and path.
	entries map[indexRef]*cachedIndex
	// tick orders uses, for evicting the least recent.
	tick uint64
	// bytes is the sum of the kept indexes' file sizes.
	bytes int64
	// rules is the part of every index's key that depends on the
	// package's rules alone (made once: formatting them is most of
	// making a key).
	rulesOnce sync.Once
	rules     string
}

// indexRef names one caller's index file.
type indexRef struct {
	uid  int
	path string
}

// cachedIndex is an index file as it was when decoded.
type cachedIndex struct {
	stat fileStat
	x    *index
	used uint64
}

// fileStat is what says a file is as it was: its identity and the
// times and size any write changes.
type fileStat struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds
}

// NewIndexCache returns an empty IndexCache.
func NewIndexCache() *IndexCache {
	return &IndexCache{entries: map[indexRef]*cachedIndex{}}
}

// get returns the index ref kept for st, or nil.
func (c *IndexCache) get(ref indexRef, st fileStat) *index {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[ref]
	if e == nil || e.stat != st {
		return nil
	}
	c.tick++
	e.used = c.tick
	return e.x
}

// put keeps x, decoded from the file ref as st describes it, evicting the
// least recently used entries while the bounds would be passed. A file
// larger than the whole byte bound is not kept.
func (c *IndexCache) put(ref indexRef, st fileStat, x *index) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(ref)
	if st.size > maxCachedBytes {
		return
	}
	for len(c.entries) > 0 && (len(c.entries) >= maxCachedIndexes || c.bytes+st.size > maxCachedBytes) {
		var oldest indexRef
		first := true
		for r, e := range c.entries {
			if first || e.used < c.entries[oldest].used {
				oldest, first = r, false
			}
		}
		c.forgetLocked(oldest)
	}
	c.tick++
	c.entries[ref] = &cachedIndex{stat: st, x: x, used: c.tick}
	c.bytes += st.size
}

// forget drops what is kept for ref.
func (c *IndexCache) forget(ref indexRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(ref)
}

// forgetLocked is forget with c.mu held.
func (c *IndexCache) forgetLocked(ref indexRef) {
	if e := c.entries[ref]; e != nil {
		c.bytes -= e.stat.size
		delete(c.entries, ref)
	}
}

// readIndex returns the index in the file p, through cache when it is
// not nil: the file is opened (as whoever calls, for uid) and described,
// and decoded only when cache holds nothing for it as it is now. A file
// is kept only when it last changed settleTime before it was read, by
// the real clock (never a test's).
func readIndex(p string, uid int, cache *IndexCache) (*index, error) {
	// O_NONBLOCK: a fifo put in the index's place is refused below,
	// not waited on.
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errors.New("credstore: the index is not a regular file")
	}
	if st.Size > maxIndexBytes {
		// The file is the caller's to write: a daemon must not read
		// whatever size the caller made it. The scan starts afresh and
		// writes an index of its own bounds in its place.
		return nil, errIndexTooLarge
	}
	fst := fileStat{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
	ref := indexRef{uid: uid, path: p}
	if cache != nil {
		if x := cache.get(ref, fst); x != nil {
			return x, nil
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxIndexBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxIndexBytes {
		return nil, errIndexTooLarge
	}
	var x index
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&x); err != nil {
		return nil, err
	}
	if cache != nil {
		if int64(len(b)) == fst.size && time.Now().UnixNano()-fst.ctime > int64(settleTime) {
			cache.put(ref, fst, &x)
		} else {
			cache.forget(ref)
		}
	}
	return &x, nil
}

// rulesKey is the rules' part of an index key, made once per cache.
func (c *IndexCache) rulesKey(pats []namePattern) string {
	if c == nil {
		return rulesText(pats)
	}
	c.rulesOnce.Do(func() { c.rules = rulesText(pats) })
	return c.rules
}
