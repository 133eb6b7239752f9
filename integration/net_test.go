package integration

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The network and kernel-surface cases: nothing a command does inside the
// sandbox reaches a host listener, a host unix socket, another host
// process, the inherited terminal or an inherited descriptor, and the
// system calls the seccomp filter refuses stay refused.

// TestNetTCPToHost: TCP connects from inside (bash /dev/tcp and python) to
// host listeners on 127.0.0.1, ::1 and the host's own address reach nothing.
// Loopback is the run's own (refused: nothing listens there); the host's
// address is captured and refused by the proxy, which accepts the
// connect and then resets it, so the command sees a reset or an end and
// never a byte from the host.
func TestNetTCPToHost(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		l4 := tcpListener(t, "tcp", "127.0.0.1:0")
		targets := []*listener{l4}
		if l6, err := net.Listen("tcp6", "[::1]:0"); err == nil {
			l6.Close()
			targets = append(targets, tcpListener(t, "tcp6", "[::1]:0"))
		}
		if ip := netHostIPv4(); ip != "" {
			targets = append(targets, tcpListener(t, "tcp", net.JoinHostPort(ip, "0")))
		}
		var script strings.Builder
		for _, l := range targets {
			host, port := netSplitAddr(t, l.addr)
			if !strings.Contains(host, ":") {
				fmt.Fprintf(&script, "(echo bash-tcp > /dev/tcp/%s/%s) 2>/dev/null && echo BASH_CONNECTED %s\n", host, port, host)
			}
		}
		script.WriteString(netPy(`
import socket
for host, port in @TARGETS@:
    fam = socket.AF_INET6 if ':' in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((host, port))
        s.sendall(b'python-tcp')
        got = s.recv(1)
        print('PY_CONNECTED' if got else 'PY_ENDED', host)
    except OSError as e:
        print('python connect', host, 'errno', e.errno)
`, "@TARGETS@", netPyTargets(t, targets)))
		script.WriteString("echo END\n")
		r := e.sh(script.String())
		netRan(t, r)
		if strings.Contains(r.stdout, "PY_CONNECTED") {
			t.Errorf("a TCP connection got bytes from the host\n%s", r)
		}
		for _, l := range targets {
			host, _ := netSplitAddr(t, l.addr)
			if net.ParseIP(host).IsLoopback() && strings.Contains(r.stdout, "CONNECTED "+host+"\n") {
				t.Errorf("a TCP connection to the host's %s succeeded\n%s", host, r)
			}
		}
		for _, l := range targets {
			l.mustBeSilent(t)
		}
	})
}

// TestNetUDPToHost: no datagram from inside reaches a host UDP listener.
// With the proxy's capture (namespaces), UDP sockets exist for the stub
// resolver, and netfilter refuses every other datagram (EPERM);
// otherwise seccomp refuses the socket (EACCES).
func TestNetUDPToHost(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		l := udpListener(t)
		host, port := netSplitAddr(t, l.addr)
		r := e.sh(fmt.Sprintf("(echo bash-udp > /dev/udp/%s/%s) 2>/dev/null && echo BASH_SENT\n", host, port) + netPy(`
import socket
addr = ('@HOST@', @PORT@)
def attempt(name, fam, typ, proto, dest):
    try:
        s = socket.socket(fam, typ, proto)
    except OSError as e:
        print(name, 'socket errno', e.errno)
        return
    try:
        s.sendto(name.encode(), dest)
        print('SENT', name)
    except OSError as e:
        print(name, 'sendto errno', e.errno)
attempt('dgram', socket.AF_INET, socket.SOCK_DGRAM, 0, addr)
attempt('dgram-udp', socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP, addr)
attempt('dgram-flags', socket.AF_INET, socket.SOCK_DGRAM | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC, 0, addr)
attempt('dgram6', socket.AF_INET6, socket.SOCK_DGRAM, 0, ('::ffff:@HOST@', @PORT@))
attempt('raw-udp', socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP, addr)
attempt('stream-udp', socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_UDP, addr)
`, "@HOST@", host, "@PORT@", port) + "echo END\n")
		netRan(t, r)
		if strings.Contains(r.stdout, "SENT") {
			t.Errorf("a UDP datagram was sent\n%s", r)
		}
		for _, name := range []string{"dgram", "dgram-udp", "dgram-flags", "dgram6"} {
			if !strings.Contains(r.stdout, name+" socket errno 13\n") && !strings.Contains(r.stdout, name+" sendto errno 1\n") {
				t.Errorf("%s was not refused (socket with EACCES, or sendto with EPERM)\n%s", name, r)
			}
		}
		l.mustBeSilent(t)
	})
}

