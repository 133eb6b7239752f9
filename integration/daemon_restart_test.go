package integration

import (
	binenc "encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sandboxd/sandboxd/kernelaudit"
	"golang.org/x/sys/unix"
)

// A daemon killed with SIGKILL mid-commit leaves a record of it; the
// next daemon, before it serves anyone, finishes the commit (or rolls it
// back, when nothing had reached the workspace) as its caller: the
// workspace is whole and every file in it is the caller's.
func TestDaemonRecoversCommitsAtStart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxd serve runs as root")
	}
	script := `for i in 1 2 3 4 5 6 7 8 9 10; do echo new$i > new$i.txt; done; mkdir -p dir/sub && echo deep > dir/sub/f; rm old.txt; echo changed >> keep.txt`
	for _, c := range []struct {
		at      string
		applied bool // whether anything may have reached the workspace
	}{{"stage:1", false}, {"apply:7", true}} {
		t.Run(strings.ReplaceAll(c.at, ":", "-"), func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) {
				e.writeFile(filepath.Join(e.ws, "old.txt"), "old\n", 0o644)
				e.writeFile(filepath.Join(e.ws, "keep.txt"), "keep\n", 0o644)
				before := tree(t, e.ws)
				d := spawnDaemonAt(t, "", []string{"SANDBOXD_TEST_CRASH_AT=" + c.at})
				env := []string{"SANDBOXD_SOCKET=" + d.socket}
				r := e.sandboxdOpts(runOpts{env: env, noReport: true}, "run", "--daemon", "-c", script)
				waitExit(t, d, "its commit's failpoint "+c.at)
				if !strings.Contains(r.stderr, "ended before the run's report") {
					t.Fatalf("the client was not told the daemon went mid-run\n%s", r)
				}
				records := filepath.Join(filepath.Dir(d.socket), "commits")
				if ents, _ := os.ReadDir(records); len(ents) != 1 {
					t.Fatalf("the killed daemon left no record of its commit in flight: %v", ents)
				}
				if now := tree(t, e.ws); !c.applied && fmt.Sprint(now) != fmt.Sprint(before) {
					t.Fatalf("the workspace changed before the commit was staged: %v", now)
				}
				d2 := restartDaemon(t, d.socket)
				// Served: the recovery, which comes first, is over.
				e.sandboxdOpts(runOpts{env: env}, "serve", "status").mustSucceed(t)
				want := before
				if c.applied {
					want = txnFinal(before)
				}
				if now := tree(t, e.ws); fmt.Sprint(now) != fmt.Sprint(want) {
					t.Fatalf("after the restart:\nwant %v\ngot  %v\n%s", want, now, d2.log)
				}
				ownedBy(t, e.ws, e.id.uid)
				txn := filepath.Join(e.home, ".local", "state", "sandboxd", "txn")
				if ents, _ := os.ReadDir(txn); len(ents) != 0 {
					t.Fatalf("the recovery left %v in %s", ents, txn)
				}
				if ents, _ := os.ReadDir(records); len(ents) != 0 {
					t.Fatalf("the record outlived the recovery: %v", ents)
				}
				if !strings.Contains(d2.log.String(), "recovered a commit the daemon was killed in") {
					t.Errorf("the daemon's log does not say what it recovered\n%s", d2.log)
				}
				// The caller's next run says what was recovered, as the
				// run that recovers a commit itself does; once.
				action := "rolled back"
				if c.applied {
					action = "completed"
				}
				for i, want := range []string{"[" + action + "]", "[]"} {
					rr := e.sandboxdOpts(runOpts{env: env}, "run", "--daemon", "--", "true").mustSucceed(t)
					var got []string
					txn, _ := rr.report["transaction"].(map[string]any)
					recs, _ := txn["recovered"].([]any)
					for _, x := range recs {
						m, _ := x.(map[string]any)
						got = append(got, fmt.Sprint(m["action"]))
					}
					if fmt.Sprint(got) != want {
						t.Errorf("run %d after the restart: the report's recovered commits are %v, want %s\n%s", i+1, got, want, rr)
					}
				}
			})
		})
	}
}

