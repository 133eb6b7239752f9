package daemon

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// socketFile is a socket made as a service manager would pass it: a
// descriptor of family, type, bound to path (if any), listening if
// listen; the test closes it.
func socketFile(t *testing.T, family, typ int, path string, listen bool) *os.File {
	t.Helper()
	fd, err := unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "passed")
	t.Cleanup(func() { f.Close() })
	var sa unix.Sockaddr = &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	if family == unix.AF_UNIX {
		sa = &unix.SockaddrUnix{Name: path}
	}
	if err := unix.Bind(fd, sa); err != nil {
		t.Fatal(err)
	}
	if listen {
		if err := unix.Listen(fd, 8); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func TestInherited(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the daemon's socket must be root's")
	}
	d := testDir(t)
	open := filepath.Join(d, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	for _, c := range []struct {
		name   string
		socket string // the daemon's --socket
		bound  string // where the passed socket is bound
		family int
		typ    int
		listen bool
		euid   int
		ok     bool
	}{
		{name: "the unit's socket", socket: "ok/s.sock", bound: "ok/s.sock", family: unix.AF_UNIX, typ: unix.SOCK_STREAM, listen: true, ok: true},
		{name: "another path", socket: "other/s.sock", bound: "other/elsewhere.sock", family: unix.AF_UNIX, typ: unix.SOCK_STREAM, listen: true},
		{name: "a directory others may write", socket: "open/s.sock", bound: "open/s.sock", family: unix.AF_UNIX, typ: unix.SOCK_STREAM, listen: true},
		{name: "datagrams", socket: "dgram/s.sock", bound: "dgram/s.sock", family: unix.AF_UNIX, typ: unix.SOCK_DGRAM},
		{name: "not listening", socket: "idle/s.sock", bound: "idle/s.sock", family: unix.AF_UNIX, typ: unix.SOCK_STREAM},
		{name: "tcp", socket: "tcp/s.sock", family: unix.AF_INET, typ: unix.SOCK_STREAM, listen: true},
		{name: "not root", socket: "user/s.sock", bound: "user/s.sock", family: unix.AF_UNIX, typ: unix.SOCK_STREAM, listen: true, euid: 1000},
	} {
		t.Run(c.name, func(t *testing.T) {
			socket := filepath.Join(d, c.socket)
			os.MkdirAll(filepath.Dir(socket), 0o755)
			f := socketFile(t, c.family, c.typ, filepath.Join(d, c.bound), c.listen)
			ln, _, err := Inherited(f, socket, c.euid)
			tokens := filepath.Join(filepath.Dir(socket), "tokens")
			_, terr := os.Lstat(tokens)
			if !c.ok {
				if err == nil {
					ln.Close()
					t.Fatal("served")
				}
				t.Log(err)
				if terr == nil {
					t.Errorf("wrote the token directory %s for a socket it refused", tokens)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			if terr != nil {
				t.Errorf("no token directory beside the socket: %v", terr)
			}
			// The listener is the passed socket: a client of the path
			// reaches it.
			go func() {
				if c, err := net.Dial("unix", socket); err == nil {
					c.Close()
				}
			}()
			conn, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			conn.Close()
			ln.Close()
			if _, err := os.Lstat(socket); err != nil {
				t.Errorf("closing the listener removed the service manager's socket: %v", err)
			}
		})
	}
}

// A socket directory of root's under a directory another user may write
// is refused: that user could swap it, and the tokens written there.
func TestListenRefusesAWritableParent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the daemon's checks want root")
	}
	// Not under /tmp, which anyone may write: the refusal must come
	// from the directory the test opens.
	base, err := os.MkdirTemp("/var/lib", "sandboxd-listen-")
	if err != nil {
		t.Skip("no /var/lib to work in")
	}
	defer os.RemoveAll(base)
	os.Chmod(base, 0o755)
	if ln, _, err := Listen(filepath.Join(base, "ok", "sandboxd.sock"), 0); err != nil {
		t.Fatalf("a directory of root's alone was refused: %v", err)
	} else {
		ln.Close()
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	run := filepath.Join(open, "run")
	os.Mkdir(run, 0o755)
	ln, _, err := Listen(filepath.Join(run, "sandboxd.sock"), 0)
	if err == nil {
		ln.Close()
		t.Fatal("listened under a directory anyone may write")
	}
	if _, err := os.Lstat(filepath.Join(run, "tokens")); err == nil {
		t.Fatal("wrote the token directory there")
	}
}