// TestNetMPTCP: Multipath TCP (protocol 262), which Landlock's TCP rules do
// not cover, cannot reach a host listener.
func TestNetMPTCP(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		l := tcpListener(t, "tcp", "127.0.0.1:0")
		host, port := netSplitAddr(t, l.addr)
		r := e.sh(netPy(`
import socket
for fam, host in [(socket.AF_INET, '@HOST@'), (socket.AF_INET6, '::ffff:@HOST@')]:
    try:
        s = socket.socket(fam, socket.SOCK_STREAM, 262)
    except OSError as e:
        print('mptcp', fam, 'socket errno', e.errno)
        continue
    s.settimeout(3)
    try:
        s.connect((host, @PORT@))
        s.sendall(b'mptcp')
        print('MPTCP_CONNECTED', fam)
    except OSError as e:
        print('mptcp', fam, 'connect errno', e.errno)
`, "@HOST@", host, "@PORT@", port) + "echo END\n")
		netRan(t, r)
		if strings.Contains(r.stdout, "CONNECTED") {
			t.Errorf("an MPTCP connection succeeded\n%s", r)
		}
		if strings.Count(r.stdout, "socket errno 13\n") != 2 {
			t.Errorf("socket(..., IPPROTO_MPTCP) was not refused with EACCES\n%s", r)
		}
		l.mustBeSilent(t)
	})
}

// TestNetTCPFastOpen: data in the SYN (MSG_FASTOPEN, TCP_FASTOPEN_CONNECT)
// is refused and reaches nothing.
func TestNetTCPFastOpen(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		l := tcpListener(t, "tcp", "127.0.0.1:0")
		host, port := netSplitAddr(t, l.addr)
		r := e.sh(netPy(`
import socket
addr = ('@HOST@', @PORT@)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    s.sendto(b'tfo-sendto', socket.MSG_FASTOPEN, addr)
    print('SENT sendto')
except OSError as e:
    print('sendto errno', e.errno)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    s.sendmsg([b'tfo-sendmsg'], [], socket.MSG_FASTOPEN, addr)
    print('SENT sendmsg')
except OSError as e:
    print('sendmsg errno', e.errno)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    s.setsockopt(socket.IPPROTO_TCP, 30, 1)
    print('fastopen_connect set')
except OSError as e:
    print('fastopen_connect errno', e.errno)
s.settimeout(3)
try:
    s.connect(addr)
    s.sendall(b'tfo-connect')
    print('SENT connect')
except OSError as e:
    print('connect errno', e.errno)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
try:
    s.setsockopt(socket.IPPROTO_TCP, 23, 5)
    print('fastopen set')
except OSError as e:
    print('fastopen errno', e.errno)
`, "@HOST@", host, "@PORT@", port) + "echo END\n")
		netRan(t, r)
		if strings.Contains(r.stdout, "SENT") {
			t.Errorf("Fast Open data was sent\n%s", r)
		}
		for _, want := range []string{"sendto errno 1\n", "sendmsg errno 1\n", "fastopen_connect errno 1\n", "fastopen errno 1\n"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("want %q (EPERM from the filter)\n%s", want, r)
			}
		}
		l.mustBeSilent(t)
	})
}