// txnFinal is the workspace the crash tests' script leaves, from before
// (TestTxnCrashDuringCommit's and TestDaemonRecoversCommitsAtStart's).
func txnFinal(before map[string]string) map[string]string {
	want := map[string]string{}
	for k, v := range before {
		want[k] = v
	}
	for i := 1; i <= 10; i++ {
		want[fmt.Sprintf("new%d.txt", i)] = fmt.Sprintf("new%d\n", i)
	}
	want["dir"], want["dir/sub"], want["dir/sub/f"] = "dir", "dir", "deep\n"
	delete(want, "old.txt")
	want["keep.txt"] = "keep\nchanged\n"
	return want
}

// ownedBy fails unless everything under root is uid's.
func ownedBy(t *testing.T, root string, uid int) {
	t.Helper()
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		if st := info.Sys().(*syscall.Stat_t); int(st.Uid) != uid {
			t.Errorf("%s is uid %d's, not the caller's (%d)", p, st.Uid, uid)
		}
		return nil
	})
}

// waitExit waits for a daemon that is to die (why) to end.
func waitExit(t *testing.T, d *testDaemon, why string) error {
	t.Helper()
	select {
	case err := <-d.exited:
		return err
	case <-time.After(15 * time.Second):
		d.cmd.Process.Kill()
		t.Fatalf("the daemon did not end on %s\n%s", why, d.log)
	}
	return nil
}

// restartDaemon starts a daemon on the socket of one that ended, and
// stops it (SIGTERM, exit 0) when the test ends.
func restartDaemon(t *testing.T, socket string) *testDaemon {
	t.Helper()
	d := spawnDaemonAt(t, socket, nil)
	t.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		if err := waitExit(t, d, "SIGTERM"); err != nil {
			t.Errorf("the daemon ended with %v\n%s", err, d.log)
		}
	})
	return d
}

// A daemon that stops mid-exec, on SIGTERM or killed with SIGKILL,
// leaves no process or cgroup of the run; the kernel audit settings its
// run changed are back (on SIGTERM when it has gone, after SIGKILL when
// the next daemon starts, before it serves); and a grant it issued is
// honoured by no later daemon.
func TestDaemonRestartForgets(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxd serve runs as root")
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) { restartForgets(t, e, sig) })
		})
	}
}

func restartForgets(t *testing.T, e *env, sig syscall.Signal) {
	audit := auditToChange(t)
	d := spawnDaemonAt(t, "", nil)
	env := []string{"SANDBOXD_SOCKET=" + d.socket}
	fm := newFakeModel(t, func(string) (string, string, string, string) { return "allow", "low", "high", "a build output" })
	e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), "[review]\nmodel = \"fake-model\"\nbase_url = \""+fm.url+"\"\napi_key_env = \"FAKE_REVIEW_KEY\"\n", 0o644)
	outside := filepath.Join(e.dir, "out.txt")
	q := map[string]any{"surface": "filesystem", "operation": "make_reg", "path": outside, "command": "echo x > " + outside, "grant": true, "session": "s1"}
	code, out := e.daemonPost(d.socket, daemonToken(t, e, d.socket), "/v1/review", e.home, q)
	g, _ := out["grant"].(map[string]any)
	if code != 200 || g == nil {
		t.Fatalf("no grant before the restart: %d %v", code, out)
	}
	marker := "daemon-restart-" + randHex(6)
	var groups []string
	var changed kernelaudit.Status
	signalled := make(chan struct{})
	started := func(client *os.Process) {
		defer close(signalled)
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if pids := slices.DeleteFunc(processesWith(marker), func(pid int) bool { return pid == client.Pid }); len(pids) >= 2 {
				groups = runGroups(pids[0])
				break
			}
		}
		changed, _ = kernelaudit.CurrentStatus()
		d.cmd.Process.Signal(sig)
	}
	r := e.sandboxdOpts(runOpts{env: env, started: started}, "run", "--daemon", "-c", "(sleep 300; echo "+marker+") & sleep 300; echo "+marker)
	<-signalled
	noSurvivors(t, marker)
	err := waitExit(t, d, sig.String())
	if len(groups) == 0 {
		t.Fatalf("the run's processes were in no cgroup of sandboxd's\n%s", r)
	}
	if audit != nil && (changed.Enabled == 0 || changed.BacklogLimit < kernelaudit.MinBacklog) {
		t.Errorf("the run did not have kernel audit on: enabled=%d backlog=%d", changed.Enabled, changed.BacklogLimit)
	}
	if sig == syscall.SIGTERM {
		// The report is the daemon's: the client's own, for a daemon that
		// went without one, has exit 125 and an error.
		if code := fmt.Sprint(r.report["exit_code"]); err != nil || code != "137" && code != "143" || r.report["error"] != nil {
			t.Errorf("on SIGTERM: the daemon ended with %v; the client's report: exit %s, error %v\n%s", err, code, r.report["error"], r)
		}
		audit.restored(t, "the daemon's exit on SIGTERM")
	} else {
		audit.stillChanged(t)
	}
	d2 := restartDaemon(t, d.socket)
	e.sandboxdOpts(runOpts{env: env}, "serve", "status").mustSucceed(t)
	audit.restored(t, "the next daemon's start")
	for _, g := range groups {
		if _, err := os.Stat(g); !os.IsNotExist(err) {
			t.Errorf("the run's cgroup %s is still there: %v\n%s", g, err, d2.log)
		}
	}
	c := map[string]any{"token": g["token"]}
	for k, v := range q {
		if k != "grant" {
			c[k] = v
		}
	}
	if code, out := e.daemonPost(d.socket, daemonToken(t, e, d.socket), "/v1/grants/consume", e.home, c); code != 409 {
		t.Errorf("a grant issued before the restart was honoured: %d %v", code, out)
	}
	if _, err := os.Lstat(outside); err == nil {
		t.Error("the boundary's file was written")
	}
}

