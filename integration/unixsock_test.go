package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Unix sockets inside the sandbox: the command may make and use its own
// (in its private /tmp, in the workspace, in a directory it makes), and
// reaches no socket a host program made, wherever it is and whoever may
// connect to it on the host. Each refusal is a boundary; each host
// listener must accept nothing.

// hostUnixListener listens on a pathname unix socket made by the host, as
// the env's identity would own it, connectable by anyone on the host.
func hostUnixListener(t *testing.T, e *env, path string) *listener {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	e.chown(filepath.Dir(path))
	l := netUnixListener(t, "unix", path)
	os.Chmod(path, 0o777)
	e.chown(path)
	return l
}

// TestUnixHost: listeners in $HOME, a ControlMaster-style
// socket in ~/.ssh, gpg-agent's in ~/.gnupg, a daemon's under /var/lib,
// and in the workspace (made before the run, and during it) accept
// nothing; each connect fails with EACCES and is reported as a
// resolve_unix boundary; the command's own sockets work beside them.
func TestUnixHost(t *testing.T) {
	// Serial: a host program makes a socket 0.7 s into the run, which must still be running then.
	forModes(t, func(t *testing.T, e *env, layer bool) {
		daemonDir := e.mkdir("daemon", 0o755)
		hosts := map[string]string{
			"home":   filepath.Join(e.home, "agent.sock"),
			"ssh":    filepath.Join(e.home, ".ssh", "cm-git@h:22"),
			"gnupg":  filepath.Join(e.home, ".gnupg", "S.gpg-agent"),
			"daemon": filepath.Join(daemonDir, "docker.sock"),
			"ws":     filepath.Join(e.ws, "before.sock"),
		}
		var ls []*listener
		for _, p := range hosts {
			ls = append(ls, hostUnixListener(t, e, p))
		}
		// Made by a host program while the command runs.
		during := filepath.Join(e.ws, "during.sock")
		duringL := make(chan *listener, 1)
		go func() {
			time.Sleep(700 * time.Millisecond)
			ln, err := net.Listen("unix", during)
			if err != nil {
				duringL <- nil
				return
			}
			os.Chmod(during, 0o777)
			e.chown(during)
			l := &listener{addr: during, close: func() { ln.Close() }}
			go l.serve(ln)
			duringL <- l
		}()
		var targets []string
		for name, p := range hosts {
			targets = append(targets, fmt.Sprintf("(%q, %q)", name, p))
		}
		targets = append(targets, fmt.Sprintf("(%q, %q)", "during", during))
		script := netPy(`
import os, socket, threading, time, errno as E
def own(where):
    # A server of the command's own, and a client in the same run.
    path = os.path.join(where, 'own-%d.sock' % os.getpid())
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path); srv.listen(1)
    def serve():
        c, _ = srv.accept(); c.sendall(b'PONG:' + c.recv(100)); c.close()
    threading.Thread(target=serve, daemon=True).start()
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path); c.sendall(b'ping')
    print('OWN', where, c.recv(100).decode())
    os.unlink(path)
own('/tmp')
own('.')
os.mkdir('mine'); own('mine')
for name, path in @TARGETS@:
    if name == 'during':
        for _ in range(60):
            if os.path.exists(path): break
            time.sleep(0.1)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
        s.sendall(b'leak')
        print('UNIX_REACHED', name)
    except OSError as e:
        print('REFUSED', name, E.errorcode.get(e.errno, e.errno))
print('END')
`, "@TARGETS@", "["+strings.Join(targets, ", ")+"]")
		r := e.sh(script)
		netRan(t, r)
		if strings.Contains(r.stdout, "UNIX_REACHED") {
			t.Errorf("a host unix socket was reached\n%s", r)
		}
		for _, where := range []string{"/tmp", ".", "mine"} {
			if !strings.Contains(r.stdout, "OWN "+where+" PONG:ping") {
				t.Errorf("the command's own socket in %s did not work\n%s", where, r)
			}
		}
		for name := range hosts {
			if !strings.Contains(r.stdout, "REFUSED "+name+" EACCES") {
				t.Errorf("connect to the %s socket: want EACCES\n%s", name, r)
			}
		}
		refused := map[string]bool{}
		for _, b := range boundaries(r) {
			if b["operation"] == "resolve_unix" {
				refused[fmt.Sprint(b["path"])] = true
				if b["decision"] != "deny" || b["source"] != "hard-deny" {
					t.Errorf("boundary %v: want a hard deny", b)
				}
			}
		}
		for name, p := range hosts {
			if !refused[p] {
				t.Errorf("no resolve_unix boundary for the %s socket %s: %v", name, p, boundaries(r))
			}
		}
		for _, l := range ls {
			l.mustBeSilent(t)
		}
		if l := <-duringL; l != nil {
			t.Cleanup(l.close)
			l.mustBeSilent(t)
		}
	})
}

// TestUnixPythonMultiprocessing: Python's Manager() and the forkserver
// start method, which talk over unix sockets the run makes, work, and
// report no boundary.
func TestUnixPythonMultiprocessing(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		// A file, not a pipe: forkserver's workers import the main module.
		e.writeFile(filepath.Join(e.ws, "mp.py"), `
import multiprocessing as mp
def square(x):
    return x * x
if __name__ == '__main__':
    with mp.Manager() as m:
        d = m.dict(); d['k'] = 41; l = m.list([1, 2])
        print('MANAGER', d['k'] + 1, len(l))
    ctx = mp.get_context('forkserver')
    with ctx.Pool(2) as p:
        print('FORKSERVER', sum(p.map(square, range(10))))
    print('END')
`, 0o644)
		r := e.sh("python3 mp.py").mustSucceed(t)
		netRan(t, r)
		for _, want := range []string{"MANAGER 42 2", "FORKSERVER 285"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("want %q\n%s", want, r)
			}
		}
		noBoundaries(t, r)
	})
}