// TestNetHostUnixSockets: a pathname unix socket the identity could
// otherwise connect to, an abstract one, and a socket in
// $XDG_RUNTIME_DIR receive nothing; /run and $XDG_RUNTIME_DIR look empty.
func TestNetHostUnixSockets(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		sockDir := e.mkdir("sock", 0o777)
		path := filepath.Join(sockDir, "host.sock")
		pathL := netUnixListener(t, "unix", path)
		os.Chmod(path, 0o777)
		dgramPath := filepath.Join(sockDir, "dgram.sock")
		dgramL := netUnixgramListener(t, dgramPath)
		os.Chmod(dgramPath, 0o777)
		abstract := "sandboxd-it-" + randHex(6)
		abstractL := netUnixListener(t, "unix", "@"+abstract)
		xdg := e.mkdir("xdg", 0o700)
		busPath := filepath.Join(xdg, "bus")
		busL := netUnixListener(t, "unix", busPath)
		os.Chmod(busPath, 0o777)
		e.chown(busPath)

		script := netPy(`
import socket
targets = [('@PATH@', socket.SOCK_STREAM), ('@DGRAM@', socket.SOCK_DGRAM), ('\0@ABSTRACT@', socket.SOCK_STREAM),
           ('\0@ABSTRACT@', socket.SOCK_SEQPACKET), ('@BUS@', socket.SOCK_STREAM)]
for addr, typ in targets:
    name = repr(addr) + ' ' + str(typ)
    try:
        s = socket.socket(socket.AF_UNIX, typ)
    except OSError as e:
        print(name, 'socket errno', e.errno)
        continue
    try:
        if typ == socket.SOCK_DGRAM:
            s.sendto(b'unix-dgram', addr)
        else:
            s.connect(addr)
            s.sendall(b'unix-stream')
        print('UNIX_REACHED', name)
    except OSError as e:
        print(name, 'connect errno', e.errno)
# a socketpair end is a unix socket the filter allows: it must not be
# re-aimable at a host socket.
a, b = socket.socketpair()
for addr in ['@PATH@', '\0@ABSTRACT@']:
    try:
        a.connect(addr)
        a.sendall(b'socketpair')
        print('UNIX_REACHED socketpair', repr(addr))
    except OSError as e:
        print('socketpair connect errno', e.errno)
`, "@PATH@", path, "@DGRAM@", dgramPath, "@ABSTRACT@", abstract, "@BUS@", busPath) + fmt.Sprintf(`
if command -v socat >/dev/null; then
  echo socat | socat -t1 - UNIX-CONNECT:%[1]s && echo UNIX_REACHED socat
  echo socat | socat -t1 - ABSTRACT-CONNECT:%[2]s && echo UNIX_REACHED socat-abstract
fi
if command -v nc >/dev/null; then
  echo nc | timeout 2 nc -U %[1]s && echo UNIX_REACHED nc
fi
echo "RUN[$(ls -A /run 2>/dev/null)]"
echo "VARRUN[$(ls -A /var/run/ 2>/dev/null)]"
echo "XDG[$(ls -A %[3]s 2>/dev/null)]"
echo "XDGENV[$(ls -A "${XDG_RUNTIME_DIR:-/nonexistent}" 2>/dev/null)]"
echo END
`, path, abstract, xdg)
		r := e.sandboxdOpts(runOpts{env: []string{"XDG_RUNTIME_DIR=" + xdg}}, "run", "-c", script)
		netRan(t, r)
		if strings.Contains(r.stdout, "UNIX_REACHED") {
			t.Errorf("a host unix socket was reached\n%s", r)
		}
		for _, want := range []string{"RUN[]", "VARRUN[]", "XDG[]", "XDGENV[]"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("runtime directory contents are visible: want %s\n%s", want, r)
			}
		}
		for _, l := range []*listener{pathL, dgramL, abstractL, busL} {
			l.mustBeSilent(t)
		}
	})
}

// TestNetLoopbackInside is the positive control: a server on the
// sandbox's own loopback is reachable from a client in the same command.
func TestNetLoopbackInside(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		nonce := "NONCE-" + randHex(6)
		r := e.sh(`rm -f .port
python3 - <<'PYEOF' &
import socket, os
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(('127.0.0.1', 0))
srv.listen(1)
with open('.port.tmp', 'w') as f:
    f.write(str(srv.getsockname()[1]))
os.rename('.port.tmp', '.port')
srv.settimeout(10)
c, _ = srv.accept()
data = c.recv(100)
c.sendall(b'PONG:' + data)
c.close()
PYEOF
` + netPy(`
import socket, time, os
for _ in range(500):
    if os.path.exists('.port'):
        break
    time.sleep(0.01)
port = int(open('.port').read())
c = socket.create_connection(('127.0.0.1', port), timeout=5)
c.sendall(b'@NONCE@')
print('reply', c.recv(100).decode())
`, "@NONCE@", nonce) + "wait\nrm -f .port\necho END\n")
		netRan(t, r)
		if !strings.Contains(r.stdout, "reply PONG:"+nonce+"\n") {
			t.Fatalf("the in-sandbox loopback server was not reachable from inside\n%s", r)
		}
	})
}