// daemonToken is e's token for the daemon on socket (asked for as e).
func daemonToken(t *testing.T, e *env, socket string) string {
	t.Helper()
	e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + socket}}, "serve", "status").mustSucceed(t)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(socket), "tokens", fmt.Sprint(e.id.uid)))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// runGroups are the cgroup directories of sandboxd's that pid is in.
func runGroups(pid int) []string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(filepath.Base(parts[2]), "sandboxd-") {
			continue
		}
		switch parts[1] {
		case "":
			out = append(out, filepath.Join("/sys/fs/cgroup", parts[2]))
		case "pids", "memory":
			out = append(out, filepath.Join("/sys/fs/cgroup", parts[1], parts[2]))
		}
	}
	return out
}

// auditCheck is the machine's kernel audit settings before a daemon's
// run changed them. A nil one checks nothing (see auditToChange).
type auditCheck struct {
	before kernelaudit.Status
}

// auditToChange is the audit settings before the test, arranged so that
// a run must change them (with audit on and its backlog already as
// sandboxd needs it, the test lowers the backlog limit by one, and puts
// it back when it ends). Nil, with the reason logged, when kernel audit
// cannot be reached or other sandboxd processes hold it (the last of
// them restores it, not the daemon).
func auditToChange(t *testing.T) *auditCheck {
	t.Helper()
	if _, err := kernelaudit.CurrentStatus(); err != nil {
		t.Logf("kernel audit is not reachable (%v): its settings are not checked", err)
		return nil
	}
	var a *auditCheck
	settled := auditSettled(func(st kernelaudit.Status) {
		if st.Enabled == 2 {
			t.Log("kernel audit is locked: its settings are not checked")
			return
		}
		if st.Enabled != 0 && st.BacklogLimit >= kernelaudit.MinBacklog {
			orig := st.BacklogLimit
			setAuditBacklog(t, kernelaudit.MinBacklog-1)
			st.BacklogLimit = kernelaudit.MinBacklog - 1
			t.Cleanup(func() { putBackBacklog(t, orig) })
		}
		t.Logf("kernel audit before the run: enabled=%d backlog=%d", st.Enabled, st.BacklogLimit)
		a = &auditCheck{before: st}
	})
	if !settled {
		t.Log("other sandboxd processes hold kernel audit, or one that was killed left its record: the last of them restores it, so its settings are not checked")
	}
	return a
}

