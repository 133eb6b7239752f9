package policy

import (
	"sync"
	"syscall"
	"time"
)

// Cache bounds: how many parsed policy files a Cache keeps, and how many
// bytes of policy files, all told (a parsed file takes a few times its
// file's size).
const (
	maxCachedFiles = 64
	maxCachedBytes = 4 << 20
)

// settleTime is how long before a read a policy file must have last
// changed for what was read to be trusted by its change time: a write
// within the same tick of the file system's clock can leave size, mtime
// and ctime as they were (credstore.IndexCache keeps the same rule).
const settleTime = 2 * time.Second

// Cache keeps policy files parsed, for a process that loads policies
// again and again (the daemon): a file whose identity and stat are as
// when it was parsed is not read or parsed again. What is kept is a
// pure function of the file's name and bytes (the keys it sets, decoded
// and validated); merging, tightening and resolving are done anew on
// every load.
//
// Each entry belongs to the uid that read it and is given to no other;
// the file is still opened and described, as whoever loads (the
// caller), on every load, with every check of its kind (a workspace
// policy's symbolic link and hard links); a file that changed within
// settleTime of its read is never kept.
//
// It is safe for concurrent use; a kept file is read only.
type Cache struct {
	// schema is Policy's, made once.
	schema *schema

	mu sync.Mutex // guards entries, tick and bytes
	// entries are the parsed files by reader and path.
	entries map[fileRef]*cachedFile
	// tick orders uses, for evicting the least recent.
	tick uint64
	// bytes is the sum of the kept files' sizes.
	bytes int64
}

// fileRef names one caller's policy file.
type fileRef struct {
	uid  int
	path string
}

// cachedFile is a policy file as it was when parsed.
type cachedFile struct {
	stat fileStat
	f    *parsedFile
	used uint64
}

// fileStat is what says a file is as it was: its identity and the
// times and size any write changes.
type fileStat struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds
}

// statOf is the fileStat of st.
func statOf(st *syscall.Stat_t) fileStat {
	return fileStat{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
}

// settled reports whether a file described by st, stat'ed after start,
// may be kept: it last changed (content or metadata, by its mtime and
// ctime) more than settleTime before start, by the real clock. A later
// write then has a change time no tick can confuse with this one.
func (st fileStat) settled(start time.Time) bool {
	limit := start.Add(-settleTime).UnixNano()
	return st.mtime < limit && st.ctime < limit
}

// NewCache returns an empty Cache.
func NewCache() *Cache {
	return &Cache{schema: newSchema(), entries: map[fileRef]*cachedFile{}}
}

// Load is LoadUnder for the caller uid, with the files' parsed forms
// kept in c (see Cache). It must run as that caller.
func (c *Cache) Load(uid int, m *Machine, userPath string, userExplicit bool, wsPaths ...string) (Policy, error) {
	return loader{cache: c, uid: uid, schema: c.schema}.load(m, userPath, userExplicit, wsPaths)
}

// get returns the file kept for ref as st describes it, or nil.
func (c *Cache) get(ref fileRef, st fileStat) *parsedFile {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[ref]
	if e == nil || e.stat != st {
		return nil
	}
	c.tick++
	e.used = c.tick
	return e.f
}

// put keeps f, parsed from the file ref as st describes it, evicting
// the least recently used entries while the bounds would be passed.
func (c *Cache) put(ref fileRef, st fileStat, f *parsedFile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(ref)
	if st.size > maxCachedBytes {
		return
	}
	for len(c.entries) > 0 && (len(c.entries) >= maxCachedFiles || c.bytes+st.size > maxCachedBytes) {
		var oldest fileRef
		first := true
		for r, e := range c.entries {
			if first || e.used < c.entries[oldest].used {
				oldest, first = r, false
			}
		}
		c.forgetLocked(oldest)
	}
	c.tick++
	c.entries[ref] = &cachedFile{stat: st, f: f, used: c.tick}
	c.bytes += st.size
}

// forget drops what is kept for ref.
func (c *Cache) forget(ref fileRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(ref)
}

// forgetLocked is forget with c.mu held.
func (c *Cache) forgetLocked(ref fileRef) {
	if e := c.entries[ref]; e != nil {
		c.bytes -= e.stat.size
		delete(c.entries, ref)
	}
}

// len is how many files c keeps, and their bytes (tests).
func (c *Cache) len() (int, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries), c.bytes
}
