package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// unitCaps is deploy/sandboxd.service's CapabilityBoundingSet, as
// setpriv --bounding-set takes it.
func unitCaps(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../deploy/sandboxd.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapabilityBoundingSet="); ok {
			set := "-all"
			for _, c := range strings.Fields(v) {
				set += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
			}
			return set
		}
	}
	t.Fatal("deploy/sandboxd.service has no CapabilityBoundingSet")
	return ""
}

// systemdSocket is what sandboxd.socket makes: a listening socket of
// root's, 0666, in a directory of root's, 0755. The test holds it, as
// systemd does, across the daemons it starts.
func systemdSocket(t *testing.T) (string, *os.File) {
	t.Helper()
	dir, err := os.MkdirTemp(baseDir, "activated-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { removeAll(dir) })
	run := filepath.Join(dir, "run")
	os.Mkdir(run, 0o755)
	socket := filepath.Join(run, "sandboxd.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	os.Chmod(socket, 0o666)
	f, err := ln.File()
	ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return socket, f
}

// activate starts `sandboxd serve --socket socket` as systemd starts
// sandboxd.service: with the unit's capability bounding set and
// no_new_privs, the passed socket as descriptor 3, LISTEN_FDS=fds and
// LISTEN_PID naming the daemon. It returns once the daemon listens or
// has exited.
func activate(t *testing.T, f *os.File, socket, fds string) *testDaemon {
	t.Helper()
	d := &testDaemon{socket: socket, log: &syncBuffer{}, exited: make(chan error, 1)}
	d.cmd = exec.Command("setpriv", "--bounding-set", unitCaps(t), "--no-new-privs", "--",
		"/bin/sh", "-c", `export LISTEN_PID=$$ LISTEN_FDS="$2"; exec "$0" serve -v --socket "$1"`, binary, socket, fds)
	d.cmd.Dir, d.cmd.Env = "/", []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
	d.cmd.Stderr, d.cmd.ExtraFiles = d.log, []*os.File{f}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exited <- d.cmd.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(d.log.String(), "listening"); time.Sleep(20 * time.Millisecond) {
		if d.cmd.ProcessState != nil || time.Now().After(deadline) {
			break
		}
		select {
		case err := <-d.exited:
			d.exited <- err
			return d
		default:
		}
	}
	return d
}

// stop sends the daemon SIGTERM and waits for it: it must exit 0.
func (d *testDaemon) stop(t *testing.T) {
	t.Helper()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		if err != nil {
			t.Errorf("the daemon ended with %v\n%s", err, d.log.String())
		}
	case <-time.After(15 * time.Second):
		d.cmd.Process.Kill()
		t.Errorf("the daemon did not stop on SIGTERM\n%s", d.log.String())
	}
}

// reportEnv is what the daemon's capabilities could change in a report:
// the isolation and detection it managed, and what it had to do without.
func reportEnv(r result) string {
	b, _ := json.Marshal(map[string]any{"isolation": r.report["isolation"], "detection": r.report["detection"],
		"degraded": r.report["degraded"], "containment": r.report["containment"], "network_mode": r.report["network_mode"],
		"landlock_abi": r.report["landlock_abi"], "error": r.report["error"]})
	return string(b)
}

// Started as systemd starts the units (socket activation, the unit's
// capabilities only), the daemon serves the socket it is passed, for
// root and an unprivileged caller, with runs that report and enforce as
// a daemon with every capability does; the socket outlives it, and the
// next daemon serves it again.
func TestDaemonSocketActivation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxd serve runs as root")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is not installed")
	}
	full := startDaemon(t)
	socket, f := systemdSocket(t)
	d := activate(t, f, socket, "1")
	if !strings.Contains(d.log.String(), "from_service_manager=true") {
		t.Fatalf("the daemon did not take the passed socket\n%s", d.log.String())
	}
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.log.String())
		}
	}()
	forEach(t, func(t *testing.T, e *env) {
		vars := []string{"SANDBOXD_SOCKET=" + socket}
		if r := e.sandboxdOpts(runOpts{env: vars}, "serve", "status"); r.code != 0 || !strings.Contains(r.stdout, fmt.Sprintf("you are: uid %d", e.id.uid)) {
			t.Fatalf("serve status through the passed socket\n%s", r)
		}
		outside := e.mkdir("outside", 0o755)
		for _, args := range [][]string{
			{"-c", "echo w > w.txt; cat w.txt"},
			{"-c", "echo x > " + filepath.Join(outside, "x")},
			{"-c", "cat ~/.ssh/id_rsa"},
			{"-c", "curl -s -m 5 -o /dev/null http://" + hostListener(t) + "/; echo curl=$?"},
			{"-c", "rm -rf r && git init -q r && cd r && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m x && git log --oneline | wc -l"},
			{"--timeout", "1s", "-c", "sleep 30"},
		} {
			os.Remove(filepath.Join(e.ws, "w.txt"))
			want := e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + full}}, append([]string{"run", "--daemon"}, args...)...)
			os.Remove(filepath.Join(e.ws, "w.txt"))
			got := e.sandboxdOpts(runOpts{env: vars}, append([]string{"run", "--daemon"}, args...)...)
			e.noCanary(t, got)
			if got.code != want.code || got.stdout != want.stdout || reportCore(got) != reportCore(want) || reportEnv(got) != reportEnv(want) {
				t.Errorf("%q: with the unit's capabilities and with all differ\n--- unit's\n%s\n%s%s\n--- all\n%s\n%s%s", args, got, reportCore(got), reportEnv(got), want, reportCore(want), reportEnv(want))
			}
			if _, err := os.Lstat(filepath.Join(outside, "x")); err == nil {
				t.Fatalf("%q: the write outside landed", args)
			}
		}
	})
	d.stop(t)
	if st, err := os.Lstat(socket); err != nil || st.Mode()&os.ModeSocket == 0 {
		t.Fatalf("the daemon removed the service manager's socket: %v", err)
	}
	// systemd starts the service again on the next connection, with the
	// same socket.
	again := activate(t, f, socket, "1")
	defer again.stop(t)
	ids := identities(t)
	e := newEnv(t, ids[len(ids)-1])
	if r := e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + socket}}, "serve", "status"); r.code != 0 {
		t.Fatalf("serve status after a restart on the same socket\n%s\n%s", r, again.log.String())
	}
}

