package integration

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Tools that ignore the proxy variables: their connects are captured in
// the run's network namespace and decided by the proxy like a CONNECT,
// and their names are answered by the run's stub resolver, which never
// asks a real one.

// capCProgram resolves argv[1] with getaddrinfo, connects to argv[2] on
// it and prints the first line of what an HTTP/1.0 GET of argv[3] gets.
const capCProgram = `#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
int main(int argc, char **argv) {
	struct addrinfo hints = {0}, *res;
	hints.ai_socktype = SOCK_STREAM;
	int rc = getaddrinfo(argv[1], argv[2], &hints, &res);
	if (rc != 0) { printf("C %s getaddrinfo %s\n", argv[1], gai_strerror(rc)); return 0; }
	int fd = socket(res->ai_family, SOCK_STREAM, 0);
	if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) { printf("C %s connect failed: %s (family %d)\n", argv[1], strerror(errno), res->ai_family); return 0; }
	char req[512];
	snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: %s:%s\r\n\r\n", argv[3], argv[1], argv[2]);
	write(fd, req, strlen(req));
	char buf[4096]; ssize_t n, total = 0;
	while (total < (ssize_t)sizeof buf - 1 && (n = read(fd, buf + total, sizeof buf - 1 - total)) > 0) total += n;
	buf[total] = 0;
	char *eol = strstr(buf, "\r\n");
	if (eol) *eol = 0;
	printf("C %s %s\n", argv[1], total > 0 ? buf : "no reply");
	return 0;
}
`

// capCompile builds capCProgram into the env's directory.
func capCompile(t *testing.T, e *env) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc is not installed")
	}
	src := filepath.Join(e.dir, "getaddr.c")
	bin := filepath.Join(e.dir, "getaddr")
	e.writeFile(src, capCProgram, 0o644)
	if out, err := exec.Command("gcc", "-O1", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	os.Chmod(bin, 0o755)
	return bin
}

// TestCaptureTools: Node's fetch, Python's socket.create_connection with
// a name, and a C program calling getaddrinfo and connect, none of
// which read the proxy variables, reach an allowed name's origin, and
// are refused (with a boundary) for an unlisted and a denied name, which
// the DNS server the proxy asks never hears of.
func TestCaptureTools(t *testing.T) {
	// Serial: it uses the shared test address 10.254.254.1, whose interface the test that made it removes.
	egNeed(t, "node")
	priv := egPrivateAddr(t)
	forEach(t, func(t *testing.T, e *env) {
		ok := egNewOrigin(t, priv+":0", false, nil)
		other := egNewOrigin(t, priv+":0", false, nil)
		dns := egNewDNS(t, func(string, int) ([]netip.Addr, bool) { return egAddrs(priv), true })
		// A name resolving to a private address needs a rule naming the
		// address too.
		pol := egPolicy(t, e, []string{"allowed.test:" + ok.port, ok.addr}, nil, []string{"denied.test:*"}, "[network]\nresolver = \""+dns.addr+"\"")
		cbin := capCompile(t, e)
		script := fmt.Sprintf(`
for h in allowed.test:%[1]s unlisted.test:%[2]s; do
  node --input-type=module -e "
try { const r = await fetch('http://$h/node'); console.log('NODE', '$h', r.status, (await r.text()).trim()) }
catch (e) { console.log('NODE', '$h', 'error', e.cause ? e.cause.code : e.message) }"
  %[3]s ${h%%:*} ${h#*:} /c
done
`, ok.port, other.port, cbin) + netPy(`
import socket
for h, p in (('allowed.test', @OK@), ('unlisted.test', @OTHER@), ('denied.test', @OTHER@)):
    try:
        s = socket.create_connection((h, p), timeout=10)
        s.sendall(('GET /py HTTP/1.0\r\nHost: %s:%d\r\n\r\n' % (h, p)).encode())
        data = b''
        while True:
            c = s.recv(65536)
            if not c:
                break
            data += c
        print('PY', h, data.split(b'\r\n')[0].decode(), data.split(b'\r\n\r\n', 1)[-1].decode().strip())
    except OSError as e:
        print('PY', h, 'error', e.errno)
`, "@OK@", ok.port, "@OTHER@", other.port) + "echo END\n"
		r := e.sandboxd("run", "--policy", pol, "-c", script)
		netRan(t, r)
		body := strings.TrimSpace(ok.body)
		for _, want := range []string{"NODE allowed.test:" + ok.port + " 200 " + body, "C allowed.test HTTP/1.0 200 OK", "PY allowed.test HTTP/1.0 200 OK " + body} {
			if !strings.Contains(r.stdout, want+"\n") {
				t.Errorf("stdout lacks %q\n%s", want, r)
			}
		}
		for _, p := range []string{"/node", "/c", "/py"} {
			if !ok.sawPath(p) {
				t.Errorf("the allowed origin never got %s: %s", p, ok.summary())
			}
		}
		other.mustHits(t, 0, r)
		if strings.Contains(r.stdout, "unlisted.test HTTP") || strings.Contains(r.stdout, "unlisted.test:"+other.port+" 200") {
			t.Errorf("the unlisted name was served\n%s", r)
		}
		if dns.askedAny("unlisted") || dns.askedAny("denied") {
			t.Errorf("the DNS server was asked about a refused name: %v", dns.queries())
		}
		egMustDeny(t, r, "denied.test:"+other.port, "policy")
		if !dns.asked("allowed.test") {
			t.Errorf("the allowed name was never resolved by the proxy: %v", dns.queries())
		}
		egMustAllow(t, r, "allowed.test:"+ok.port, 3)
		egMustDeny(t, r, "unlisted.test:"+other.port)
		if eg, _ := r.report["egress"].(map[string]any); eg["capture"] != "on" {
			t.Errorf("report egress %v: want capture on", eg)
		}
		// Only the two refused destinations (the allowed one is listed
		// under egress.allowed): no boundary for the stub's addresses or
		// the DNS queries.
		if n := len(egNetBoundaries(r)); n != 2 {
			t.Errorf("%d network boundaries, want 2: %v", n, egNetBoundaries(r))
		}
	})
}

