package integration

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Host tool caches reused read-only: each private cache shows the host's
// own cache as an overlay's lower layer, which never changes.

// goHostEnv is what host-side go and npm run with: the env's home and
// nothing else of the test's own environment.
func (e *env) goHostEnv(extra ...string) []string {
	return append([]string{"HOME=" + e.home, "PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
		"GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "npm_config_update_notifier=false"}, extra...)
}

// hostTool runs a program on the host as the env's identity and fails
// the test unless it succeeds.
func (e *env) hostTool(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := e.hostCmd(ctx, dir, name, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("host %s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// treeHash is a digest of everything under root: names, types, modes,
// owners, sizes, modification times, link targets and contents.
func treeHash(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	n := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %o %d:%d %d %d.%d\n", p, st.Mode, st.Uid, st.Gid, st.Size, st.Mtim.Sec, st.Mtim.Nsec)
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		case syscall.S_IFLNK:
			l, _ := os.Readlink(p)
			fmt.Fprintln(h, l)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatalf("hash %s: %v", root, err)
	}
	return fmt.Sprintf("%d entries %x", n, h.Sum(nil))
}

// unchanged records the trees under roots and returns a check that they
// are still the same.
func unchanged(t *testing.T, roots ...string) func() {
	t.Helper()
	before := map[string]string{}
	for _, r := range roots {
		before[r] = treeHash(t, r)
	}
	return func() {
		t.Helper()
		for _, r := range roots {
			if after := treeHash(t, r); after != before[r] {
				t.Fatalf("the host cache %s changed: %s, now %s", r, before[r], after)
			}
		}
	}
}

// cacheOf returns the report's entry for a cache.
func cacheOf(t *testing.T, r result, name string) map[string]any {
	t.Helper()
	list, _ := r.report["caches"].([]any)
	for _, c := range list {
		if m, _ := c.(map[string]any); m["name"] == name {
			return m
		}
	}
	t.Fatalf("the report lists no cache %q: %v\n%s", name, r.report["caches"], r)
	return nil
}

// wantLower checks the report says the cache's lower layer was dir.
func wantLower(t *testing.T, r result, name, dir string) {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c := cacheOf(t, r, name); c["lower"] != real {
		t.Fatalf("cache %s: lower %v (why %v), want %s\n%s", name, c["lower"], c["why"], real, r)
	}
}

// privateCache is the workspace's private cache root.
func (e *env) privateCache() string {
	sum := sha256.Sum256([]byte(e.ws))
	return filepath.Join(e.home, ".local", "state", "sandboxd", "cache", hex.EncodeToString(sum[:8]))
}

// goModule writes a workspace module that imports a few standard
// packages and example.com/dep, served by a file-based module proxy.
func (e *env) goModule(t *testing.T) (proxy string) {
	t.Helper()
	e.writeFile(filepath.Join(e.ws, "go.mod"), "module example.com/ws\n\ngo 1.22\n\nrequire example.com/dep v1.0.0\n", 0o644)
	e.writeFile(filepath.Join(e.ws, "main.go"), "package main\n\nimport (\n\t\"encoding/json\"\n\t\"fmt\"\n\n\t\"example.com/dep\"\n\t\"example.com/ws/lib\"\n)\n\n"+
		"func main() {\n\tb, _ := json.Marshal(lib.Value())\n\tfmt.Println(string(b), dep.Name)\n}\n", 0o644)
	e.writeFile(filepath.Join(e.ws, "lib", "lib.go"), "package lib\n\nimport \"strings\"\n\nfunc Value() string { return strings.ToUpper(\"ok\") }\n", 0o644)
	proxy = filepath.Join(e.dir, "proxy")
	v := filepath.Join(proxy, "example.com", "dep", "@v")
	e.writeFile(filepath.Join(v, "list"), "v1.0.0\n", 0o644)
	e.writeFile(filepath.Join(v, "v1.0.0.info"), `{"Version":"v1.0.0","Time":"2024-01-01T00:00:00Z"}`, 0o644)
	mod := "module example.com/dep\n\ngo 1.22\n"
	e.writeFile(filepath.Join(v, "v1.0.0.mod"), mod, 0o644)
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	for name, body := range map[string]string{"go.mod": mod, "dep.go": "package dep\n\nconst Name = \"dep\"\n"} {
		w, err := z.Create("example.com/dep@v1.0.0/" + name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	e.writeFile(filepath.Join(v, "v1.0.0.zip"), buf.String(), 0o644)
	return proxy
}

var compiled = regexp.MustCompile(`/compile .* -p (\S+) `)

// TestCacheGoBuild: the first sandboxed build in a new workspace uses the
// host's warm build and module caches, and changes neither.
func TestCacheGoBuild(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		defer heavyBuild()() // Go builds in a cold cache
		proxy := e.goModule(t)
		// Warm the host's caches as the user would: a build of this
		// module on the host (GONOSUMDB only here, for the test's own
		// module; sandboxd's run keeps the checksum database on).
		e.hostTool(t, e.ws, e.goHostEnv("GOPROXY=file://"+proxy, "GONOSUMDB=example.com"), "go", "build", "./...")
		goCache, modCache := filepath.Join(e.home, ".cache", "go-build"), filepath.Join(e.home, "go", "pkg", "mod")
		same := unchanged(t, goCache, modCache)

		r := e.sandboxdOpts(runOpts{timeout: 5 * time.Minute}, "run", "-c",
			`go env GOCACHE GOMODCACHE && go build -x -o /tmp/app . 2>&1 && /tmp/app`).mustSucceed(t)
		for _, m := range compiled.FindAllStringSubmatch(r.stdout, -1) {
			if !strings.HasPrefix(m[1], "example.com/") && m[1] != "main" {
				t.Fatalf("the warm host cache was not used: %s was compiled\n%s", m[1], r)
			}
		}
		if !strings.Contains(r.stdout, `"OK" dep`) || !strings.Contains(r.stdout, e.privateCache()+"/go-build\n") ||
			!strings.Contains(r.stdout, e.privateCache()+"/go-mod\n") {
			t.Fatalf("unexpected output\n%s", r)
		}
		wantLower(t, r, "go-build", goCache)
		wantLower(t, r, "go-mod", modCache)
		noBoundaries(t, r)

		// Commands that write and remove much (every cache entry,
		// host-made ones included): all of it lands in the private
		// layer.
		marker := "marker-" + randHex(4)
		r = e.sandboxdOpts(runOpts{timeout: 5 * time.Minute}, "run", "-c",
			`go vet ./... && go clean -cache && echo `+marker+` > "$GOCACHE/marker" && rm -rf "$GOMODCACHE/cache/download" && ls "$GOCACHE" | wc -l`).mustSucceed(t)
		noBoundaries(t, r)
		same()
		r = e.sh(`cat "$GOCACHE/marker"; test -d "$GOMODCACHE/cache/download" || echo removed-stays-removed`).mustSucceed(t)
		if !strings.Contains(r.stdout, marker) || !strings.Contains(r.stdout, "removed-stays-removed") {
			t.Fatalf("the private layer did not persist\n%s", r)
		}
		same()
	})
}

// TestCacheSecretMasked: a secret inside a host cache (the user's own
// policy says so) stays unreadable at its private-cache path, and a
// host cache that is a secret is not a lower layer at all.
func TestCacheSecretMasked(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		goCache := filepath.Join(e.home, ".cache", "go-build")
		e.writeFile(filepath.Join(goCache, "ok.txt"), "visible\n", 0o644)
		e.writeFile(filepath.Join(goCache, "canary.txt"), e.canary+"\n", 0o644)
		e.writeFile(filepath.Join(goCache, "keys", "k"), e.canary+"\n", 0o644)
		e.writeFile(filepath.Join(goCache, "x.pem"), e.canary+"\n", 0o644)
		e.writeFile(filepath.Join(e.home, ".cache", "pip", "http", "s.key"), e.canary+"\n", 0o644)
		e.writeFile(filepath.Join(e.home, ".cache", "pip", "http", "entry"), "pipcache\n", 0o644)
		e.writeFile(filepath.Join(e.home, ".npm", "_cacache", "index"), e.canary+"\n", 0o644)
		e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), `[filesystem]
secrets = ["~/.cache/go-build/canary.txt", "~/.cache/go-build/keys", "~/.cache/go-build/*.pem", "~/.cache/pip/http/*.key", "~/.npm/_cacache"]
`, 0o644)
		same := unchanged(t, filepath.Join(e.home, ".cache"), filepath.Join(e.home, ".npm"))
		r := e.sh(`cat "$GOCACHE/ok.txt" "$PIP_CACHE_DIR/http/entry"
for f in "$GOCACHE/canary.txt" "$GOCACHE/keys/k" "$GOCACHE/x.pem" "$PIP_CACHE_DIR/http/s.key" "$npm_config_cache/_cacache/index"; do
  cat "$f" 2>/dev/null && echo "READ $f"
done
ls -la "$GOCACHE" "$GOCACHE/keys" "$npm_config_cache/_cacache"
grep -r . "$GOCACHE" "$PIP_CACHE_DIR" "$npm_config_cache" 2>/dev/null
echo done`)
		e.noCanary(t, r)
		if r.code != 0 || !strings.Contains(r.stdout, "visible\npipcache\n") || strings.Contains(r.stdout, "READ ") || !strings.Contains(r.stdout, "done") {
			t.Fatalf("unexpected result\n%s", r)
		}
		wantLower(t, r, "go-build", goCache)
		wantLower(t, r, "pip", filepath.Join(e.home, ".cache", "pip"))
		// Hidden inside, not denied there: nothing to review.
		noBoundaries(t, r)
		if c := cacheOf(t, r, "npm"); c["lower"] != nil || !strings.Contains(fmt.Sprint(c["why"]), "secret") {
			t.Fatalf("npm's cache is a secret, yet: %v\n%s", c, r)
		}
		same()
	})
}