// A passed socket the daemon cannot vouch for is refused, and nothing
// is written beside it: more than one socket, or one bound elsewhere
// than --socket.
func TestDaemonSocketActivationRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxd serve runs as root")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is not installed")
	}
	socket, f := systemdSocket(t)
	other := filepath.Join(filepath.Dir(filepath.Dir(socket)), "other", "sandboxd.sock")
	os.Mkdir(filepath.Dir(other), 0o755)
	for _, c := range []struct {
		name, socket, fds, why string
	}{
		{"two sockets", socket, "2", "takes exactly one"},
		{"another path", other, "1", "must name the same path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := activate(t, f, c.socket, c.fds)
			select {
			case err := <-d.exited:
				if err == nil || !strings.Contains(d.log.String(), c.why) {
					t.Errorf("want a refusal saying %q, got %v\n%s", c.why, err, d.log.String())
				}
			case <-time.After(10 * time.Second):
				d.stop(t)
				t.Fatalf("the daemon served\n%s", d.log.String())
			}
			for _, p := range []string{filepath.Join(filepath.Dir(socket), "tokens"), filepath.Join(filepath.Dir(other), "tokens")} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("a refused daemon made %s", p)
				}
			}
			if _, err := os.Lstat(other); err == nil {
				t.Errorf("a refused daemon made its own socket at %s", other)
			}
		})
	}
}
