package sandbox_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/sandbox"
)

// TestCacheLayerConcurrentRuns: while one run holds a cache's layer, a
// run of the same cache through the same Releases, and one without
// Releases (an embedded run: another process's lock), each find the
// layer taken and run on an ephemeral one, whose writes are discarded:
// neither waits for the live run, and neither's write lands in the
// layer; the live run's does, and so does the next run's, after the
// live run's release.
func TestCacheLayerConcurrentRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (make test runs as root): namespaces, cgroups, mounts")
	}
	e := newLeakEnv(t)
	host, dir := e.hostGoCache(t, "host")
	rel := sandbox.NewReleases()
	defer rel.Close()
	run := func(rel *sandbox.Releases, script string) sandbox.CacheResult {
		t.Helper()
		var stderr bytes.Buffer
		spec := e.spec("sh", "-c", script)
		spec.Releases, spec.NoDetect, spec.Stderr, spec.Transaction = rel, true, &stderr, false
		spec.CacheLayers = []sandbox.CacheLayer{{Name: "go", Dir: dir, Host: host}}
		res, err := sandbox.Run(context.Background(), spec, slog.New(slog.NewTextHandler(io.Discard, nil)))
		res.Layer.Close()
		if err != nil || res.ExitCode != 0 || len(res.Caches) != 1 {
			t.Errorf("err %v, exit %d, caches %+v, stderr %q", err, res.ExitCode, res.Caches, stderr.String())
			return sandbox.CacheResult{}
		}
		return res.Caches[0]
	}
	if c := run(rel, "true"); c.Lower != host {
		t.Skipf("no overlay on the cache here: %+v", c)
	}
	started := filepath.Join(e.ws, "started")
	var wg sync.WaitGroup
	var live sandbox.CacheResult
	wg.Add(1)
	go func() {
		defer wg.Done()
		live = run(rel, "echo live > "+dir+"/live; touch "+started+"; sleep 1")
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the live run never started")
		}
	}
	for name, r := range map[string]*sandbox.Releases{"same": rel, "embedded": nil} {
		t0 := time.Now()
		c := run(r, "echo "+name+" > "+dir+"/"+name)
		if !c.Discarded {
			t.Errorf("%s: a run beside the live one used the layer: %+v", name, c)
		}
		if d := time.Since(t0); d > 900*time.Millisecond {
			t.Logf("%s: the run beside took %v (waited for the live run?)", name, d)
		}
	}
	wg.Wait()
	if live.Discarded {
		t.Fatalf("the live run did not use the layer: %+v", live)
	}
	if c := run(rel, "echo next > "+dir+"/next"); c.Discarded {
		t.Errorf("the run after the live one's release found the layer taken: %+v", c)
	}
	rel.Close()
	upper := filepath.Join(e.state, "cache", ".layers", "go", "upper")
	for f, want := range map[string]bool{"live": true, "next": true, "same": false, "embedded": false} {
		if _, err := os.Stat(filepath.Join(upper, f)); (err == nil) != want {
			t.Errorf("the layer holds %s: %v, want %v", f, err == nil, want)
		}
	}
}