// TestNetNoNewNamespaces: unshare(1), unshare(2), setns(2) and
// clone(CLONE_NEW*) are refused, and the command stays in its namespaces
// with its uid.
func TestNetNoNewNamespaces(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		r := e.sh(`before=$(id -u); userns=$(readlink /proc/self/ns/user); netns=$(readlink /proc/$$/ns/net)
unshare -Ur sh -c 'echo IN_NEW_USERNS $(id -u)' 2>/dev/null || echo "unshare -Ur failed"
unshare -n sh -c 'echo IN_NEW_NETNS' 2>/dev/null || echo "unshare -n failed"
unshare -Urn sh -c 'echo IN_NEW_USERNETNS' 2>/dev/null || echo "unshare -Urn failed"
unshare -Ur true && echo UNSHARE_TRUE_OK
unshare -n true && echo UNSHARE_TRUE_OK
` + netPy(`
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def ns():
    return [os.readlink('/proc/self/ns/' + n) for n in ('user', 'net', 'mnt', 'pid', 'ipc', 'uts')]
before = ns()
for name, flag in [('user', 0x10000000), ('net', 0x40000000), ('mnt', 0x00020000)]:
    r = libc.unshare(flag)
    print('ctypes unshare', name, r, 'errno', ctypes.get_errno())
if hasattr(os, 'unshare'):
    try:
        os.unshare(os.CLONE_NEWUSER)
        print('os.unshare ok')
    except OSError as e:
        print('os.unshare errno', e.errno)
fd = os.open('/proc/self/ns/net', os.O_RDONLY)
r = libc.setns(fd, 0)
print('ctypes setns', r, 'errno', ctypes.get_errno())
if ns() != before:
    print('NS_CHANGED', before, ns())
`) + `after=$(id -u)
[ "$before" = "$after" ] && echo "uid unchanged $after" || echo "UID_CHANGED $before $after"
[ "$userns" = "$(readlink /proc/self/ns/user)" ] && [ "$netns" = "$(readlink /proc/$$/ns/net)" ] && echo "ns unchanged"
echo END
`)
		netRan(t, r)
		for _, bad := range []string{"IN_NEW_", "UNSHARE_TRUE_OK", "NS_CHANGED", "UID_CHANGED", "os.unshare ok"} {
			if strings.Contains(r.stdout, bad) {
				t.Errorf("a new namespace was created (%s)\n%s", bad, r)
			}
		}
		for _, want := range []string{"unshare -Ur failed", "unshare -n failed", "unshare -Urn failed",
			"ctypes unshare user -1 errno 1\n", "ctypes unshare net -1 errno 1\n", "ctypes unshare mnt -1 errno 1\n",
			"ctypes setns -1 errno 1\n", "uid unchanged", "ns unchanged"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("want %q\n%s", want, r)
			}
		}
		if r.report["isolation"] != "namespaces" || r.report["network_mode"] != "netns" {
			t.Errorf("report: isolation %v network_mode %v", r.report["isolation"], r.report["network_mode"])
		}
	})
}

// TestNetRefusedSyscalls: io_uring, keys, nested Landlock, clone3,
// ptrace and namespace-creating clone fail with the filter's errno, and
// none of them yields a descriptor or a child.
func TestNetRefusedSyscalls(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		bin := cc(t, e.dir, "refused", netRefusedSrc)
		r := e.sh(bin + "; echo END")
		netRan(t, r)
		want := map[string]int{
			"io_uring_setup":          38,
			"io_uring_enter":          38,
			"io_uring_register":       38,
			"keyctl":                  38,
			"add_key":                 38,
			"request_key":             38,
			"landlock_create_ruleset": 38,
			"landlock_add_rule":       38,
			"landlock_restrict_self":  38,
			"clone3":                  38,
			"ptrace_traceme":          1,
			"clone_newuser":           1,
			"clone_newnet":            1,
			"unshare_newuser":         1,
		}
		got := map[string]string{}
		for _, m := range regexp.MustCompile(`(?m)^(\w+) ret=(-?\d+) errno=(\d+)$`).FindAllStringSubmatch(r.stdout, -1) {
			got[m[1]] = m[2] + "/" + m[3]
		}
		for name, errno := range want {
			if g := got[name]; g != fmt.Sprintf("-1/%d", errno) {
				t.Errorf("%s: got ret/errno %q, want -1/%d\n%s", name, g, errno, r)
			}
		}
		if strings.Contains(r.stdout, "CHILD_IN_NEW_NS") {
			t.Errorf("clone with namespace flags produced a child\n%s", r)
		}
	})
}

// TestNetInt80Socketcall: a 32-bit system call (int 0x80 socketcall)
// kills the process before it can open a UDP socket; the host UDP
// listener receives nothing. A run on the host proves the program works.
// An x32 socket call is killed the same way.
func TestNetInt80Socketcall(t *testing.T) {
	// Serial: it waits a fixed time for a host-side effect.
	bin := cc(t, t.TempDir(), "int80", netInt80Src)
	control := udpListener(t)
	_, cport := netSplitAddr(t, control.addr)
	// The control run on the host, where the kernel runs i386 calls.
	why := noInt80(t)
	var out []byte
	if why == "" {
		var err error
		if out, err = exec.Command(bin, cport).CombinedOutput(); err != nil {
			t.Fatalf("control run on the host: %v\n%s", err, out)
		}
	}
	for deadline := time.Now().Add(2 * time.Second); why == ""; time.Sleep(10 * time.Millisecond) {
		if _, got := control.received(); got == "int80" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("control: the int 0x80 program did not reach the host listener unsandboxed\n%s", out)
		}
	}
	forEach(t, func(t *testing.T, e *env) {
		t.Run("int80", func(t *testing.T) {
			if why != "" {
				t.Skip("skipped: " + why + " (the x32 case still runs)")
			}
			prog := filepath.Join(e.dir, "int80")
			b, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(prog, b, 0o755); err != nil {
				t.Fatal(err)
			}
			os.Chmod(prog, 0o755)
			l := udpListener(t)
			_, port := netSplitAddr(t, l.addr)
			r := e.sh(prog + " " + port + `; echo "rc=$?"`)
			if !strings.Contains(r.stdout, "before int80\n") {
				t.Fatalf("the program did not run\n%s", r)
			}
			if strings.Contains(r.stdout, "socketcall socket ret=") {
				t.Errorf("the int 0x80 system call returned instead of killing the process\n%s", r)
			}
			if !strings.Contains(r.stdout, "\nrc=159\n") {
				t.Errorf("want the process killed by SIGSYS (rc=159)\n%s", r)
			}
			l.mustBeSilent(t)
		})
		// An x32 call (bit 30 of the number) is another architecture
		// too; seccomp sees it whether or not the kernel has the x32 ABI.
		t.Run("x32", func(t *testing.T) {
			x32 := cc(t, e.dir, "x32", netX32Src)
			r := e.sh(x32 + `; echo "x32 rc=$?"`)
			if !strings.Contains(r.stdout, "before x32\n") || strings.Contains(r.stdout, "x32 socket ret=") ||
				!strings.Contains(r.stdout, "x32 rc=159\n") {
				t.Errorf("want the x32 system call to kill the process (rc=159)\n%s", r)
			}
		})
	})
}

