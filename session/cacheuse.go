package session

import (
	"os"
	"path/filepath"
	"time"

	"github.com/sandboxd/sandboxd/cachedir"
	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/policy"
)

// The private caches on disk: a run marks its workspace's cache in use
// (cachedir.Use), and after it the least recently used caches of every
// workspace are removed until they fit limits.cache_size. Measuring them
// walks every cache, so a run does it only when the last measure (the
// stamp's time) is older than pruneEvery.

// pruneEvery is how often, at most, a run measures the caches.
const pruneEvery = 10 * time.Minute

// useCache marks the run's cache in use; the returned function releases
// it and prunes.
func (st *run) useCache() func() {
	root := st.caller.Layout().Caches()
	if len(st.plan.spec.Caches) == 0 {
		return func() {}
	}
	// Marked, released and pruned as the caller: its own files.
	id := st.caller.ID()
	var release func()
	err := fsid.Do(id, func() (err error) {
		release, err = cachedir.Use(root, st.plan.spec.Caches[0], st.plan.ws)
		return err
	})
	if err != nil {
		st.r.log.Debug("cache not recorded", "err", err)
		release = func() {}
	}
	st.mark("cache marked in use")
	return func() {
		fsid.Do(id, func() error { release(); return nil })
		st.pruneCaches(root)
		st.mark("cache released")
	}
}

// pruneCaches removes least recently used caches over limits.cache_size.
func (st *run) pruneCaches(root string) {
	max := int64(st.plan.policy.Limits.CacheSize)
	if max <= 0 {
		return
	}
	// As the caller: its caches, removed with its rights.
	err := fsid.Do(st.caller.ID(), func() error {
		stamp := filepath.Join(root, ".pruned")
		if info, err := os.Stat(stamp); err == nil && time.Since(info.ModTime()) < pruneEvery {
			return nil
		}
		removed, err := cachedir.Prune(root, max)
		if err != nil {
			st.r.log.Debug("cache prune", "err", err)
		}
		for _, e := range removed {
			st.r.log.Debug("cache removed", "id", e.ID, "workspace", e.Workspace, "bytes", e.Size)
		}
		os.WriteFile(stamp, nil, 0o600)
		now := time.Now()
		return os.Chtimes(stamp, now, now)
	})
	if err != nil {
		st.r.log.Debug("cache prune", "err", err)
	}
}

// CacheSize is limits.cache_size of the caller's own policy (policyPath,
// or the default file when empty).
func (c Caller) CacheSize(policyPath string) (int64, error) {
	explicit := policyPath != ""
	if !explicit {
		policyPath = c.Layout().Policy()
	}
	pol, err := policy.Load(policyPath, explicit)
	if err != nil {
		return 0, policyUnusable(err)
	}
	return int64(pol.Limits.CacheSize), nil
}