// TestCaptureStubResolver: the stub's answers seen from inside (raw
// queries to 127.0.0.1:53): one address per name from 198.18.0.0/15,
// stable and never shared; AAAA empty; TXT and CNAME refused; names that
// are not host names (CRLF, underscores, a 64-byte label) refused. The
// DNS server the proxy would ask gets no query at all, and a datagram to
// it (or anywhere but the stub) is refused.
func TestCaptureStubResolver(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		dns := egNewDNS(t, func(string, int) ([]netip.Addr, bool) { return egAddrs("10.9.9.9"), true })
		udp := udpListener(t)
		pol := egPolicy(t, e, nil, nil, nil, "[network]\nresolver = \""+dns.addr+"\"")
		host, port := netSplitAddr(t, dns.addr)
		uhost, uport := netSplitAddr(t, udp.addr)
		r := e.sandboxd("run", "--policy", pol, "-c", netPy(`
import socket, struct
def q(labels, qtype, qid):
    name = b''.join(bytes([len(l)]) + l for l in labels) + b'\0'
    return struct.pack('>HHHHHH', qid, 0x0100, 1, 0, 0, 0) + name + struct.pack('>HH', qtype, 1)
def ask(case, labels, qtype=1):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    s.sendto(q([l.encode() if isinstance(l, str) else l for l in labels], qtype, 4242), ('127.0.0.1', 53))
    b = s.recv(4096)
    qid, flags, qd, an = struct.unpack('>HHHH', b[:8])
    addrs = []
    if an:
        # the one answer is the last 4 bytes (an A record)
        addrs.append(socket.inet_ntoa(b[-4:]))
    print('DNS', case, qid, flags & 0xf, an, ','.join(addrs) or '-')
ask('a1', ['pkg', 'example', 'com'])
ask('a2', ['PKG', 'Example', 'COM'])
ask('b', ['git', 'example', 'org'])
ask('aaaa', ['pkg', 'example', 'com'], 28)
ask('txt', ['pkg', 'example', 'com'], 16)
ask('cname', ['pkg', 'example', 'com'], 5)
ask('crlf', [b'a\r\nb', 'com'])
ask('under', ['_x', 'com'])
ask('long', ['a' * 64, 'com'])
ask('literal', ['10', '0', '0', '1'])
print('GAI', socket.gethostbyname('pkg.example.com'))
for case, dest in (('proxydns', ('@HOST@', @PORT@)), ('udp', ('@UHOST@', @UPORT@)), ('public', ('8.8.8.8', 53))):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(q([b'leak', b'test'], 1, 1), dest)
        print('SENT', case)
    except OSError as e:
        print('UDP', case, 'errno', e.errno)
`, "@HOST@", host, "@PORT@", port, "@UHOST@", uhost, "@UPORT@", uport)+"echo END\n")
		netRan(t, r)
		lines := map[string][]string{}
		for _, l := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(l); len(f) == 6 && f[0] == "DNS" {
				lines[f[1]] = f[2:]
			}
		}
		want := func(c, rcode, an string) []string {
			got := lines[c]
			if len(got) != 4 || got[0] != "4242" || got[1] != rcode || got[2] != an {
				t.Errorf("query %s: got %v, want id 4242 rcode %s answers %s", c, got, rcode, an)
				return nil
			}
			return got
		}
		a1, a2, b := want("a1", "0", "1"), want("a2", "0", "1"), want("b", "0", "1")
		if a1 != nil && a2 != nil && b != nil {
			if a1[3] != a2[3] || a1[3] == b[3] {
				t.Errorf("a name's address must be stable and no other name's: %v %v %v", a1, a2, b)
			}
			for _, a := range []string{a1[3], b[3]} {
				if ip, err := netip.ParseAddr(a); err != nil || !netip.MustParsePrefix("198.18.0.0/15").Contains(ip) {
					t.Errorf("stub answer %s is not in 198.18.0.0/15", a)
				}
			}
			if !strings.Contains(r.stdout, "GAI "+a1[3]+"\n") {
				t.Errorf("getaddrinfo did not give the stub's address %s\n%s", a1[3], r)
			}
		}
		want("aaaa", "0", "0")
		for _, c := range []string{"txt", "cname", "crlf", "under", "literal"} {
			want(c, "5", "0")
		}
		if got := lines["long"]; len(got) != 4 || got[1] == "0" || got[2] != "0" {
			t.Errorf("a 64-byte label: %v, want an error and no answer", got)
		}
		for _, c := range []string{"proxydns", "udp", "public"} {
			if !strings.Contains(r.stdout, "UDP "+c+" errno 1\n") {
				t.Errorf("a datagram to %s was not refused with EPERM\n%s", c, r)
			}
		}
		if q := dns.queries(); len(q) != 0 {
			t.Errorf("the proxy's DNS server was asked %v", q)
		}
		udp.mustBeSilent(t)
		if n := len(egNetBoundaries(r)); n != 0 {
			t.Errorf("name lookups made network boundaries: %v", egNetBoundaries(r))
		}
	})
}