// TestNetTIOCSTI: a command whose stdin is the caller's terminal cannot
// push input into it (TIOCSTI), directly, through /dev/tty, with the
// request's upper bits set, or after making the terminal its controlling
// terminal; also when the terminal is sandboxd's own controlling terminal.
func TestNetTIOCSTI(t *testing.T) {
	// Serial: it writes to the terminal at fixed times during the run.
	for _, ctty := range []bool{false, true} {
		name := "inherited"
		if ctty {
			name = "controlling"
		}
		t.Run(name, func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) {
				master, slave := netOpenPTY(t)
				// Control: the reader below sees injected input.
				netInjectTIOCSTI(t, slave, "CONTROL-"+e.canary[len(e.canary)-4:])
				if got := netDrainPTY(master, slave); !strings.Contains(got, "CONTROL-") {
					t.Fatalf("control: TIOCSTI from the test was not observed: %q", got)
				}
				canaryHex := hex.EncodeToString([]byte(e.canary))
				// --reviewer off: with a terminal, auto puts the person at it
				// in the reviewer's slot and relays the command's input
				// through a pipe, so the terminal would never reach the
				// command; this test needs it passed as stdin.
				r := e.sandboxdOpts(runOpts{tty: slave, ttyInherited: !ctty}, "run", "--reviewer", "off", "-c", netPy(`
import ctypes, fcntl, os, termios
libc = ctypes.CDLL(None, use_errno=True)
data = bytes.fromhex('@HEX@')
def inject(who, fd):
    ok, errs = 0, set()
    for ch in data:
        try:
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
            ok += 1
        except OSError as e:
            errs.add(e.errno)
    print(who, 'isatty', os.isatty(fd), 'injected', ok, 'errnos', sorted(errs), flush=True)
def inject_raw(who, fd):
    # The kernel reads the request as 32 bits: set the upper ones.
    ok, errs = 0, set()
    for ch in data:
        c = ctypes.c_char(ch)
        if libc.syscall(16, fd, ctypes.c_ulong(0xffffffff00000000 | termios.TIOCSTI), ctypes.byref(c)) == 0:
            ok += 1
        else:
            errs.add(ctypes.get_errno())
    print(who, 'injected', ok, 'errnos', sorted(errs), flush=True)
def reopen(who, path):
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
    except OSError as e:
        print(who, 'open', path, 'errno', e.errno, flush=True)
        return
    inject(who, fd)
inject('stdin', 0)
inject_raw('stdin-upper-bits', 0)
reopen('slave-by-name', '@SLAVE@')
reopen('dev-tty', '/dev/tty')
pid = os.fork()
if pid == 0:
    os.setsid()
    for steal in (0, 1):
        try:
            fcntl.ioctl(0, termios.TIOCSCTTY, steal)
            print('ctty acquired', steal, flush=True)
            break
        except OSError as e:
            print('TIOCSCTTY', steal, 'errno', e.errno, flush=True)
    inject('session-leader', 0)
    inject_raw('session-leader-upper-bits', 0)
    reopen('session-leader-dev-tty', '/dev/tty')
    os._exit(0)
os.waitpid(pid, 0)
`, "@HEX@", canaryHex, "@SLAVE@", slave.Name())+"echo END\n")
				netRan(t, r)
				time.Sleep(50 * time.Millisecond)
				if got := netDrainPTY(master, slave); strings.Contains(got, e.canary) {
					t.Fatalf("text injected with TIOCSTI reached the terminal: %q\n%s", got, r)
				}
				// Precondition: the terminal really is the command's stdin
				// (otherwise this test exercises nothing).
				if !strings.Contains(r.stdout, "stdin isatty True injected 0 errnos [1]\n") {
					t.Errorf("want the terminal passed as stdin and TIOCSTI on it refused with EPERM\n%s", r)
				}
				if m := regexp.MustCompile(`injected ([1-9]\d*)`).FindString(r.stdout); m != "" {
					t.Errorf("TIOCSTI succeeded (%s)\n%s", m, r)
				}
				if ctty && strings.Contains(r.stdout, "ctty acquired") {
					t.Errorf("the command took over its caller's controlling terminal\n%s", r)
				}
				e.noCanary(t, r)
			})
		})
	}
}

