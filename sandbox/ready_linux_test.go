package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/sandbox"
)

// TestReadyHelpers: a daemon's pool of helpers started in advance serves
// a run only of the launch it was made for (the caller, how its ids map),
// each helper once; a run of another caller starts its own; a helper
// killed while it waits is never used; idle helpers are stopped and
// Close stops the rest.
func TestReadyHelpers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (make test runs as root): a second caller, namespaces for another uid")
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pool := sandbox.NewReadyHelpers(sandbox.ReadyOptions{Max: 4, Idle: time.Hour}, log)
	defer pool.Close()
	root := newLeakEnv(t)
	other, uid := otherCaller(t)
	run := func(e leakEnv, uid int, what string) string {
		t.Helper()
		spec := e.spec("sh", "-c", "id -u; cat")
		spec.Ready, spec.UID, spec.GID = pool, uid, uid
		// Two buffers: the streams are relayed at the same time.
		var out, errs bytes.Buffer
		spec.Stdin, spec.Stdout, spec.Stderr = strings.NewReader(what), &out, &errs
		res, err := sandbox.Run(context.Background(), spec, log)
		pool.Refill()
		if res.Layer != nil {
			res.Layer.Close()
		}
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %v, exit %d\n%s%s", err, res.ExitCode, out.String(), errs.String())
		}
		return out.String()
	}
	want := func(st sandbox.ReadyStats, hits, misses uint64) {
		t.Helper()
		if st.Hits != hits || st.Misses != misses {
			t.Fatalf("pool: %d hits, %d misses; want %d, %d", st.Hits, st.Misses, hits, misses)
		}
	}
	// In turns: each caller's first run misses, and the pool then holds
	// two helpers for it (PerLaunch); the next runs take their own
	// caller's, never the other's, and the pool tops it up after each.
	steps := []struct {
		e            leakEnv
		uid          int
		ready        int
		hits, misses uint64
	}{
		{root, 0, 2, 0, 1},
		{other, uid, 4, 0, 2},
		{root, 0, 4, 1, 2},
		{other, uid, 4, 2, 2},
	}
	for i, s := range steps {
		in := fmt.Sprint("run ", i)
		if got := run(s.e, s.uid, in); got != strconv.Itoa(s.uid)+"\n"+in {
			t.Fatalf("run %d (uid %d) printed %q", i, s.uid, got)
		}
		want(waitReady(t, pool, s.ready), s.hits, s.misses)
	}
	// A helper killed while it waits is skipped: the run starts its own.
	for _, pid := range waitingHelpers(t) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	time.Sleep(100 * time.Millisecond)
	if got := run(other, uid, "e"); got != strconv.Itoa(uid)+"\ne" {
		t.Fatalf("the run after its helper was killed printed %q", got)
	}
	want(pool.Stats(), 2, 3)
	pool.Close()
	if left := waitingHelpers(t); len(left) > 0 {
		t.Fatalf("helpers left after Close: %v", left)
	}
}

// TestReadyHelpersIdle: a helper nobody claims is stopped after the idle
// time, one that prepared a capture as well.
func TestReadyHelpersIdle(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (make test runs as root): namespaces, cgroups")
	}
	for _, capture := range []bool{false, true} {
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		pool := sandbox.NewReadyHelpers(sandbox.ReadyOptions{Max: 2, PerLaunch: 1, Idle: 300 * time.Millisecond}, log)
		defer pool.Close()
		e := newLeakEnv(t)
		spec := e.spec("true")
		spec.Ready = pool
		if capture {
			spec.Egress = fakeEgress(43104, true)
		}
		if _, err := sandbox.Run(context.Background(), spec, log); err != nil {
			t.Fatal(err)
		}
		if st := pool.Stats(); st.Ready != 0 {
			t.Fatalf("capture %v: the pool started a helper before Refill: %+v", capture, st)
		}
		pool.Refill()
		waitReady(t, pool, 1)
		deadline := time.Now().Add(5 * time.Second)
		for pool.Stats().Ready > 0 || len(waitingHelpers(t)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("capture %v: the idle helper is still there: %+v, %v", capture, pool.Stats(), waitingHelpers(t))
			}
			time.Sleep(20 * time.Millisecond)
		}
		if st := pool.Stats(); st.Expired != 1 || st.PrepareCPU <= 0 {
			t.Fatalf("capture %v: pool after the idle time: %+v", capture, st)
		}
	}
}

