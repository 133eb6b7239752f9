package daemon

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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