// TestNetInheritedFD: a descriptor the caller leaves open (fd 3, a file
// outside the workspace whose name and content carry the canary) is not
// readable inside.
func TestNetInheritedFD(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		p := e.outside("leak-"+e.canary+".txt", "secret "+e.canary+"\n")
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r := e.sandboxdOpts(runOpts{extraFiles: []*os.File{f}}, "run", "-c", `cat <&3
cat /proc/self/fd/3
ls -l /proc/self/fd
for d in /proc/[0-9]*; do ls -l $d/fd; for n in 3 4 5 6 7 8 9; do cat $d/fd/$n; done; done
echo END`)
		netRan(t, r)
		e.noCanary(t, r)
	})
}

// TestNetOtherProcesses: a host process (root's, and one of the same uid as
// the caller) keeps its environment secret and survives kill and ptrace
// from inside.
func TestNetOtherProcesses(t *testing.T) {
	// Serial: it starts host processes and signals them at fixed times.
	forEach(t, func(t *testing.T, e *env) {
		victims := []*exec.Cmd{victim(t, e.canary)}
		if !e.id.root() {
			victims = append(victims, netVictimAs(t, e, e.canary))
		}
		var pids []string
		for _, v := range victims {
			pids = append(pids, strconv.Itoa(v.Process.Pid))
		}
		r := e.sh(`for p in ` + strings.Join(pids, " ") + `; do
  cat /proc/$p/environ; tr '\0' '\n' < /proc/$p/environ
  kill -9 $p && echo "KILLED $p"
  kill -STOP $p && echo "STOPPED $p"
done
cat /proc/*/environ | tr '\0' '\n'
` + netPy(`
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
for pid in [@PIDS@]:
    r = libc.ptrace(16, pid, 0, 0)
    print('ptrace attach', pid, r, 'errno', ctypes.get_errno())
    r = libc.ptrace(0x4206, pid, 0, 0)
    print('ptrace seize', pid, r, 'errno', ctypes.get_errno())
    fd = libc.syscall(434, pid, 0)
    print('pidfd_open', pid, fd, 'errno', ctypes.get_errno())
    if fd >= 0:
        print('pidfd_send_signal', libc.syscall(424, fd, 9, None, 0), 'errno', ctypes.get_errno())
`, "@PIDS@", strings.Join(pids, ", ")) + "echo END\n")
		netRan(t, r)
		e.noCanary(t, r)
		time.Sleep(50 * time.Millisecond)
		for _, v := range victims {
			if ok, state := alive(v.Process.Pid); !ok {
				t.Errorf("victim %d is no longer running (state %s)\n%s", v.Process.Pid, state, r)
			}
		}
		if strings.Contains(r.stdout, "KILLED") || strings.Contains(r.stdout, "STOPPED") {
			t.Errorf("a signal to a host process was delivered\n%s", r)
		}
		if m := regexp.MustCompile(`ptrace \w+ \d+ 0 `).FindString(r.stdout); m != "" {
			t.Errorf("ptrace succeeded: %s\n%s", m, r)
		}
	})
}

// ---- helpers ----

// netPy returns a shell fragment that runs src with python3, after replacing
// each old with new (pairs). The program comes on fd 3, so stdin stays the
// command's own.
func netPy(src string, oldnew ...string) string {
	if len(oldnew) > 0 {
		src = strings.NewReplacer(oldnew...).Replace(src)
	}
	return "python3 /dev/fd/3 3<<'PYEOF'\n" + strings.TrimLeft(src, "\n") + "PYEOF\n"
}

// netRan fails unless the script reached its final `echo END`.
func netRan(t *testing.T, r result) {
	t.Helper()
	if !strings.Contains(r.stdout, "END\n") {
		t.Fatalf("the command did not run to its end\n%s", r)
	}
}

func netSplitAddr(t *testing.T, addr string) (host, port string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return host, port
}

