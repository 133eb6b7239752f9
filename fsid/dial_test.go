package fsid

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// caller is a user that exists nowhere: the kernel needs no account to
// record a socket's owner.
var caller = ID{UID: 64101, GID: 64101, Groups: []int{64101}, Umask: 0o022}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
}

// counter is a TCP listener that accepts and counts connections.
type counter struct {
	net.Listener
	hits atomic.Int64
}

func listen(t *testing.T, network, addr string) *counter {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("no %s listener on %s here: %v", network, addr, err)
	}
	c := &counter{Listener: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.hits.Add(1)
			conn.Close()
		}
	}()
	return c
}

func (c *counter) port() int { return c.Addr().(*net.TCPAddr).Port }

// owner is the uid the kernel records for the connected socket c, as
// /proc/net/{tcp,tcp6,udp,udp6} show it: the line with c's own local and
// remote addresses (a TIME_WAIT socket of an earlier connection may hold
// the same port, as root's).
func owner(t *testing.T, network string, c net.Conn) int {
	t.Helper()
	local, err := netip.ParseAddrPort(c.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	remote, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	file := "/proc/net/" + network
	if local.Addr().Is6() {
		file += "6"
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 7 && f[1] == procAddr(local) && f[2] == procAddr(remote) && f[3] != "06" {
			uid, err := strconv.Atoi(f[7])
			if err != nil {
				t.Fatal(err)
			}
			return uid
		}
	}
	t.Fatalf("no socket %s -> %s in %s", local, remote, file)
	return -1
}

// procAddr is ap as /proc/net/tcp prints it: the address as 32-bit words
// in the host's (little-endian) order, then the port.
func procAddr(ap netip.AddrPort) string {
	b := ap.Addr().AsSlice()
	var s strings.Builder
	for i := 0; i < len(b); i += 4 {
		fmt.Fprintf(&s, "%02X%02X%02X%02X", b[i+3], b[i+2], b[i+1], b[i])
	}
	return fmt.Sprintf("%s:%04X", s.String(), ap.Port())
}

// TestDialerOwner: the sockets a Dialer makes are the caller's for the
// kernel (TCP over IPv4 and IPv6, UDP, a name), while the process stays
// root.
func TestDialerOwner(t *testing.T) {
	needRoot(t)
	v4, v6 := listen(t, "tcp4", "127.0.0.1:0"), listen(t, "tcp6", "[::1]:0")
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	d := Dialer{ID: caller, Timeout: 5 * time.Second}
	for _, tc := range []struct{ network, addr string }{
		{"tcp", "127.0.0.1:" + strconv.Itoa(v4.port())},
		{"tcp6", "[::1]:" + strconv.Itoa(v6.port())},
		{"tcp4", "localhost:" + strconv.Itoa(v4.port())},
		{"udp", udp.LocalAddr().String()},
	} {
		c, err := d.DialContext(context.Background(), tc.network, tc.addr)
		if err != nil {
			t.Errorf("%s %s: %v", tc.network, tc.addr, err)
			continue
		}
		if got := owner(t, tc.network[:3], c); got != caller.UID {
			t.Errorf("%s %s: the kernel says uid %d owns the socket, want %d", tc.network, tc.addr, got, caller.UID)
		}
		c.Close()
	}
	if fsuid, _ := unix.SetfsuidRetUid(-1); fsuid != 0 {
		t.Errorf("the test's own thread has fsuid %d after dialling", fsuid)
	}
	// Root's own dial, for comparison: the column does tell them apart.
	c, err := net.Dial("tcp", v4.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := owner(t, "tcp", c); got != 0 {
		t.Errorf("root's own socket shows uid %d", got)
	}
}

// TestDialerSelf: a process dialling for itself needs no privilege.
func TestDialerSelf(t *testing.T) {
	ln := listen(t, "tcp4", "127.0.0.1:0")
	groups, _ := os.Getgroups()
	d := Dialer{ID: ID{UID: os.Geteuid(), GID: os.Getegid(), Groups: groups}}
	c, err := d.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestDialerRefused: an address Check refuses gets no socket and no
// connection; an unreachable port is an error, not a hang; a network
// other than TCP or UDP is refused.
func TestDialerRefused(t *testing.T) {
	ln := listen(t, "tcp4", "127.0.0.1:0")
	errReserved := errors.New("reserved")
	d := Dialer{ID: caller, Check: func(ap netip.AddrPort) error {
		if int(ap.Port()) == ln.port() {
			return errReserved
		}
		return nil
	}}
	if os.Geteuid() != 0 {
		groups, _ := os.Getgroups()
		d.ID = ID{UID: os.Geteuid(), GID: os.Getegid(), Groups: groups}
	}
	for _, addr := range []string{ln.Addr().String(), "localhost:" + strconv.Itoa(ln.port())} {
		if c, err := d.DialContext(context.Background(), "tcp", addr); !errors.Is(err, errReserved) {
			t.Errorf("dial %s that Check refuses: %v, %v", addr, c, err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	if n := ln.hits.Load(); n != 0 {
		t.Errorf("the refused listener accepted %d connections", n)
	}
	ln.Close()
	d.Check = nil
	if _, err := d.DialContext(context.Background(), "tcp", ln.Addr().String()); !errors.Is(err, unix.ECONNREFUSED) {
		t.Errorf("dial a closed port: %v, want connection refused", err)
	}
	if _, err := d.DialContext(context.Background(), "unix", "/run/x"); err == nil {
		t.Error("dialled a unix socket")
	}
}

// fullListener is a TCP port whose accept queue is full: the kernel
// drops further SYNs, so a connect to it waits until the dialer gives up.
func fullListener(t *testing.T) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(fd)
	addr := "127.0.0.1:" + strconv.Itoa(sa.(*unix.SockaddrInet4).Port)
	for i := 0; i < 4; i++ {
		d := net.Dialer{Timeout: 200 * time.Millisecond}
		if c, err := d.Dial("tcp", addr); err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}
	return addr
}

// TestDialerCancel: a connect that never completes ends at the
// context's deadline and at its cancellation, and leaves no descriptor.
func TestDialerCancel(t *testing.T) {
	addr := fullListener(t)
	groups, _ := os.Getgroups()
	d := Dialer{ID: ID{UID: os.Geteuid(), GID: os.Getegid(), Groups: groups}}
	fds := openFDs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if c, err := d.DialContext(ctx, "tcp", addr); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial a full accept queue with a deadline: %v, %v", c, err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("the deadline took %v", el)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	if c, err := d.DialContext(ctx, "tcp", addr); !errors.Is(err, context.Canceled) {
		t.Fatalf("dial a full accept queue, cancelled: %v, %v", c, err)
	}
	d.Timeout = 200 * time.Millisecond
	if c, err := d.DialContext(context.Background(), "tcp", addr); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial a full accept queue with Timeout: %v, %v", c, err)
	}
	if now := openFDs(t); now != fds {
		t.Errorf("%d descriptors open before the dials, %d after", fds, now)
	}
}

// TestDialerNoLeak: a Dialer's connection holds one descriptor, and
// closing it frees it.
func TestDialerNoLeak(t *testing.T) {
	// Nothing accepts: the connections wait in the listener's queue, so
	// the only descriptors they add are the dialler's.
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	groups, _ := os.Getgroups()
	d := Dialer{ID: ID{UID: os.Geteuid(), GID: os.Getegid(), Groups: groups}}
	fds := openFDs(t)
	for i := 0; i < 50; i++ {
		c, err := d.DialContext(context.Background(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if now := openFDs(t); now != fds+1 {
			t.Fatalf("one connection holds %d descriptors", now-fds)
		}
		c.Close()
	}
	if now := openFDs(t); now != fds {
		t.Errorf("%d descriptors open before, %d after", fds, now)
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es) - 1 // ReadDir's own
}

// TestDialerFirewall: a host firewall's owner match sees the caller.
// A rule that refuses every uid but root on a loopback port refuses the
// Dialer's connection for the caller and lets root's through, both for
// iptables' owner match (the socket file's credentials) and for
// nftables' meta skuid (the socket's uid).
func TestDialerFirewall(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		tool, pkg string
		rule      func(port string) (add, del []string, script string)
	}{
		{"iptables", "iptables", func(port string) (add, del []string, script string) {
			r := []string{"OUTPUT", "-o", "lo", "-p", "tcp", "--dport", port,
				"-m", "owner", "!", "--uid-owner", "0", "-j", "REJECT", "--reject-with", "tcp-reset"}
			return append([]string{"-I"}, r...), append([]string{"-D"}, r...), ""
		}},
		{"nft", "nftables", func(port string) (add, del []string, script string) {
			table := "sandboxd_fsid_test_" + port
			return []string{"-f", "-"}, []string{"delete", "table", "inet", table},
				"add table inet " + table + "\n" +
					"add chain inet " + table + " out { type filter hook output priority 0; }\n" +
					"add rule inet " + table + " out oif lo tcp dport " + port + " meta skuid != 0 reject with tcp reset\n"
		}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			if _, err := exec.LookPath(tc.tool); err != nil {
				t.Skipf("%s is not installed (Debian: apt-get install %s)", tc.tool, tc.pkg)
			}
			ln := listen(t, "tcp4", "127.0.0.1:0")
			add, del, script := tc.rule(strconv.Itoa(ln.port()))
			firewall(t, tc.tool, add, del, script)
			d := Dialer{ID: caller, Timeout: 5 * time.Second}
			if c, err := d.DialContext(context.Background(), "tcp", ln.Addr().String()); err == nil {
				c.Close()
				t.Errorf("a rule for every uid but root let the caller's connection through")
			}
			if n := ln.hits.Load(); n != 0 {
				t.Fatalf("the listener accepted %d connections of the caller's", n)
			}
			root := Dialer{ID: ID{UID: 0, GID: 0}, Timeout: 5 * time.Second}
			c, err := root.DialContext(context.Background(), "tcp", ln.Addr().String())
			if err != nil {
				t.Fatalf("root's connection was refused too: %v", err)
			}
			c.Close()
		})
	}
}

// firewall runs tool with add (script on its stdin) and, in t.Cleanup,
// with del.
func firewall(t *testing.T, tool string, add, del []string, script string) {
	t.Helper()
	run := func(args []string, stdin string) ([]byte, error) {
		cmd := exec.Command(tool, args...)
		cmd.Env, cmd.Dir = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, "/"
		cmd.Stdin = strings.NewReader(stdin)
		return cmd.CombinedOutput()
	}
	if out, err := run(add, script); err != nil {
		t.Skipf("cannot add the firewall rule (%v): %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := run(del, ""); err != nil {
			t.Errorf("remove the firewall rule: %v: %s", err, out)
		}
	})
}

// BenchmarkDial compares a Dialer's loopback connect (a thread of its
// own for the socket) with net.Dialer's.
func BenchmarkDial(b *testing.B) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	groups, _ := os.Getgroups()
	as := Dialer{ID: ID{UID: os.Geteuid(), GID: os.Getegid(), Groups: groups}}
	var plain net.Dialer
	for _, d := range []struct {
		name string
		dial func(context.Context, string, string) (net.Conn, error)
	}{{"fsid", as.DialContext}, {"net", plain.DialContext}} {
		b.Run(d.name, func(b *testing.B) {
			for b.Loop() {
				c, err := d.dial(context.Background(), "tcp", ln.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}