// TestCacheNpmOffline: `npm ci --offline` installs from the host's npm
// cache inside; ~/.npm stays as it was.
func TestCacheNpmOffline(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		pkg := e.mkdir("pkg", 0o755)
		e.writeFile(filepath.Join(pkg, "package.json"), `{"name":"sbx-cache-probe","version":"1.0.0","main":"index.js"}`, 0o644)
		e.writeFile(filepath.Join(pkg, "index.js"), "module.exports = 'from the host cache';\n", 0o644)
		out := e.hostTool(t, pkg, e.goHostEnv(), "npm", "pack", "--json", "--silent")
		var packed []struct{ Filename, Integrity string }
		if err := json.Unmarshal([]byte(out[strings.Index(out, "["):]), &packed); err != nil || len(packed) != 1 {
			t.Fatalf("npm pack: %v\n%s", err, out)
		}
		e.hostTool(t, pkg, e.goHostEnv(), "npm", "cache", "add", "./"+packed[0].Filename)
		e.writeFile(filepath.Join(e.ws, "package.json"), `{"name":"ws","version":"1.0.0","dependencies":{"sbx-cache-probe":"1.0.0"}}`, 0o644)
		e.writeFile(filepath.Join(e.ws, "package-lock.json"), fmt.Sprintf(`{"name":"ws","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{
"":{"name":"ws","version":"1.0.0","dependencies":{"sbx-cache-probe":"1.0.0"}},
"node_modules/sbx-cache-probe":{"version":"1.0.0","resolved":"https://registry.npmjs.org/sbx-cache-probe/-/sbx-cache-probe-1.0.0.tgz","integrity":%q}}}`,
			packed[0].Integrity), 0o644)
		npmDir := filepath.Join(e.home, ".npm")
		same := unchanged(t, npmDir)
		r := e.sandboxdOpts(runOpts{timeout: 2 * time.Minute, env: []string{"npm_config_update_notifier=false"}}, "run", "-c",
			`npm ci --offline --no-audit --no-fund && node -p "require('sbx-cache-probe')"`).mustSucceed(t)
		if !strings.Contains(r.stdout, "from the host cache") {
			t.Fatalf("the package did not install\n%s", r)
		}
		wantLower(t, r, "npm", filepath.Join(npmDir, "_cacache"))
		noBoundaries(t, r)
		same()
	})
}