// TestUnixTestSuiteServer: a test suite that starts a unix-socket server
// in its temporary directory and talks to it (unittest, as a project's
// own suite would) passes with no boundary.
func TestUnixTestSuiteServer(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		e.writeFile(filepath.Join(e.ws, "test_echo.py"), `
import os, socketserver, tempfile, threading, unittest, socket

class Echo(socketserver.StreamRequestHandler):
    def handle(self):
        self.wfile.write(self.rfile.readline().upper())

class TestEcho(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, 'echo.sock')
        self.srv = socketserver.ThreadingUnixStreamServer(self.path, Echo)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
    def tearDown(self):
        self.srv.shutdown(); self.srv.server_close(); os.unlink(self.path); os.rmdir(self.dir)
    def test_echo(self):
        for i in range(20):
            with socket.socket(socket.AF_UNIX) as c:
                c.connect(self.path); c.sendall(b'hello %d\n' % i)
                self.assertEqual(c.makefile().readline(), 'HELLO %d\n' % i)
    def test_nonblocking(self):
        c = socket.socket(socket.AF_UNIX); c.setblocking(False)
        c.connect(self.path); c.setblocking(True); c.sendall(b'x\n')
        self.assertEqual(c.makefile().readline(), 'X\n'); c.close()

if __name__ == '__main__':
    unittest.main()
`, 0o644)
		r := e.sh("python3 -m unittest -v test_echo 2>&1; echo END").mustSucceed(t)
		netRan(t, r)
		if !strings.Contains(r.stdout, "OK") || strings.Contains(r.stdout, "FAILED") {
			t.Fatalf("the suite failed\n%s", r)
		}
		noBoundaries(t, r)
	})
}

// TestUnixDatagramRefused: no unix datagram socket exists inside (from
// socket or socketpair), since one would send to any pathname in sendto
// or sendmsg; a host datagram socket receives nothing.
func TestUnixDatagramRefused(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		path := filepath.Join(e.home, "dgram.sock")
		l := netUnixgramListener(t, path)
		os.Chmod(path, 0o777)
		e.chown(path)
		r := e.sh(netPy(`
import socket, errno as E
for name, make in [('socket', lambda: [socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)]),
                   ('socketpair', lambda: list(socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)))]:
    try:
        s = make()[0]
    except OSError as e:
        print('NOSOCK', name, E.errorcode.get(e.errno, e.errno)); continue
    try:
        s.sendto(b'leak', '@PATH@'); print('UNIX_REACHED', name)
    except OSError as e:
        print('SENDTO', name, E.errorcode.get(e.errno, e.errno))
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
a.send(b'inside'); print('SEQPACKET', b.recv(10).decode())
print('END')
`, "@PATH@", path))
		netRan(t, r)
		for _, want := range []string{"NOSOCK socket EACCES", "NOSOCK socketpair EACCES", "SEQPACKET inside"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("want %q\n%s", want, r)
			}
		}
		l.mustBeSilent(t)
	})
}

// TestUnixConnectsEndWithRun: connects the supervisor makes that wait
// (two sockets, each with a full backlog, each connecting to the other)
// end with the run: sandboxd returns once the command exits, and a
// blocking connect to a full backlog still completes when room is made.
func TestUnixConnectsEndWithRun(t *testing.T) {
	// Serial: it times how long sandboxd takes to return.
	forEach(t, func(t *testing.T, e *env) {
		start := time.Now()
		r := e.sandboxdOpts(runOpts{timeout: 30 * time.Second}, "run", "-c", netPy(`
import os, socket, threading, time
os.makedirs('/tmp/c', exist_ok=True)
pa, pb = '/tmp/c/a', '/tmp/c/b'
A = socket.socket(socket.AF_UNIX); A.bind(pa)
B = socket.socket(socket.AF_UNIX); B.bind(pb)
B.listen(0)
f1 = socket.socket(socket.AF_UNIX); f1.connect(pb)   # B's backlog is full
def c(s, addr, name):
    try:
        s.connect(addr); print(name, 'connected', flush=True)
    except OSError as e:
        print(name, e, flush=True)
# A blocking connect to a full backlog waits, and completes once the
# listener accepts.
w = socket.socket(socket.AF_UNIX)
t = threading.Thread(target=c, args=(w, pb, 'waiter'), daemon=True); t.start()
time.sleep(0.3)
B.accept(); t.join(5)
threading.Thread(target=c, args=(A, pb, 'A->B'), daemon=True).start()
time.sleep(0.3)
A.listen(0)
f2 = socket.socket(socket.AF_UNIX); f2.connect(pa)   # A's backlog is full
threading.Thread(target=c, args=(B, pa, 'B->A'), daemon=True).start()
time.sleep(0.3)
print('END', flush=True)
os._exit(0)
`))
		netRan(t, r)
		if !strings.Contains(r.stdout, "waiter connected") {
			t.Errorf("a blocking connect to a full backlog did not complete once there was room\n%s", r)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("sandboxd took %v to return after the command exited with connects under way", took)
		}
	})
}
