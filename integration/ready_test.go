package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/kernelaudit"
	"golang.org/x/sys/unix"
)

// TestDaemonReadyHelpers: the helpers the daemon starts in advance serve
// each caller's own runs only (root's and the unprivileged user's, run
// in turns through one daemon, each see their own uid), and a run on a
// helper made before the caller's policy changed enforces the policy as
// it is when the run starts: a file the edit made a secret is not read.
func TestDaemonReadyHelpers(t *testing.T) {
	td, _, scrape := metricsDaemon(t)
	metric := func(series string) int {
		t.Helper()
		n, err := strconv.Atoi(sample(scrape(), series))
		if err != nil {
			t.Fatalf("%s: %v", series, err)
		}
		return n
	}
	waitReady := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); metric("sandboxd_ready_helpers") < n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the daemon holds %d ready helpers, want %d", metric("sandboxd_ready_helpers"), n)
			}
		}
	}
	var envs []*env
	for _, id := range identities(t) {
		e := newEnv(t, id)
		e.writeFile(filepath.Join(e.home, "notes", "plan.txt"), "plan-"+e.canary+"\n", 0o644)
		envs = append(envs, e)
	}
	vars := []string{"SANDBOXD_SOCKET=" + td.socket}
	run := func(e *env) result {
		t.Helper()
		return e.sandboxdOpts(runOpts{env: vars}, "run", "--daemon", "-c", "id -u; cat ~/notes/plan.txt")
	}
	// Turns: each caller's first run starts its own helper; later ones
	// find one made for them.
	for round := range 3 {
		for _, e := range envs {
			r := run(e)
			if r.code != 0 || r.stdout != strconv.Itoa(e.id.uid)+"\nplan-"+e.canary+"\n" {
				t.Fatalf("round %d, uid %d: the run did not run as its caller, or did not read its note\n%s", round, e.id.uid, r)
			}
		}
		waitReady(len(envs))
	}
	if hits := metric("sandboxd_ready_helper_hits_total"); hits < 2*len(envs) {
		t.Fatalf("%d runs found a helper ready, want at least %d", hits, 2*len(envs))
	}
	// The policy changes while a helper waits for each caller.
	hits := metric("sandboxd_ready_helper_hits_total")
	for _, e := range envs {
		e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), "[filesystem]\nsecrets = [\"~/notes/plan.txt\"]\n", 0o644)
		r := run(e)
		if strings.Contains(r.stdout, e.canary) || !strings.HasPrefix(r.stdout, strconv.Itoa(e.id.uid)+"\n") {
			t.Fatalf("uid %d: the note read after the policy made it a secret\n%s", e.id.uid, r)
		}
	}
	if got := metric("sandboxd_ready_helper_hits_total"); got != hits+len(envs) {
		t.Fatalf("the runs after the edit took %d ready helpers, want %d", got-hits, len(envs))
	}
}

// TestDaemonKeepAuditOn: kernel audit is the daemon's only while a run
// needs it, unless the operator asks with --keep-audit-on: then the
// daemon holds it between commands too, and lets it go when it stops.
func TestDaemonKeepAuditOn(t *testing.T) {
	if _, err := kernelaudit.CurrentStatus(); err != nil {
		t.Skipf("kernel audit is not reachable here (%v)", err)
	}
	for _, keep := range []bool{false, true} {
		var args []string
		if keep {
			args = []string{"--keep-audit-on"}
		}
		td := spawnDaemon(t, args...)
		e := newEnv(t, identities(t)[0])
		e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + td.socket}}, "run", "--daemon", "--", "true").mustSucceed(t)
		if held := daemonHoldsAudit(td.cmd.Process.Pid); held != keep {
			t.Errorf("--keep-audit-on %v: between commands the daemon holds kernel audit: %v", keep, held)
		}
		td.stop(t)
		if daemonHoldsAudit(td.cmd.Process.Pid) {
			t.Errorf("--keep-audit-on %v: the stopped daemon still holds kernel audit", keep)
		}
	}
}

// daemonHoldsAudit reports whether process pid holds kernel audit (a
// locked holder file of its own, kernelaudit.Acquire's).
func daemonHoldsAudit(pid int) bool {
	dir := filepath.Join(kernelaudit.DefaultDir, "holders")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), strconv.Itoa(pid)+"-") {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		locked := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) != nil
		f.Close()
		if locked {
			return true
		}
	}
	return false
}

// TestEmbeddedPreparedHelper: sandboxd run without a daemon starts its
// helper while its plan finishes, and the run claims it, with the
// default policy (direct connects captured), without capture, in
// landlock-only isolation (no namespaces: a helper without them), and
// for a command that needs stdin; as root and as the unprivileged user
// alike. A helper the run did not claim would leave the command run by
// one started after the plan, which this test tells apart.
func TestEmbeddedPreparedHelper(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		noCapture := writePolicy(t, e, "nocapture.toml", "[network]\ncapture = false\n")
		landlockOnly := writePolicy(t, e, "landlock.toml", "isolation = \"landlock-only\"\n")
		for _, c := range []struct {
			name string
			args []string
		}{
			{"default", nil},
			{"no capture", []string{"--policy", noCapture}},
			{"landlock-only", []string{"--policy", landlockOnly}},
		} {
			if c.name == "landlock-only" && e.id.root() {
				continue // root runs need namespaces (a root command without them is refused)
			}
			args := append(append([]string{"run", "-v"}, c.args...), "--", "sh", "-c", "cat; echo ran")
			r := e.sandboxdOpts(runOpts{stdin: "in "}, args...)
			if r.code != 0 || r.stdout != "in ran\n" {
				t.Fatalf("%s: exit %d, stdout %q\n%s", c.name, r.code, r.stdout, r)
			}
			if !strings.Contains(r.stderr, `msg="sandbox helper" ready=true`) {
				t.Errorf("%s: the run did not claim the helper started during its plan\n%s", c.name, r)
			}
		}
	})
}