// TestCacheLayout: a populated private cache from before layers becomes
// the private layer once; a run while another holds the layer gets the
// host cache with writes it drops.
func TestCacheLayout(t *testing.T) {
	// Serial: its second run must find the first still holding the layer's lock, a window of seconds.
	forEach(t, func(t *testing.T, e *env) {
		e.writeFile(filepath.Join(e.home, ".cache", "pip", "host.txt"), "from host\n", 0o644)
		old := filepath.Join(e.privateCache(), "pip")
		e.writeFile(filepath.Join(old, "old.txt"), "from before\n", 0o644)
		same := unchanged(t, filepath.Join(e.home, ".cache"))
		r := e.sh(`cat "$PIP_CACHE_DIR/host.txt" "$PIP_CACHE_DIR/old.txt" && echo new > "$PIP_CACHE_DIR/new.txt" && ls -a "$(dirname "$PIP_CACHE_DIR")"`).mustSucceed(t)
		if !strings.Contains(r.stdout, "from host\nfrom before\n") {
			t.Fatalf("the lower and the migrated layer are not both visible\n%s", r)
		}
		wantLower(t, r, "pip", filepath.Join(e.home, ".cache", "pip"))
		upper := filepath.Join(e.privateCache(), ".layers", "pip", "upper")
		for _, f := range []string{"old.txt", "new.txt"} {
			if _, err := os.Stat(filepath.Join(upper, f)); err != nil {
				t.Fatalf("the private layer lacks %s: %v", f, err)
			}
		}
		if names, _ := os.ReadDir(old); len(names) != 0 {
			t.Fatalf("the old private cache was not moved: %v", names)
		}
		e.concurrentRun(t, upper)
		e.plantedLayer(t)
		same()
	})
}

