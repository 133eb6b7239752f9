package policy

import "github.com/sandboxd/sandboxd/filecache"

// Cache bounds: how many parsed policy files a Cache keeps, and how many
// bytes of policy files, all told (a parsed file takes a few times its
// file's size).
const (
	maxCachedFiles = 64
	maxCachedBytes = 4 << 20
)

// Cache keeps policy files parsed, for a process that loads policies
// again and again (the daemon): a file whose identity, stat and bytes
// are as when it was parsed is not parsed again (it is read on every
// load: a write through a shared mapping changes no time). What is kept is a
// pure function of the file's name and bytes (the keys it sets, decoded
// and validated); merging, tightening and resolving are done anew on
// every load.
//
// Each entry belongs to the uid that read it and is given to no other;
// the file is still opened and described, as whoever loads (the
// caller), on every load, with every check of its kind (a workspace
// policy's symbolic link and hard links); a file that changed within
// filecache.SettleTime of its read is never kept.
//
// It is safe for concurrent use; a kept file is read only.
type Cache struct {
	// schema is Policy's, made once.
	schema *schema
	files  *filecache.Cache[*parsedFile]
}

// NewCache returns an empty Cache.
func NewCache() *Cache {
	return &Cache{schema: newSchema(), files: filecache.New[*parsedFile](maxCachedFiles, maxCachedBytes)}
}

// Load is LoadUnder for the caller uid, with the files' parsed forms
// kept in c (see Cache). It must run as that caller.
func (c *Cache) Load(uid int, m *Machine, userPath string, userExplicit bool, wsPaths ...string) (Policy, error) {
	return loader{cache: c, uid: uid, schema: c.schema}.load(m, userPath, userExplicit, wsPaths)
}
