package daemon

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/daemon/client"
	"golang.org/x/sys/unix"
)

// testDir is a directory of the test's own, not under /tmp (world
// writable: no socket under it is trusted).
func testDir(t *testing.T) string {
	t.Helper()
	base := "/var/lib/sandboxd-daemon-test"
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Skip("no place for the test's sockets: ", err)
	}
	d, err := os.MkdirTemp(base, "t-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o755)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func listenAt(t *testing.T, p string) {
	t.Helper()
	ln, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
}

func TestTrustedSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sockets must be root's")
	}
	d := testDir(t)
	good := filepath.Join(d, "good.sock")
	listenAt(t, good)
	open := filepath.Join(d, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	inOpen := filepath.Join(open, "s.sock")
	listenAt(t, inOpen)
	mine := filepath.Join(d, "mine.sock")
	listenAt(t, mine)
	os.Lchown(mine, 65534, 65534)
	file := filepath.Join(d, "file")
	os.WriteFile(file, nil, 0o644)
	link := filepath.Join(d, "link.sock")
	os.Symlink(good, link)
	userLink := filepath.Join(d, "userlink.sock")
	os.Symlink(good, userLink)
	os.Lchown(userLink, 65534, 65534)
	for _, tc := range []struct {
		path, err string
	}{
		{good, ""},
		{link, ""},
		{inOpen, "only root may write"},
		{mine, "not a socket of root's"},
		{file, "not a socket of root's"},
		{userLink, "symlink that is not root's"},
		{filepath.Join(d, "none.sock"), "cannot be reached"},
		{"relative.sock", "not an absolute path"},
	} {
		err := TrustedSocket(tc.path)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("TrustedSocket(%s) = %v, want %q", tc.path, err, tc.err)
		}
	}
}

func TestTokens(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("token files are chowned to their uid")
	}
	d := testDir(t)
	dir := filepath.Join(d, "tokens")
	os.MkdirAll(dir, 0o777)
	os.WriteFile(filepath.Join(dir, "1234"), []byte("stale\n"), 0o644)
	tk, err := NewTokens(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o711 {
		t.Errorf("token directory mode %v", st.Mode())
	}
	if _, err := os.Stat(filepath.Join(dir, "1234")); err == nil {
		t.Error("an earlier daemon's token survived")
	}
	p, err := tk.Ensure(65534, 65534)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(p)
	if err != nil || st.Mode().Perm() != 0o400 || st.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Fatalf("token file %v %v", st, err)
	}
	b, _ := os.ReadFile(p)
	tok := strings.TrimSpace(string(b))
	if !tk.Check(65534, tok) || tk.Check(0, tok) || tk.Check(65534, tok[:10]) || tk.Check(65534, "") {
		t.Error("Check accepts the wrong token or uid")
	}
	if p2, _ := tk.Ensure(65534, 65534); p2 != p || !tk.Check(65534, tok) {
		t.Error("Ensure replaced a token in use")
	}
}

// The kernel's word on a peer: this process, not nested.
func TestPeerOfSocketpair(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	p, err := peerOfFD(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	groups, _ := os.Getgroups()
	if p.UID != os.Getuid() || p.GID != os.Getgid() || p.PID != os.Getpid() || p.Nested || len(p.Groups) != len(groups) {
		t.Errorf("peer %+v (groups %v)", p, groups)
	}
}

// Connect talks to the socket it checked: SANDBOXD_SOCKET as given may
// hold a ".." after a symlink of another user's, which the check's clean
// path does not follow and the kernel does.
func TestConnectDialsTheCheckedPath(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the sockets must be root's")
	}
	d := testDir(t)
	os.MkdirAll(filepath.Join(d, "run"), 0o755)
	tok := filepath.Join(d, "run", "tok")
	os.WriteFile(tok, []byte("good\n"), 0o600)
	good, err := net.Listen("unix", filepath.Join(d, "run", "d.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"path": tok})
	})}
	go srv.Serve(good)
	t.Cleanup(func() { srv.Close() })
	// Another user's: a directory anyone may write, a symlink in it, and
	// a socket where the kernel's reading of the path ends.
	os.MkdirAll(filepath.Join(d, "evil", "x", "y"), 0o755)
	os.MkdirAll(filepath.Join(d, "evil", "run"), 0o755)
	os.Mkdir(filepath.Join(d, "open"), 0o777)
	os.Chmod(filepath.Join(d, "open"), 0o777)
	os.Symlink(filepath.Join(d, "evil", "x", "y"), filepath.Join(d, "open", "a"))
	evil, err := net.Listen("unix", filepath.Join(d, "evil", "run", "d.sock"))
	if err != nil {
		t.Fatal(err)
	}
	var heard atomic.Int32
	go func() {
		for {
			c, err := evil.Accept()
			if err != nil {
				return
			}
			heard.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { evil.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, d+"/open/a/../../run/d.sock", 0)
	if heard.Load() != 0 {
		t.Fatalf("the client dialled the socket the kernel found, not the one it checked (%d connections)", heard.Load())
	}
	if err != nil || c.token != "good" {
		t.Fatalf("Connect: %v", err)
	}
}

// A client never talks to a listener that is not root's, whatever path
// led it there: the kernel's word on the peer decides.
func TestDialRefusesAListenerNotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a listener as another user")
	}
	py := "/usr/bin/python3" // the system's: another uid may run it
	if _, err := os.Stat(py); err != nil {
		t.Skip("needs /usr/bin/python3 for a listener of another uid")
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755) // t.TempDir's parent is 0700
	os.Chmod(dir, 0o777)
	sock := filepath.Join(dir, "s")
	cmd := exec.Command(py, "-c", "import socket,sys,time\ns=socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\ns.listen()\nprint('up',flush=True)\nc,_=s.accept()\nprint('got',len(c.recv(100)),flush=True)\ntime.sleep(1)", sock)
	cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	r := bufio.NewReader(out)
	if l, _ := r.ReadString('\n'); l != "up\n" {
		t.Fatalf("listener: %q", l)
	}
	if c, err := client.Dial(context.Background(), sock, nil); err == nil {
		c.Close()
		t.Fatal("dialled a listener of uid 65534")
	}
	if l, _ := r.ReadString('\n'); l != "got 0\n" {
		t.Fatalf("the listener got bytes: %q", l)
	}
}

// A pseudo-terminal's master is told from its slave: only the slave is a
// terminal a person reads.
func TestPtyMaster(t *testing.T) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skip("no /dev/ptmx here")
	}
	defer m.Close()
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0)
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !ptyMaster(m) || ptyMaster(s) {
		t.Fatalf("master %v, slave %v", ptyMaster(m), ptyMaster(s))
	}
}
