package session

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/envlist"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Host tool caches reused read-only. Each private cache below the
// workspace's cache root may show the caller's own host cache as an
// overlay's lower layer. Where the host keeps each one is found here,
// from the caller's environment and files the way the tool itself finds
// it, never by running a program: the workspace could choose which
// program (go.mod's toolchain line), and running it would be an escape.
// Anything uncertain means no host cache. Whether the one found may be
// the lower layer the run decides (sandbox's caches.go).

// toolCache is one tool's cache, private and on the host.
type toolCache struct {
	name string // the report's name, and its private layer's
	rel  string // the private cache, relative to the cache root
	host string // the host cache, absolute and clean; "" when none
	why  string // why host is ""
}

// maxGoEnv bounds the go env file sandboxd reads.
const maxGoEnv = 1 << 20

// toolCaches finds the host caches in env (the caller's, last entry
// wins) with home as $HOME.
func toolCaches(env []string, home string) []toolCache {
	get := lookup(env)
	goenv, goWhy := readGoEnv(get, home)
	cs := []toolCache{
		{name: "go-build", rel: "go-build"},
		{name: "go-mod", rel: "go-mod"},
		{name: "npm", rel: "npm/_cacache"},
		{name: "pip", rel: "pip"},
		// pnpm's content-addressable store (its store-dir setting,
		// ~/.local/share/pnpm/store by default): outside every writable
		// root, so each install was refused. Private only: where the
		// host's is depends on .npmrc files and pnpm's version
		// directory, so none is shown underneath.
		{name: "pnpm", rel: "pnpm-store", why: "pnpm's host store is not shown (private store only)"},
	}
	cs[0].host, cs[0].why = goBuildCache(get, goenv, home)
	cs[1].host, cs[1].why = goModCache(get, goenv, home)
	if goWhy != "" {
		cs[0].host, cs[0].why = "", goWhy
		cs[1].host, cs[1].why = "", goWhy
	}
	cs[2].host, cs[2].why = npmCache(env, home)
	cs[3].host, cs[3].why = pipCache(env, get, home)
	return cs
}

// lookup returns the value of the last entry of key in env.
func lookup(env []string) func(string) string {
	return func(key string) string { return envlist.Get(env, key) }
}

// goEnvFile is the go command's env file (GOENV), as cmd/go finds it:
// "" when there is none.
func goEnvFile(get func(string) string, home string) (file, why string) {
	switch v := get("GOENV"); {
	case v == "off":
		return "", ""
	case v != "" && !filepath.IsAbs(v):
		return "", "GOENV is not an absolute path"
	case v != "":
		return filepath.Clean(v), ""
	}
	dir := get("XDG_CONFIG_HOME")
	switch {
	case dir == "" && home == "":
		return "", ""
	case dir == "":
		dir = filepath.Join(home, ".config")
	case !filepath.IsAbs(dir):
		return "", "" // os.UserConfigDir fails: go reads no env file
	}
	return filepath.Join(dir, "go", "env"), ""
}

// readGoEnv reads the go env file's KEY=VALUE lines as cmd/go does (a
// line must start with an upper-case letter; a later line wins). A file
// that exists but cannot be read makes both Go caches uncertain.
func readGoEnv(get func(string) string, home string) (map[string]string, string) {
	file, why := goEnvFile(get, home)
	if file == "" {
		return nil, why
	}
	f, err := os.Open(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ""
	}
	if err != nil {
		return nil, "cannot read the go env file " + file
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxGoEnv+1))
	if err != nil || len(data) > maxGoEnv {
		return nil, "cannot read the go env file " + file
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || k == "" || k[0] < 'A' || k[0] > 'Z' {
			continue
		}
		m[k] = v
	}
	return m, ""
}

// goGet is cmd/go's cfg.Getenv: the environment, then the env file.
func goGet(get func(string) string, goenv map[string]string, key string) string {
	if v := get(key); v != "" {
		return v
	}
	return goenv[key]
}

// goBuildCache is cmd/go's cache.DefaultDir.
func goBuildCache(get func(string) string, goenv map[string]string, home string) (string, string) {
	switch v := goGet(get, goenv, "GOCACHE"); {
	case v == "off":
		return "", "GOCACHE=off"
	case v != "" && !filepath.IsAbs(v):
		return "", "GOCACHE is not an absolute path"
	case v != "":
		return filepath.Clean(v), ""
	}
	dir, why := userCacheDir(get, home)
	if dir == "" {
		return "", why
	}
	return filepath.Join(dir, "go-build"), ""
}

// userCacheDir is os.UserCacheDir.
func userCacheDir(get func(string) string, home string) (string, string) {
	dir := get("XDG_CACHE_HOME")
	switch {
	case dir == "" && home == "":
		return "", "no home directory"
	case dir == "":
		return filepath.Join(home, ".cache"), ""
	case !filepath.IsAbs(dir):
		return "", "XDG_CACHE_HOME is not an absolute path"
	}
	return filepath.Clean(dir), ""
}

