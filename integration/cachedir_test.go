package integration

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cacheRoot is where the env's private caches are.
func (e *env) cacheRoot() string {
	return filepath.Join(e.home, ".local", "state", "sandboxd", "cache")
}

// diskUsage is du's answer for dir, in bytes.
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	out, err := exec.Command("du", "-s", "-B1", dir).Output()
	if err != nil {
		return 0 // gone
	}
	var n int64
	for _, c := range strings.Fields(string(out))[0] {
		n = n*10 + int64(c-'0')
	}
	return n
}

// TestCacheSizeLimit: a run that writes 100 MiB into its private Go
// build cache under limits.cache_size = 16MiB leaves the caches within
// 16 MiB on the host disk once it ends; `sandboxd cache list` names the
// workspace of each cache, and `prune --all` removes every cache but one a
// run is using.
func TestCacheSizeLimit(t *testing.T) {
	// Serial: it lists the caches while another run is in its few seconds of use.
	forEach(t, func(t *testing.T, e *env) {
		pol := writePolicy(t, e, "cache.toml", "[limits]\ncache_size = \"16MiB\"\n")
		e.sandboxdOpts(runOpts{}, "run", "--policy", pol, "-c", `mkdir -p "$GOCACHE/junk" && head -c 104857600 /dev/urandom > "$GOCACHE/junk/big" && echo wrote`).mustSucceed(t)
		if n := diskUsage(t, e.cacheRoot()); n > 16<<20 {
			t.Fatalf("the private caches take %d bytes on the host after the run, over limits.cache_size (16 MiB)", n)
		}

		// Two workspaces' caches, one of them in use by a running command.
		other := e.mkdir("other", 0o755)
		e.sandboxdOpts(runOpts{}, "run", "-c", `mkdir -p "$GOCACHE" && echo x > "$GOCACHE/small"`).mustSucceed(t)
		done := make(chan result, 1)
		go func() {
			done <- e.sandboxdOpts(runOpts{dir: other}, "run", "--workspace", other, "-c", `mkdir -p "$GOCACHE" && echo y > "$GOCACHE/small"; sleep 4`)
		}()
		time.Sleep(1500 * time.Millisecond)
		list := e.sandboxdOpts(runOpts{noReport: true}, "cache", "list", "--json").mustSucceed(t)
		var got struct {
			Caches []struct {
				Workspace string `json:"workspace"`
				InUse     bool   `json:"in_use"`
			} `json:"caches"`
		}
		if err := json.Unmarshal([]byte(list.stdout), &got); err != nil {
			t.Fatalf("cache list --json: %v\n%s", err, list)
		}
		seen := map[string]bool{}
		for _, c := range got.Caches {
			seen[c.Workspace] = c.InUse
		}
		if inUse, ok := seen[other]; !ok || !inUse {
			t.Errorf("cache list: want %s in use: %+v", other, got.Caches)
		}
		if _, ok := seen[e.ws]; !ok {
			t.Errorf("cache list: no cache for %s: %+v", e.ws, got.Caches)
		}
		e.sandboxdOpts(runOpts{noReport: true}, "cache", "prune", "--all").mustSucceed(t)
		left := e.sandboxdOpts(runOpts{noReport: true}, "cache", "list", "--json").mustSucceed(t)
		if strings.Contains(left.stdout, `"workspace": "`+e.ws+`"`) || !strings.Contains(left.stdout, `"workspace": "`+other+`"`) {
			t.Errorf("after prune --all: want only the cache in use (%s)\n%s", other, left.stdout)
		}
		if r := <-done; r.code != 0 {
			t.Errorf("the run whose cache was in use failed\n%s", r)
		}
	})
}