// TestCaptureOff: with network.capture = false, a connect straight to an
// address is refused (the origin gets nothing) and reported, and the
// report says capture is off.
func TestCaptureOff(t *testing.T) {
	// Serial: it uses the shared test address 10.254.254.1, whose interface the test that made it removes.
	priv := egPrivateAddr(t)
	forEach(t, func(t *testing.T, e *env) {
		o := egNewOrigin(t, priv+":0", false, nil)
		pol := egPolicy(t, e, []string{o.addr}, nil, nil, "[network]\ncapture = false")
		r := e.sandboxd("run", "--policy", pol, "--retries", "0", "-c", netPy(`
import socket
try:
    s = socket.create_connection(('@HOST@', @PORT@), timeout=5)
    s.sendall(b'GET / HTTP/1.0\r\n\r\n')
    print('PY', s.recv(100))
except OSError as e:
    print('PY error', e.errno)
`, "@HOST@", o.host, "@PORT@", o.port)+"echo END\n")
		netRan(t, r)
		o.mustHits(t, 0, r)
		if !strings.Contains(r.stdout, "PY error") {
			t.Errorf("the direct connect was not refused\n%s", r)
		}
		eg, _ := r.report["egress"].(map[string]any)
		if eg["capture"] != "off" || !strings.Contains(fmt.Sprint(eg["capture_why"]), "network.capture") {
			t.Errorf("report egress %v: want capture off, with why", eg)
		}
		if egBoundary(r, o.addr) == nil {
			t.Errorf("the refused connect was not reported: %v\n%s", egNetBoundaries(r), r)
		}
	})
}

