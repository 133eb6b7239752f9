package sandbox_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/landlock"
	"github.com/sandboxd/sandboxd/sandbox"
)

// TestConcurrentRunsShareOneAuditReader runs several sandboxed commands
// at once through one AuditHub, each reading a secret of its own (a
// denial only kernel audit reports), and checks that each run is given
// exactly its own denials, none lost, and that the hub stops its reader
// when the last run ends.
func TestConcurrentRunsShareOneAuditReader(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: kernel audit (CAP_AUDIT_CONTROL, CAP_AUDIT_READ), namespaces")
	}
	if sup, err := landlock.Probe(); err != nil || !sup.LogFlags {
		t.Skipf("Landlock cannot log denials here (needs ABI 7): %v", err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	hub := sandbox.NewAuditHub(log)
	const runs, rounds = 4, 2
	envs := make([]leakEnv, runs)
	for i := range envs {
		envs[i] = newLeakEnv(t)
	}
	goroutines := runtime.NumGoroutine()
	for round := range rounds {
		var wg sync.WaitGroup
		results := make([]sandbox.Result, runs)
		errs := make([]error, runs)
		for i := range runs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e := envs[i]
				// Two reads of its own secret (one denial), and a file
				// named for the run, so a record given to the wrong run
				// would show.
				spec := e.spec("sh", "-c", fmt.Sprintf("cat %[1]s/.ssh/id_rsa; cat %[1]s/.ssh/id_rsa; cat %[1]s/.ssh/run-%[2]d", e.home, i))
				os.WriteFile(filepath.Join(e.home, ".ssh", fmt.Sprintf("run-%d", i)), []byte("x"), 0o600)
				spec.Audit = hub
				spec.Stdout, spec.Stderr = io.Discard, io.Discard
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				results[i], errs[i] = sandbox.Run(ctx, spec, log)
				if results[i].Layer != nil {
					results[i].Layer.Close()
				}
			}()
		}
		wg.Wait()
		for i := range runs {
			if errs[i] != nil {
				t.Fatalf("round %d, run %d: %v", round, i, errs[i])
			}
			res, home := results[i], envs[i].home
			if res.Detection.Detector != "audit+seccomp" || res.Detection.Lost != 0 {
				t.Errorf("round %d, run %d: detection %+v", round, i, res.Detection)
			}
			var got []string
			for _, d := range res.Denials {
				got = append(got, string(d.Operation)+" "+d.Path)
			}
			want := []string{"read_file " + filepath.Join(home, ".ssh", "id_rsa"), "read_file " + filepath.Join(home, ".ssh", fmt.Sprintf("run-%d", i))}
			if !slices.Equal(got, want) {
				t.Errorf("round %d, run %d: denials %q, want %q", round, i, got, want)
			}
		}
	}
	st := hub.Stats()
	t.Logf("hub: %+v", st)
	if st.Overruns != 0 || st.Unreadable != 0 {
		t.Errorf("hub stats %+v", st)
	}
	if g, _ := settle(goroutines, 1<<30, 5*time.Second); g > goroutines {
		buf := make([]byte, 1<<20)
		t.Errorf("%d goroutines after the runs (before %d): the reader outlived them\n%s", g, goroutines, buf[:runtime.Stack(buf, true)])
	}
}
