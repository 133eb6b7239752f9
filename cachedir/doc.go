// Package cachedir keeps the private tool caches of sandboxd's runs: one
// directory per workspace under STATE/cache (GOCACHE, GOMODCACHE, npm's
// and pip's caches, XDG_CACHE_HOME), a record beside each of the
// workspace it belongs to and when a run last used it, and
// least-recently-used pruning to a total size (limits.cache_size).
//
// The record (ID.use) is outside the directory the command sees, so the
// command cannot forge it; a run holds it locked shared while it uses the
// cache, and pruning removes only caches whose record it can lock
// exclusively, so a cache in use is never removed.
//
// Of sandboxd's packages it imports only publicerr.
package cachedir