// TestCaptureSameDecision: the private ranges, the metadata addresses
// and the host's loopback (in several spellings) are refused through
// every way in — a CONNECT through the proxy, SOCKS5, and capture (which
// never sees loopback: the run's own) — with one decision per
// destination, and the host's servers get nothing.
func TestCaptureSameDecision(t *testing.T) {
	// Serial: it uses the shared test address 10.254.254.1, whose interface the test that made it removes.
	priv := egPrivateAddr(t)
	forEach(t, func(t *testing.T, e *env) {
		o := egNewOrigin(t, priv+":0", false, nil)
		lo := egNewOrigin(t, "127.0.0.1:0", false, nil)
		dests := []string{o.addr, "169.254.169.254:80", "100.100.100.200:80", "192.168.255.254:" + o.port, "[fd00::1]:" + o.port}
		var py strings.Builder
		py.WriteString(egPyLib)
		py.WriteString(`import socket, struct
def socks(case, host, port):
    s = socket.create_connection(os.environ['ALL_PROXY'][len('socks5h://'):].rsplit(':', 1), timeout=10)
    s.sendall(b'\x05\x01\x00')
    s.recv(2)
    h = host.strip('[]').encode()
    s.sendall(b'\x05\x01\x00\x03' + bytes([len(h)]) + h + struct.pack('>H', port))
    rep = s.recv(10)
    print('SOCKS', case, rep[1] if len(rep) > 1 else -1)
`)
		// The host's loopback in several spellings, through the proxy
		// and SOCKS5 (capture never sees loopback: it is the run's own).
		loops := []string{"127.0.0.1", "127.1", "localhost", "[::1]", "0x7f000001"}
		for i, l := range loops {
			fmt.Fprintf(&py, "raw('loop%d', 'CONNECT %s:%s HTTP/1.1\\r\\nHost: %s:%s\\r\\n' + AUTH + '\\r\\n')\n", i, l, lo.port, l, lo.port)
			fmt.Fprintf(&py, "socks('loop%d', %q, %s)\n", i, l, lo.port)
		}
		for i, d := range dests {
			host, port := netSplitAddr(t, d)
			fmt.Fprintf(&py, "socks('dest%d', %q, %s)\n", i, host, port)
			fmt.Fprintf(&py, "raw('connect%d', 'CONNECT %s HTTP/1.1\\r\\nHost: %s\\r\\n' + AUTH + '\\r\\n')\n", i, d, d)
			// Port 80 is parsed as HTTP: a refusal there is sandboxd's
			// 403; elsewhere the connection is reset.
			fmt.Fprintf(&py, `
try:
    s = socket.create_connection((%q, %s), timeout=5)
    s.sendall(b'GET / HTTP/1.0\r\nHost: %s\r\n\r\n')
    data = b''
    while True:
        c = s.recv(65536)
        if not c:
            break
        data += c
    print('CAP %d', 'sandboxd' if b'X-Sandboxd-Decision: deny' in data else data[:20] or b'closed')
except OSError as e:
    print('CAP %d error', e.errno)
`, host, port, d, i, i)
		}
		// The host's loopback: the run's own, where nothing listens.
		fmt.Fprintf(&py, `
try:
    socket.create_connection(('127.0.0.1', %s), timeout=5)
    print('LOOP connected')
except OSError as e:
    print('LOOP error', e.errno)
`, lo.port)
		r := e.sandboxd("run", "--policy", egPolicy(t, e, nil, nil, nil, ""), "-c", netPy(py.String())+"echo END\n")
		netRan(t, r)
		o.mustHits(t, 0, r)
		lo.mustHits(t, 0, r)
		cases := egCases(r.stdout)
		for i, d := range dests {
			egWantStatus(t, cases, fmt.Sprintf("connect%d", i), r, 403)
			if !strings.Contains(r.stdout, fmt.Sprintf("CAP %d error", i)) && !strings.Contains(r.stdout, fmt.Sprintf("CAP %d sandboxd", i)) {
				t.Errorf("capture did not refuse %s\n%s", d, r)
			}
			dest := d
			if strings.HasPrefix(d, "[fd00::1]") {
				dest = "[fd00::1]:" + o.port
			}
			b := egBoundary(r, dest)
			if b == nil || b["decision"] != "deny" {
				t.Errorf("%s: boundary %v, want one deny for both ways in", d, b)
			}
		}
		for i := range loops {
			egWantStatus(t, cases, fmt.Sprintf("loop%d", i), r, 403)
			if !strings.Contains(r.stdout, fmt.Sprintf("SOCKS loop%d 2\n", i)) {
				t.Errorf("SOCKS5 to the host's loopback spelled %s: not refused with reply 2\n%s", loops[i], r)
			}
		}
		for i, d := range dests {
			if !strings.Contains(r.stdout, fmt.Sprintf("SOCKS dest%d 2\n", i)) {
				t.Errorf("SOCKS5 to %s: not refused with reply 2\n%s", d, r)
			}
		}
		if b := egBoundary(r, "127.0.0.1:"+lo.port); b == nil || b["decision"] != "deny" || b["source"] != "hard-deny" {
			t.Errorf("the host's loopback: boundary %v, want one hard deny for every spelling and way in", b)
		}
		if !strings.Contains(r.stdout, "LOOP error 111\n") {
			t.Errorf("a connect to 127.0.0.1 reached something\n%s", r)
		}
		if t.Failed() {
			t.Logf("%s\nboundaries %v", r, egNetBoundaries(r))
		}
	})
}

