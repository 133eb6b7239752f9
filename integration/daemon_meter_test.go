package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestDaemonMeterAsCaller: the daemon counts a caller's model use in the
// caller's state directory as the caller, never as root. A symlink the
// caller put in place of the usage file's lock, pointing into a
// directory only root may write, makes the daemon create nothing there;
// without it, the usage file the daemon writes is the caller's.
func TestDaemonMeterAsCaller(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon")
	}
	socket, dlog := startDaemonLog(t)
	m := newFakeModel(t, func(string) (string, string, string, string) {
		return "deny", "medium", "unknown", "not this one"
	})
	forEach(t, func(t *testing.T, e *env) {
		if e.id.uid == 0 {
			t.Skip("root's own symlinks lead where root may write anyway")
		}
		defer func() {
			if t.Failed() {
				t.Logf("daemon log:\n%s", dlog.String())
			}
		}()
		state := e.mkdir("state", 0o755)
		e.mkdir("state/sandboxd", 0o700)
		rev := e.mkdir("state/sandboxd/review", 0o700)
		// e.dir is root's, 0755: the caller cannot create the victim.
		victim := filepath.Join(e.dir, "victim-"+randHex(4))
		lock := filepath.Join(rev, "usage.lock")
		if err := os.Symlink(victim, lock); err != nil {
			t.Fatal(err)
		}
		os.Lchown(lock, e.id.uid, e.id.gid)
		pol := modelPolicy(t, e, m, "")
		target := filepath.Join(e.mkdir("out", 0o755), "model.txt")
		vars := []string{"SANDBOXD_SOCKET=" + socket, "FAKE_REVIEW_KEY=fake-review-key", "XDG_STATE_HOME=" + state}
		r := e.sandboxdOpts(runOpts{env: vars}, "run", "--daemon", "--policy", pol, "--reviewer", "model", "-c", "echo x > "+target)
		if _, err := os.Lstat(victim); err == nil {
			t.Errorf("the daemon created %s, where the caller's symlink pointed, which uid %d may not\n%s", victim, e.id.uid, r)
		}

		os.Remove(lock)
		asked := len(m.requests())
		r = e.sandboxdOpts(runOpts{env: vars}, "run", "--daemon", "--policy", pol, "--reviewer", "model", "-c", "echo x > "+target)
		if len(m.requests()) == asked {
			t.Fatalf("the model was not asked\n%s", r)
		}
		for _, name := range []string{"usage.json", "usage.lock"} {
			st, err := os.Lstat(filepath.Join(rev, name))
			if err != nil {
				t.Errorf("no %s after a review: %v\n%s", name, err, r)
				continue
			}
			if uid := st.Sys().(*syscall.Stat_t).Uid; int(uid) != e.id.uid {
				t.Errorf("%s is uid %d's, not the caller's (%d)", name, uid, e.id.uid)
			}
		}
	})
}

// The operator's caps on the operator's key hold whatever state
// directory a caller names: they are counted where only root writes.
func TestDaemonMachineCapsHold(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxd serve runs as root")
	}
	top, err := os.MkdirTemp(baseDir, "caps-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeAll(top) })
	os.Chmod(top, 0o755)
	conf := filepath.Join(top, "etc")
	os.Mkdir(conf, 0o755)
	os.WriteFile(filepath.Join(conf, "machine.key"), []byte("sk-machine-"+randHex(8)+"\n"), 0o600)
	model := newAuthModel(t)
	cfg := filepath.Join(conf, "sandboxd.toml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("[policy.review]\nmax_user_calls_per_hour = 2\n\n[review]\nmodel = \"machine-model\"\nbase_url = %q\nkey_file = %q\n",
		model.url, filepath.Join(conf, "machine.key"))), 0o644)
	socket, dlog := startDaemonLog(t, "--config", cfg)
	ids := identities(t)
	e := newEnv(t, ids[len(ids)-1])
	outside := e.mkdir("outside", 0o755)
	for i := range 4 {
		// A state directory of its own each time, as a caller may name.
		state := e.mkdir(fmt.Sprintf("state%d", i), 0o755)
		vars := []string{"SANDBOXD_SOCKET=" + socket, "XDG_STATE_HOME=" + state}
		e.sandboxdOpts(runOpts{env: vars}, "run", "--daemon", "--reviewer", "model", "-c", fmt.Sprintf("echo x > %s/%d", outside, i))
	}
	if _, bodies := model.seen(); len(bodies) != 2 {
		t.Fatalf("the operator's endpoint got %d calls under a cap of 2 an hour\n%s", len(bodies), dlog.String())
	}
}