// waitReady waits until the pool holds n helpers, and returns its
// figures.
func waitReady(t *testing.T, pool *sandbox.ReadyHelpers, n int) sandbox.ReadyStats {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := pool.Stats()
		if st.Ready == n {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool holds %d helpers, want %d", st.Ready, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitingHelpers are this process's children that are sandbox helpers.
func waitingHelpers(t *testing.T) []int {
	t.Helper()
	tasks, _ := os.ReadDir("/proc/self/task")
	var pids []int
	for _, task := range tasks {
		b, _ := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "children"))
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			cmdline, _ := os.ReadFile("/proc/" + f + "/cmdline")
			if strings.Contains(string(cmdline), "__sandbox-init") {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// otherCaller is an environment of the unprivileged test user's own,
// and its uid (skipped without that user).
func otherCaller(t *testing.T) (leakEnv, int) {
	t.Helper()
	u, err := user.Lookup("sandboxd-test")
	if err != nil {
		t.Skip("no user sandboxd-test (make test creates it)")
	}
	uid, _ := strconv.Atoi(u.Uid)
	e := newLeakEnv(t)
	filepath.Walk(e.base, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, uid, uid) })
	return e, uid
}

// TestReadyHelpersPrepare: a helper prepared for a run's launch before
// the run asks (sandboxd run without a daemon, while its plan finishes)
// serves that run, even one that asks while it is still starting; one
// prepared for another launch (capture where the run
// has none, another caller) is not taken, and Close stops it.
func TestReadyHelpersPrepare(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (make test runs as root): namespaces, cgroups")
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := newLeakEnv(t)
	run := func(pool *sandbox.ReadyHelpers) {
		t.Helper()
		spec := e.spec("true")
		spec.Ready = pool
		res, err := sandbox.Run(context.Background(), spec, log)
		if res.Layer != nil {
			res.Layer.Close()
		}
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %v, exit %d", err, res.ExitCode)
		}
	}
	for _, c := range []struct {
		name    string
		prepare func(sandbox.Spec) sandbox.Spec
		capture bool
		hit     bool
	}{
		{"same launch", func(s sandbox.Spec) sandbox.Spec { return s }, false, true},
		{"capture the run does not make", func(s sandbox.Spec) sandbox.Spec { return s }, true, false},
		{"another caller", func(s sandbox.Spec) sandbox.Spec { s.UID, s.GID = 4242, 4242; return s }, false, false},
		{"another umask", func(s sandbox.Spec) sandbox.Spec { s.Umask = 0o077; return s }, false, false},
		{"landlock-only", func(s sandbox.Spec) sandbox.Spec { s.Isolation = string(sandbox.LandlockOnly); return s }, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := sandbox.NewReadyHelpers(sandbox.ReadyOptions{Max: 1, PerLaunch: 1, Idle: time.Hour}, log)
			defer pool.Close()
			// Asked for at once: the run waits for the helper being
			// started for its launch rather than start a second.
			pool.Prepare(c.prepare(e.spec("true")), c.capture)
			run(pool)
			st := pool.Stats()
			if c.hit && (st.Hits != 1 || st.Misses != 0) || !c.hit && (st.Hits != 0 || st.Misses != 1) {
				t.Fatalf("pool: %+v, want a hit: %v", st, c.hit)
			}
			want := 0
			if !c.hit {
				want = 1 // the prepared one, unclaimed
			}
			if n := len(waitingHelpers(t)); n != want || st.Ready != want {
				t.Fatalf("%d helpers wait after the run (the pool: %+v), want %d", n, st, want)
			}
			pool.Close()
			if left := waitingHelpers(t); len(left) > 0 {
				t.Fatalf("helpers left after Close: %v", left)
			}
		})
	}
}