// netPyTargets renders listeners as a python list of (host, port).
func netPyTargets(t *testing.T, ls []*listener) string {
	var parts []string
	for _, l := range ls {
		host, port := netSplitAddr(t, l.addr)
		parts = append(parts, fmt.Sprintf("(%q, %s)", host, port))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// netHostIPv4 returns a non-loopback IPv4 address of the host, or "".
func netHostIPv4() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

// netUnixListener is tcpListener for unix stream sockets ("@name" is
// abstract).
func netUnixListener(t *testing.T, network, addr string) *listener {
	t.Helper()
	l := tcpListener(t, network, addr)
	l.addr = addr
	return l
}

// netUnixgramListener records datagrams on a unix datagram socket.
func netUnixgramListener(t *testing.T, path string) *listener {
	t.Helper()
	return packetListener(t, "unixgram", path)
}

// netVictimAs is victim running as the env's identity.
func netVictimAs(t *testing.T, e *env, canary string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	cmd.Env = []string{"VICTIM_SECRET=" + canary}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
		Uid: uint32(e.id.uid), Gid: uint32(e.id.gid), Groups: []uint32{}}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// netOpenPTY allocates a pseudo-terminal: the master, and the slave set to
// non-canonical mode with echo (so injected input is both queued on the
// slave and echoed to the master).
func netOpenPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	mfd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal("unlockpt:", err)
	}
	n, err := unix.IoctlGetInt(mfd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal("ptsname:", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	sfd := int(s.Fd())
	tio, err := unix.IoctlGetTermios(sfd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag &^= unix.ICANON
	tio.Lflag |= unix.ECHO
	tio.Cc[unix.VMIN], tio.Cc[unix.VTIME] = 0, 0
	if err := unix.IoctlSetTermios(sfd, unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	return m, s
}

// netInjectTIOCSTI pushes s into the terminal's input queue (the test runs as
// root, which may do so on any terminal).
func netInjectTIOCSTI(t *testing.T, tty *os.File, s string) {
	t.Helper()
	for i := 0; i < len(s); i++ {
		b := s[i]
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, tty.Fd(), unix.TIOCSTI, uintptr(unsafe.Pointer(&b))); errno != 0 {
			t.Fatalf("control TIOCSTI: %v", errno)
		}
	}
}

// netDrainPTY returns what is pending on the master (output and echo) and in
// the slave's input queue.
func netDrainPTY(master, slave *os.File) string {
	var out bytes.Buffer
	buf := make([]byte, 4096)
	mfd := int(master.Fd()) // Fd makes the descriptor blocking again
	unix.SetNonblock(mfd, true)
	deadline := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(deadline) {
		n, err := unix.Read(mfd, buf)
		if n > 0 {
			out.Write(buf[:n])
			continue
		}
		if err != nil && !errors.Is(err, unix.EAGAIN) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	sfd := int(slave.Fd())
	for {
		q, err := unix.IoctlGetInt(sfd, unix.TIOCINQ)
		if err != nil || q == 0 {
			break
		}
		n, err := unix.Read(sfd, buf[:min(q, len(buf))])
		if n <= 0 || err != nil {
			break
		}
		out.Write(buf[:n])
	}
	return out.String()
}

const netRefusedSrc = `#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void show(const char *name, long r) {
	printf("%s ret=%ld errno=%d\n", name, r, r < 0 ? errno : 0);
	fflush(stdout);
}

int main(void) {
	char params[256];
	memset(params, 0, sizeof params);
	errno = 0; show("io_uring_setup", syscall(425, 4, params));
	errno = 0; show("io_uring_enter", syscall(426, 0, 1, 0, 0, NULL, 0));
	errno = 0; show("io_uring_register", syscall(427, 0, 0, NULL, 0));
	errno = 0; show("keyctl", syscall(250, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 1));
	errno = 0; show("add_key", syscall(248, "user", "sandboxd-it", "v", 1, -3));
	errno = 0; show("request_key", syscall(249, "user", "sandboxd-it", NULL, 0));
	errno = 0; show("landlock_create_ruleset", syscall(444, NULL, 0, 1 /* VERSION */));
	errno = 0; show("landlock_add_rule", syscall(445, 0, 1, params, 0));
	errno = 0; show("landlock_restrict_self", syscall(446, 0, 0));
	errno = 0; show("clone3", syscall(435, params, 88));
	errno = 0; show("ptrace_traceme", syscall(101, 0 /* PTRACE_TRACEME */, 0, 0, 0));
	unsigned long flags[2] = {CLONE_NEWUSER, CLONE_NEWNET};
	const char *names[2] = {"clone_newuser", "clone_newnet"};
	for (int i = 0; i < 2; i++) {
		errno = 0;
		long r = syscall(56 /* clone */, flags[i] | SIGCHLD, 0, 0, 0, 0);
		if (r == 0) {
			printf("CHILD_IN_NEW_NS\n");
			fflush(stdout);
			_exit(0);
		}
		if (r > 0) waitpid(r, NULL, 0);
		show(names[i], r);
	}
	errno = 0; show("unshare_newuser", syscall(272, CLONE_NEWUSER));
	return 0;
}
`

const netInt80Src = `#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

static long sys32(long nr, long a, long b) {
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "0"(nr), "b"(a), "c"(b) : "memory", "r8", "r9", "r10", "r11");
	return ret;
}

int main(int argc, char **argv) {
	int port = atoi(argv[1]);
	/* socketcall's argument block must be addressable with 32 bits. */
	char *low = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
	if (low == MAP_FAILED) { perror("mmap"); return 2; }
	unsigned int *args = (unsigned int *)low;
	struct sockaddr_in *sa = (struct sockaddr_in *)(low + 256);
	char *msg = low + 512;
	args[0] = AF_INET; args[1] = SOCK_DGRAM; args[2] = 0;
	printf("before int80\n");
	fflush(stdout);
	long fd = sys32(102 /* socketcall */, 1 /* SYS_SOCKET */, (long)args);
	printf("socketcall socket ret=%ld\n", fd);
	fflush(stdout);
	if (fd < 0) return 1;
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	sa->sin_addr.s_addr = htonl(0x7f000001);
	strcpy(msg, "int80");
	args[0] = fd; args[1] = (unsigned int)(unsigned long)msg; args[2] = 5; args[3] = 0;
	args[4] = (unsigned int)(unsigned long)sa; args[5] = sizeof *sa;
	long r = sys32(102, 11 /* SYS_SENDTO */, (long)args);
	printf("socketcall sendto ret=%ld\n", r);
	return r == 5 ? 0 : 1;
}
`

const netX32Src = `#include <errno.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
	printf("before x32\n");
	fflush(stdout);
	long r = syscall(0x40000000 | 41 /* x32 socket */, AF_INET, SOCK_DGRAM, 0);
	printf("x32 socket ret=%ld errno=%d\n", r, errno);
	return 0;
}
`

// TestNetStdinSocket: a socket of the host's network namespace given as
// stdin (inetd, a systemd socket unit, nc -e) reaches the command as a
// pipe carrying its bytes: it cannot be reconnected from inside
// (connect(AF_UNSPEC), then connect elsewhere), nor used to send a
// datagram anywhere.
func TestNetStdinSocket(t *testing.T) {
	// Serial: its run ends by --timeout, which it measures against.
	forEach(t, func(t *testing.T, e *env) {
		target := tcpListener(t, "tcp", "127.0.0.1:0")
		udpTarget := udpListener(t)
		thost, tport := netSplitAddr(t, target.addr)
		uhost, uport := netSplitAddr(t, udpTarget.addr)
		script := netPy(`
import os, select, socket, stat
if stat.S_ISSOCK(os.fstat(0).st_mode):
    s = socket.socket(fileno=0)
    print('A SOCKET')
    try:
        s.sendto(b'escaped', ('@UHOST@', @UPORT@))
        print('SENT')
    except OSError as e:
        print('sendto errno', e.errno)
    try:
        s.connect(('@THOST@', @TPORT@))
        s.sendall(b'escaped')
        print('RECONNECTED')
    except OSError as e:
        print('connect errno', e.errno)
else:
    r, _, _ = select.select([0], [], [], 3)
    print('GOT', os.read(0, 5) if r else b'')
`, "@THOST@", thost, "@TPORT@", tport, "@UHOST@", uhost, "@UPORT@", uport) + "echo END\n"
		// A connected TCP socket whose peer wrote "hello".
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		peer, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer peer.Close()
		peer.Write([]byte("hello"))
		cf, _ := client.(*net.TCPConn).File()
		client.Close()
		defer cf.Close()
		r := e.sandboxdOpts(runOpts{stdinFile: cf}, "run", "-c", script)
		netRan(t, r)
		if !strings.Contains(r.stdout, "GOT b'hello'") {
			t.Errorf("the stdin socket's bytes did not reach the command\n%s", r)
		}
		if strings.Contains(r.stdout, "A SOCKET") {
			t.Errorf("the command got the host's socket itself\n%s", r)
		}
		// A UDP socket as stdin.
		uc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		uf, _ := uc.(*net.UDPConn).File()
		uc.Close()
		defer uf.Close()
		r2 := e.sandboxdOpts(runOpts{stdinFile: uf, timeout: 20 * time.Second}, "run", "--timeout", "10s", "-c", script)
		netRan(t, r2)
		if strings.Contains(r2.stdout, "A SOCKET") || strings.Contains(r2.stdout, "SENT") {
			t.Errorf("the command got the host's UDP socket\n%s", r2)
		}
		target.mustBeSilent(t)
		udpTarget.mustBeSilent(t)
	})
}