// goModCache is cmd/go's GOMODCACHE: the variable, else the first GOPATH
// entry's pkg/mod, GOPATH defaulting to ~/go (unless that is GOROOT,
// which only running go could tell: then none).
func goModCache(get func(string) string, goenv map[string]string, home string) (string, string) {
	if v := goGet(get, goenv, "GOMODCACHE"); v != "" {
		if !filepath.IsAbs(v) {
			return "", "GOMODCACHE is not an absolute path"
		}
		return filepath.Clean(v), ""
	}
	gopath := goGet(get, goenv, "GOPATH")
	if gopath == "" {
		if home == "" {
			return "", "no home directory"
		}
		gopath = filepath.Join(home, "go")
		if _, err := os.Stat(filepath.Join(gopath, "src", "runtime")); err == nil {
			return "", "~/go may be GOROOT, not GOPATH"
		}
	}
	first := filepath.SplitList(gopath)[0]
	if !filepath.IsAbs(first) {
		return "", "GOPATH's first entry is not an absolute path"
	}
	return filepath.Join(first, "pkg", "mod"), ""
}

// npmCache is npm's "cache" setting from the environment (any case of
// npm_config_cache; empty values are skipped, a later one wins; "~/" is
// the home), else ~/.npm; its content store is _cacache.
func npmCache(env []string, home string) (string, string) {
	v := ""
	for _, kv := range env {
		if k, val, _ := strings.Cut(kv, "="); isNpmCacheKey(k) && val != "" {
			v = val
		}
	}
	if v == "" {
		v = "~/.npm"
	}
	dir, why := homePath(v, home, "npm's cache")
	if dir == "" {
		return "", why
	}
	return filepath.Join(dir, "_cacache"), ""
}

// pipCache is pip's cache directory: PIP_CACHE_DIR (pip reads "PIP_"
// then any case), else the XDG cache's pip.
func pipCache(env []string, get func(string) string, home string) (string, string) {
	set, v := false, ""
	for _, kv := range env {
		if k, val, _ := strings.Cut(kv, "="); isPipCacheKey(k) {
			set, v = true, val
		}
	}
	if set {
		return homePath(v, home, "PIP_CACHE_DIR")
	}
	dir := get("XDG_CACHE_HOME")
	if strings.TrimSpace(dir) == "" {
		dir = "~/.cache"
	}
	p, why := homePath(dir, home, "XDG_CACHE_HOME")
	if p == "" {
		return "", why
	}
	return filepath.Join(p, "pip"), ""
}

func isNpmCacheKey(k string) bool { return strings.EqualFold(k, "npm_config_cache") }

// isPnpmStoreKey: pnpm's store-dir setting from the environment, in
// either spelling pnpm reads, any case.
func isPnpmStoreKey(k string) bool {
	return strings.EqualFold(k, "npm_config_store_dir") || strings.EqualFold(k, "pnpm_config_store_dir")
}

func isPipCacheKey(k string) bool {
	return strings.HasPrefix(k, "PIP_") && strings.EqualFold(k[4:], "cache_dir")
}

// homePath is an absolute path, or one starting with "~/" (the home).
func homePath(v, home, what string) (string, string) {
	switch {
	case (v == "~" || strings.HasPrefix(v, "~/")) && home != "":
		return filepath.Join(home, strings.TrimPrefix(v, "~")), ""
	case filepath.IsAbs(v):
		return filepath.Clean(v), ""
	}
	return "", what + " is not an absolute path"
}

// cacheLayers names, for each tool cache, its private path under the
// cache root and the host cache the run may show beneath it (the run
// decides whether it does: sandbox's caches.go).
func cacheLayers(c Caller, root string) []sandbox.CacheLayer {
	var out []sandbox.CacheLayer
	for _, tc := range toolCaches(c.Env, c.Home) {
		out = append(out, sandbox.CacheLayer{Name: tc.name, Dir: filepath.Join(root, tc.rel), Host: tc.host, Why: tc.why})
	}
	return out
}

// hostCacheRules are the caller's facts the run needs to decide whether
// a host cache may be a lower layer.
func hostCacheRules(c Caller, p *plan) sandbox.HostCacheRules {
	xdg, _ := userCacheDir(lookup(c.Env), c.Home)
	return sandbox.HostCacheRules{Secrets: p.policy.Secrets, Whole: []string{c.Home, xdg}, Apart: []string{c.Layout().Config}}
}

// withCacheEnv points each tool at its private cache under root, and
// drops the spellings of the same settings the tools also read.
func withCacheEnv(env []string, root string) []string {
	out := envlist.DropFunc(env, func(k string) bool { return isNpmCacheKey(k) || isPipCacheKey(k) || isPnpmStoreKey(k) })
	for _, kv := range [][2]string{
		{"XDG_CACHE_HOME", filepath.Join(root, "xdg")},
		{"GOCACHE", filepath.Join(root, "go-build")},
		{"GOMODCACHE", filepath.Join(root, "go-mod")},
		{"npm_config_cache", filepath.Join(root, "npm")},
		{"PIP_CACHE_DIR", filepath.Join(root, "pip")},
		{"npm_config_store_dir", filepath.Join(root, "pnpm-store")},
	} {
		out = envlist.Set(out, kv[0], kv[1])
	}
	return out
}
