package credstore

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/filecache"
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

// IndexCache keeps the indexes that Scan read, decoded, for a process
// that scans again and again (the daemon): an index file whose identity
// stat and bytes are as when it was decoded is not decoded again. Each entry
// belongs to the uid that read it (ScanConfig.UID) and is given to no
// other; the file is still opened, as the caller, on every scan (what the
// caller may no longer read is not read from memory), and a file that
// changed within filecache.SettleTime of its read is never kept.
//
// It is safe for concurrent use; a kept index is read only.
type IndexCache struct {
	files *filecache.Cache[*index]
	// rules is the part of every index's key that depends on the
	// package's rules alone (made once: formatting them is most of
	// making a key), and pats the name class they were made of (made
	// once too; read only).
	rulesOnce sync.Once
	rules     string
	pats      []namePattern

	mu sync.Mutex // guards keys
	// keys are the index keys of the last scans' configurations, most
	// recent last (maxCachedKeys at most): a key is a hash of the
	// configuration's text, the same for the same configuration.
	keys []cachedKey
}

// maxCachedKeys bounds IndexCache.keys: a few configurations per caller
// (the environment moves the XDG directories) for a few callers.
const maxCachedKeys = 16

// cachedKey is one configuration's index key.
type cachedKey struct {
	home                          string
	stateDirs, cacheDirs, covered []string
	skip                          []string
	key                           string
}

// NewIndexCache returns an empty IndexCache.
func NewIndexCache() *IndexCache {
	return &IndexCache{files: filecache.New[*index](maxCachedIndexes, maxCachedBytes)}
}

// readIndex returns the index in the file p, through cache when it is
// not nil: the file is opened (as whoever calls, for uid), described and
// read, and decoded only when cache holds nothing for it as it is now. A file
// is kept only when it last changed (its mtime and its ctime) more than
// filecache.SettleTime before it was described, by the real clock (never
// a test's).
func readIndex(p string, uid int, cache *IndexCache) (*index, error) {
	start := time.Now()
	// O_NONBLOCK: a fifo put in the index's place is refused below,
	// not waited on.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, errors.New("credstore: the index is not a regular file")
	}
	if st.Size > maxIndexBytes {
		// The file is the caller's to write: a daemon must not read
		// whatever size the caller made it. The scan starts afresh and
		// writes an index of its own bounds in its place.
		return nil, errIndexTooLarge
	}
	// Room for the whole file as described and ReadFrom's last read,
	// which sees the end: the file is read into one allocation.
	buf := bytes.NewBuffer(make([]byte, 0, st.Size+bytes.MinRead))
	if _, err := buf.ReadFrom(io.LimitReader(f, maxIndexBytes+1)); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	if len(b) > maxIndexBytes {
		return nil, errIndexTooLarge
	}
	fst := filecache.StatOf(&st)
	if cache != nil {
		if x, ok := cache.files.Get(uid, p, fst, b); ok {
			return x, nil
		}
	}
	var x index
	if err := gob.NewDecoder(bytes.NewReader(b)).Decode(&x); err != nil {
		if cache != nil {
			cache.files.Forget(uid, p)
		}
		return nil, err
	}
	if cache != nil {
		cache.files.Keep(uid, p, fst, start, b, &x)
	}
	return &x, nil
}

// patterns returns the name class and the rules' part of an index key:
// made once per cache, for every scan without one.
func (c *IndexCache) patterns() ([]namePattern, string) {
	if c == nil {
		pats := namePatterns()
		return pats, rulesText(pats)
	}
	c.rulesOnce.Do(func() {
		c.pats = namePatterns()
		c.rules = rulesText(c.pats)
	})
	return c.pats, c.rules
}

// key returns the index key of cfg's configuration, made by mk when no
// scan through c made it before for a configuration equal to cfg's in
// every field the key is made of.
func (c *IndexCache) key(cfg *ScanConfig, mk func() string) string {
	if c == nil {
		return mk()
	}
	same := func(k *cachedKey) bool {
		return k.home == cfg.Home && slices.Equal(k.stateDirs, cfg.StateDirs) && slices.Equal(k.cacheDirs, cfg.CacheDirs) &&
			slices.Equal(k.covered, cfg.Covered) && slices.Equal(k.skip, cfg.Skip)
	}
	c.mu.Lock()
	for i := len(c.keys) - 1; i >= 0; i-- {
		if same(&c.keys[i]) {
			k := c.keys[i].key
			c.mu.Unlock()
			return k
		}
	}
	c.mu.Unlock()
	key := mk()
	// Copies: the caller may reuse its slices.
	k := cachedKey{home: cfg.Home, stateDirs: slices.Clone(cfg.StateDirs), cacheDirs: slices.Clone(cfg.CacheDirs),
		covered: slices.Clone(cfg.Covered), skip: slices.Clone(cfg.Skip), key: key}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.keys) >= maxCachedKeys {
		c.keys = slices.Delete(c.keys, 0, 1)
	}
	c.keys = append(c.keys, k)
	return key
}