// TestCaptureHTTP80: a connection made straight to port 80 is parsed as
// HTTP: curl with the proxy variables ignored reaches an allowed name,
// and on one kept-alive connection a request whose Host names another
// host is refused (400) while the first one was served; the origin gets
// only the requests that were decided for it, with their own Host.
func TestCaptureHTTP80(t *testing.T) {
	// Serial: it uses the shared test address 10.254.254.1, whose interface the test that made it removes.
	egNeed(t, "curl")
	priv := egPrivateAddr(t)
	forEach(t, func(t *testing.T, e *env) {
		o := egNewOrigin(t, priv+":80", false, nil)
		dns := egNewDNS(t, func(string, int) ([]netip.Addr, bool) { return egAddrs(priv), true })
		pol := egPolicy(t, e, []string{"web.test:80", o.addr}, nil, nil, "[network]\nresolver = \""+dns.addr+"\"")
		r := e.sandboxd("run", "--policy", pol, "-c", `echo "CURL $(curl -s -m 10 --noproxy '*' http://web.test/curl)"
`+netPy(`
import socket
def exchange(reqs):
    s = socket.create_connection(('web.test', 80), timeout=10)
    f = s.makefile('rb')
    out = []
    for req in reqs:
        try:
            s.sendall(req.encode())
            line = f.readline().decode().strip()
            if not line:
                out.append('closed')
                break
            length = 0
            while True:
                h = f.readline().decode().strip()
                if not h:
                    break
                if h.lower().startswith('content-length:'):
                    length = int(h.split(':')[1])
            f.read(length)
            out.append(line.split(' ')[1])
        except OSError as e:
            out.append('error %d' % e.errno)
            break
    print('PY', ' '.join(out))
exchange(['GET /py1 HTTP/1.1\r\nHost: web.test\r\n\r\n', 'GET /py2 HTTP/1.1\r\nHost: evil.test\r\n\r\n', 'GET /py3 HTTP/1.1\r\nHost: web.test\r\n\r\n'])
exchange(['GET http://evil.test/py4 HTTP/1.1\r\nHost: evil.test\r\n\r\n'])
`)+"echo END\n")
		netRan(t, r)
		if !strings.Contains(r.stdout, "CURL "+strings.TrimSpace(o.body)+"\n") {
			t.Errorf("curl without the proxy did not get the origin's answer\n%s", r)
		}
		// After the 400 the connection is closed: the third request sees
		// the end, or a reset if it was sent before the close arrived.
		third := regexp.MustCompile(`PY 200 400 (closed|error (104|32))\n`)
		if !third.MatchString(r.stdout) || !strings.Contains(r.stdout, "PY 400\n") {
			t.Errorf("want the first request served, the other Host refused and the connection closed\n%s", r)
		}
		o.mustHits(t, 2, r)
		for _, p := range []string{"/py2", "/py3", "/py4"} {
			if o.sawPath(p) {
				t.Errorf("the origin got %s: %s", p, o.summary())
			}
		}
		if o.hostHits("web.test") != 2 {
			t.Errorf("want both requests upstream with Host web.test: %s", o.summary())
		}
		egMustAllow(t, r, "web.test:80", 2)
		if egBoundary(r, "evil.test:80") != nil || dns.askedAny("evil") {
			t.Errorf("a refused Host was decided or resolved: %v %v", egNetBoundaries(r), dns.queries())
		}
	})
}