// plantedLayer: a private layer an earlier command replaced by a symlink
// (to the user's keys) is never followed: the cache has no lower layer,
// the run goes on, and nothing reaches the symlink's target.
func (e *env) plantedLayer(t *testing.T) {
	t.Helper()
	e.writeFile(filepath.Join(e.home, ".npm", "_cacache", "index-v5", "x"), "host npm\n", 0o644)
	layer := filepath.Join(e.privateCache(), ".layers", "npm")
	if err := os.MkdirAll(layer, 0o700); err != nil {
		t.Fatal(err)
	}
	e.chown(layer)
	if err := os.Symlink(filepath.Join(e.home, ".ssh"), filepath.Join(layer, "upper")); err != nil {
		t.Fatal(err)
	}
	keys := unchanged(t, filepath.Join(e.home, ".ssh"))
	r := e.sh(`ls -a "$npm_config_cache/_cacache"; cat "$npm_config_cache/_cacache/id_rsa"; echo planted > "$npm_config_cache/_cacache/planted"; echo done`)
	e.noCanary(t, r)
	if c := cacheOf(t, r, "npm"); c["lower"] != nil || !strings.Contains(fmt.Sprint(c["why"]), "private layer") {
		t.Fatalf("a planted private layer was used: %v\n%s", c, r)
	}
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("the run did not go on without the layer\n%s", r)
	}
	keys()
}

// concurrentRun holds the pip layer with one run while another runs: the
// second sees the host cache, and its writes are dropped.
func (e *env) concurrentRun(t *testing.T, upper string) {
	t.Helper()
	done := make(chan result, 1)
	go func() { done <- e.sh(`sleep 3`) }()
	lock := filepath.Join(filepath.Dir(upper), "lock")
	deadline := time.Now().Add(20 * time.Second)
	for !locked(lock) {
		if time.Now().After(deadline) {
			t.Fatal("the first run never took the layer's lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := e.sh(`cat "$PIP_CACHE_DIR/host.txt" && echo dropped > "$PIP_CACHE_DIR/second.txt"`).mustSucceed(t)
	(<-done).mustSucceed(t)
	if c := cacheOf(t, r, "pip"); c["writes_discarded"] != true || c["lower"] == nil {
		t.Fatalf("the second run's cache: %v\n%s", c, r)
	}
	if _, err := os.Stat(filepath.Join(upper, "second.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the second run wrote to the held layer: %v", err)
	}
}

// locked reports whether another process holds the flock on p.
func locked(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
