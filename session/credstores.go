package session

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/credstore"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/policy"
)

// foundStores returns the credential stores the name class finds in the
// caller's home and XDG directories that the run must deny besides the
// policy's secrets: not in the workspace (the project's own files), not
// already inside a secret, not on the quiet list (histories kept
// writable by design), not allowed by the policy's allow_secrets. A
// found symlink is listed with its target. note says what was not
// scanned, if anything. The scan's index is decoded through the Runner's
// cache, the caller's entries only.
func (r *Runner) foundStores(ctx context.Context, c Caller, p *plan) (paths []string, note string, err error) {
	if c.Home == "/" {
		// A service account's home: the whole file system is no home to
		// scan by name (the documented stores are denied all the same).
		return nil, "HOME is /: the home is not scanned for credential stores by name", nil
	}
	def := func(rel string) string { return filepath.Join(c.Home, rel) }
	var covered []string
	for _, s := range p.policy.Secrets {
		if !strings.ContainsAny(filepath.Base(s), "*?[") {
			covered = append(covered, s)
		}
	}
	cache := def(".cache")
	if x := c.Getenv("XDG_CACHE_HOME"); filepath.IsAbs(x) {
		cache = filepath.Clean(x)
	}
	cfg := credstore.ScanConfig{
		Home: c.Home,
		StateDirs: []string{c.ConfigHome, def(".config"), c.DataHome, def(".local/share"),
			c.StateHome, def(".local/state"), cache, def(".cache")},
		CacheDirs: []string{cache, def(".cache")},
		Covered:   covered,
		Skip:      depTrees(c),
		Index:     c.Layout().CredIndex(),
		Cache:     r.indexes,
		UID:       c.UID,
	}
	res, err := credstore.Scan(ctx, cfg)
	if err != nil {
		return nil, "", err
	}
	// Only the built-in quiet histories are kept readable by design: a
	// [quiet] entry of the user's quiets writes, it never opens a store.
	var quiet []broker.Rule
	for _, q := range policy.DefaultQuiet() {
		target := q.Pattern
		if strings.HasPrefix(target, "~/") {
			target = filepath.Join(c.Home, target[2:])
		}
		quiet = append(quiet, broker.Rule{Surface: boundary.Filesystem, Operation: "*", Target: target})
	}
	var secrets, allowed pathList
	if len(res.Found) > 0 {
		secrets, allowed = newPathList(p.policy.Secrets), newPathList(p.policy.AllowSecrets)
	}
	for _, f := range res.Found {
		req := grants.Request{Surface: boundary.Filesystem, Operation: boundary.OpWriteFile, Path: f.Path}
		switch {
		case broker.Within(f.Path, p.ws), secrets.has(f.Path), allowed.has(f.Path):
			continue
		case matchesAny(quiet, req):
			continue
		}
		paths = append(paths, f.Path)
		if real, err := filepath.EvalSymlinks(f.Path); err == nil && real != f.Path && !broker.Within(real, p.ws) {
			paths = append(paths, real)
		}
	}
	return paths, res.Partial, nil
}

// pathList is a list of paths whose last element may be a glob, made
// ready for has: each plain path cleaned once (a policy has a few
// hundred secrets; each found store is looked up in them).
type pathList struct {
	plain []string // cleaned
	globs []string // as given
}

func newPathList(list []string) pathList {
	var l pathList
	for _, s := range list {
		if c := filepath.Clean(s); strings.ContainsAny(filepath.Base(c), "*?[") {
			l.globs = append(l.globs, s)
		} else {
			l.plain = append(l.plain, c)
		}
	}
	return l
}

// has reports whether f is within one of the list's paths, as
// broker.Within(f, s) says for some s of the list.
func (l pathList) has(f string) bool {
	if pathtree.WithinAny(filepath.Clean(f), l.plain) {
		return true
	}
	for _, g := range l.globs {
		if broker.Within(f, g) {
			return true
		}
	}
	return false
}

// depTrees are where the caller's variables put package managers' and
// toolchains' trees, which the scan leaves alone (their defaults under
// the home are credstore's own list).
func depTrees(c Caller) []string {
	var out []string
	add := func(v string, rel ...string) {
		for _, d := range filepath.SplitList(c.Getenv(v)) {
			if filepath.IsAbs(d) {
				out = append(out, filepath.Join(append([]string{d}, rel...)...))
			}
		}
	}
	add("GOMODCACHE")
	add("GOPATH", "pkg", "mod")
	add("GRADLE_USER_HOME", "caches")
	add("CARGO_HOME", "registry")
	add("CARGO_HOME", "git")
	add("RUSTUP_HOME")
	add("npm_config_cache")
	add("PIP_CACHE_DIR")
	add("UV_CACHE_DIR")
	add("MAVEN_REPO_LOCAL")
	return out
}

func matchesAny(rules []broker.Rule, req grants.Request) bool {
	for _, r := range rules {
		if r.Matches(req) {
			return true
		}
	}
	return false
}