// auditSettled runs f with the audit settings under kernelaudit's lock (no
// holder comes or goes meanwhile) when no holder holds them and none
// left a record of them; it reports whether it did.
func auditSettled(f func(kernelaudit.Status)) bool {
	lock, err := os.OpenFile(filepath.Join(kernelaudit.DefaultDir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false
	}
	defer lock.Close()
	if unix.Flock(int(lock.Fd()), unix.LOCK_EX) != nil || auditHolders() > 0 {
		return false
	}
	if _, err := os.Stat(filepath.Join(kernelaudit.DefaultDir, "state.json")); err == nil {
		return false
	}
	st, err := kernelaudit.CurrentStatus()
	if err != nil {
		return false
	}
	f(st)
	return true
}

// putBackBacklog puts the backlog limit the test lowered back to orig,
// once no holder keeps audit changed (one that came meanwhile took the
// lowered limit for the machine's and restores it when it leaves).
func putBackBacklog(t *testing.T, orig uint32) {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if auditSettled(func(st kernelaudit.Status) {
			if st.BacklogLimit == kernelaudit.MinBacklog-1 {
				setAuditBacklog(t, orig)
			}
		}) {
			return
		}
	}
	t.Logf("the audit backlog limit the test lowered is held by other sandboxd processes: it stays at %d, not %d", kernelaudit.MinBacklog-1, orig)
}

// stillChanged fails unless the run's settings are still in force (a
// daemon killed with SIGKILL restores nothing).
func (a *auditCheck) stillChanged(t *testing.T) {
	t.Helper()
	if a == nil || auditHolders() > 0 {
		return
	}
	st, err := kernelaudit.CurrentStatus()
	if err != nil || st.Enabled == a.before.Enabled && st.BacklogLimit == a.before.BacklogLimit {
		t.Errorf("after SIGKILL the run's audit settings are gone already (%v): enabled=%d backlog=%d", err, st.Enabled, st.BacklogLimit)
	}
	if _, err := os.Stat(filepath.Join(kernelaudit.DefaultDir, "state.json")); err != nil {
		t.Errorf("after SIGKILL there is no record of the original audit settings: %v", err)
	}
}

// restored fails unless the settings are back as they were, after when.
func (a *auditCheck) restored(t *testing.T, when string) {
	t.Helper()
	if a == nil {
		return
	}
	if n := auditHolders(); n > 0 {
		t.Logf("%d other sandboxd processes hold kernel audit now: the last of them restores it", n)
		return
	}
	st, err := kernelaudit.CurrentStatus()
	if err != nil || st.Enabled != a.before.Enabled || st.BacklogLimit != a.before.BacklogLimit {
		t.Errorf("kernel audit is not restored after %s (%v): before enabled=%d backlog=%d, now enabled=%d backlog=%d",
			when, err, a.before.Enabled, a.before.BacklogLimit, st.Enabled, st.BacklogLimit)
	}
}

// auditHolders counts the live holders of kernel audit (kernelaudit's holder
// files whose lock is taken).
func auditHolders() int {
	dir := filepath.Join(kernelaudit.DefaultDir, "holders")
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) != nil {
			n++
		}
		f.Close()
	}
	return n
}

// setAuditBacklog sets the kernel's audit backlog limit (AUDIT_SET over
// NETLINK_AUDIT, as kernelaudit does) and checks that it took.
func setAuditBacklog(t *testing.T, n uint32) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_AUDIT)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	st := kernelaudit.Status{Mask: 0x10, BacklogLimit: n} // AUDIT_STATUS_BACKLOG_LIMIT
	payload := (*[unsafe.Sizeof(kernelaudit.Status{})]byte)(unsafe.Pointer(&st))[:]
	b := make([]byte, unix.NLMSG_HDRLEN+len(payload))
	binenc.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binenc.NativeEndian.PutUint16(b[4:], 1001) // AUDIT_SET
	binenc.NativeEndian.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binenc.NativeEndian.PutUint32(b[8:], 1)
	copy(b[unix.NLMSG_HDRLEN:], payload)
	if err := unix.Sendto(fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		t.Fatal(err)
	}
	tv := unix.Timeval{Sec: 2}
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	unix.Recvfrom(fd, make([]byte, 4096), 0)
	if now, err := kernelaudit.CurrentStatus(); err != nil || now.BacklogLimit != n {
		t.Fatalf("the audit backlog limit is %d, not %d: %v", now.BacklogLimit, n, err)
	}
}
