package integration

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The egress proxy's refusals, black box: every case counts what reached
// the origins the test started (by Host and path), what the test's DNS
// server was asked and what the report recorded. Nothing here leaves the
// host: origins listen on loopback or on an interface the test creates.

// egLoopbackSpellings name the host's loopback without saying 127.0.0.1.
var egLoopbackSpellings = []string{"127.1", "2130706433", "0x7f000001", "0177.0.0.1",
	"[::ffff:127.0.0.1]", "[::1]", "0.0.0.0", "localhost"}

// egLoopbackExtra are more spellings of the host's loopback; the proxy
// may refuse them as malformed (400) instead of deciding them (403).
var egLoopbackExtra = []string{"127.0.0.1", "LOCALHOST", "localhost.", "foo.localhost",
	"[0:0:0:0:0:0:0:1]", "[::]", "0x7f.1", "127.0.1", "[::ffff:7f00:1]", "127.0.0.1."}

// TestEgressLoopbackSpellings: with no rule, every spelling of the host's
// loopback is refused with a 403 that says sandboxd decided it — through
// curl (which honours the proxy variables) and as raw absolute-form and
// CONNECT requests (which curl would normalise) — and nothing reaches
// the host's servers on 127.0.0.1 and ::1.
func TestEgressLoopbackSpellings(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		o4 := egNewOrigin(t, "127.0.0.1:0", false, nil)
		origins := []*egOrigin{o4}
		if ln, err := net.Listen("tcp6", "[::1]:"+o4.port); err == nil {
			ln.Close()
			origins = append(origins, egNewOrigin(t, "[::1]:"+o4.port, false, nil))
		}
		port := o4.port
		var script strings.Builder
		for _, sp := range egLoopbackSpellings {
			fmt.Fprintf(&script, "code=$(curl -s -m 10 -o /dev/null -D hdr.txt -w '%%{http_code}' http://%s:%s/); d=no; grep -qi '^x-sandboxd-decision:' hdr.txt && d=yes; echo \"CURL %s $code $d\"\n", sp, port, sp)
		}
		var py strings.Builder
		py.WriteString(egPyLib)
		for i, sp := range append(append([]string{}, egLoopbackSpellings...), egLoopbackExtra...) {
			fmt.Fprintf(&py, "raw('get%d', 'GET http://%s:%s/ HTTP/1.1\\r\\nHost: %s:%s\\r\\n' + AUTH + '\\r\\n')\n", i, sp, port, sp, port)
			fmt.Fprintf(&py, "raw('connect%d', 'CONNECT %s:%s HTTP/1.1\\r\\nHost: %s:%s\\r\\n' + AUTH + '\\r\\n')\n", i, sp, port, sp, port)
		}
		script.WriteString(netPy(py.String()))
		script.WriteString("echo END\n")
		r := e.sh(script.String())
		netRan(t, r)
		for _, sp := range egLoopbackSpellings {
			if !strings.Contains(r.stdout, "CURL "+sp+" 403 yes\n") {
				t.Errorf("curl http://%s:%s/: want 403 with X-Sandboxd-Decision (line %q)", sp, port, egLine(r.stdout, "CURL "+sp+" "))
			}
		}
		cases := egCases(r.stdout)
		for i, sp := range append(append([]string{}, egLoopbackSpellings...), egLoopbackExtra...) {
			want := []int{403}
			if i >= len(egLoopbackSpellings) {
				want = []int{400, 403}
			}
			egWantStatus(t, cases, fmt.Sprintf("get%d", i), r, want...)
			egWantStatus(t, cases, fmt.Sprintf("connect%d", i), r, want...)
			if t.Failed() {
				t.Logf("spelling %d is %s", i, sp)
			}
		}
		for _, o := range origins {
			o.mustHits(t, 0, r)
		}
		// Every spelling is one destination, and it was refused.
		egMustDeny(t, r, "127.0.0.1:"+port, "hard-deny")
		for _, b := range egNetBoundaries(r) {
			if b["destination"] != "127.0.0.1:"+port || b["decision"] != "deny" {
				t.Errorf("a loopback spelling was not normalised to 127.0.0.1:%s, or not denied: %v", port, b)
			}
		}
		if t.Failed() {
			t.Logf("%s\nboundaries %v", r, egNetBoundaries(r))
		}
	})
}

// egLine is the first line of s starting with prefix.
func egLine(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestEgressNameToLoopback: a name an allow rule names, which the DNS
// server resolves to 127.0.0.1, is refused as a hard deny after the
// lookup — plain HTTP and through a CONNECT tunnel — and the host's
// server on 127.0.0.1 gets nothing.
func TestEgressNameToLoopback(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		o := egNewOrigin(t, "127.0.0.1:0", false, nil)
		dns := egNewDNS(t, func(name string, n int) ([]netip.Addr, bool) {
			return egAddrs("127.0.0.1"), name == "loop.test"
		})
		pol := egPolicy(t, e, []string{"loop.test:" + o.port}, nil, nil, "[network]\nresolver = \""+dns.addr+"\"")
		r := e.sandboxd("run", "--policy", pol, "-c", fmt.Sprintf(
			"echo HTTP $(curl -s -m 10 -o /dev/null -w '%%{http_code}' http://loop.test:%[1]s/)\n"+
				"echo TUNNEL $(curl -s -m 10 -p -o /dev/null -w '%%{http_code}' http://loop.test:%[1]s/)\necho END\n", o.port))
		netRan(t, r)
		o.mustHits(t, 0, r)
		if !strings.Contains(r.stdout, "HTTP 403\n") {
			t.Errorf("plain HTTP to a name resolving to loopback: want 403\n%s", r)
		}
		if strings.Contains(r.stdout, "TUNNEL 200") {
			t.Errorf("a tunnel to a name resolving to loopback was opened\n%s", r)
		}
		if !dns.asked("loop.test") {
			t.Errorf("the allowed name was never looked up (the test proves nothing): DNS log %v", dns.queries())
		}
		egMustDeny(t, r, "loop.test:"+o.port, "hard-deny")
	})
}

// TestEgressRebinding: a name allowed to a private address is resolved
// once per run: when the DNS server's answer changes to 127.0.0.1 (also
// allowed by a rule, so a new lookup would be let through), later
// requests to the name — plain and tunnelled — still reach only the
// first address's server.
func TestEgressRebinding(t *testing.T) {
	// Serial: it uses the shared test address 10.254.254.1, whose interface the test that made it removes.
	priv := egPrivateAddr(t)
	forEach(t, func(t *testing.T, e *env) {
		var op, ol *egOrigin
		for i := 0; i < 20 && ol == nil; i++ {
			op = egNewOrigin(t, priv+":0", false, nil)
			if ln, err := net.Listen("tcp4", "127.0.0.1:"+op.port); err == nil {
				ln.Close()
				ol = egNewOrigin(t, "127.0.0.1:"+op.port, false, nil)
			}
		}
		if ol == nil {
			t.Fatal("no port free on both addresses")
		}
		dns := egNewDNS(t, func(name string, n int) ([]netip.Addr, bool) {
			if n <= 1 {
				return egAddrs(priv), name == "rebind.test"
			}
			return egAddrs("127.0.0.1"), name == "rebind.test"
		})
		pol := egPolicy(t, e, []string{"rebind.test:" + op.port, priv + ":" + op.port, "127.0.0.1:" + op.port}, nil, nil,
			"[network]\nresolver = \""+dns.addr+"\"")
		r := e.sandboxd("run", "--policy", pol, "-c", fmt.Sprintf(
			"curl -s -m 10 http://rebind.test:%[1]s/first; sleep 0.3; curl -s -m 10 http://rebind.test:%[1]s/second; curl -s -m 10 -p http://rebind.test:%[1]s/third; echo END\n", op.port))
		netRan(t, r)
		if n := strings.Count(r.stdout, op.body); n != 3 {
			t.Errorf("%d of 3 requests got the first address's answer\n%s", n, r)
		}
		op.mustHits(t, 3, r)
		ol.mustHits(t, 0, r)
		if n := dns.aQueries("rebind.test"); n != 1 {
			t.Errorf("rebind.test was looked up %d times in one run, want once: %v", n, dns.queries())
		}
		if b := egMustAllow(t, r, "rebind.test:"+op.port, 3); b != nil {
			if fmt.Sprint(b["addresses"]) != "["+priv+"]" {
				t.Errorf("boundary addresses %v, want [%s]", b["addresses"], priv)
			}
		}
	})
}

// TestEgressDeniedNameNotResolved: a name a deny rule covers, and one no
// rule covers, are refused before any lookup: the DNS server (which would
// resolve them to an allowed origin) is never asked about them.
func TestEgressDeniedNameNotResolved(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		o := egNewOrigin(t, "127.0.0.1:0", false, nil)
		dns := egNewDNS(t, func(string, int) ([]netip.Addr, bool) { return egAddrs("127.0.0.1"), true })
		pol := egPolicy(t, e, []string{"127.0.0.1:" + o.port}, nil, []string{"evil.test:*"},
			"[network]\nresolver = \""+dns.addr+"\"")
		r := e.sandboxd("run", "--policy", pol, "-c", fmt.Sprintf(`for u in http://evil.test:%[1]s/ http://EVIL.TEST.:%[1]s/ http://unlisted.test:%[1]s/; do
  echo "PLAIN $u $(curl -s -m 10 -o /dev/null -w '%%{http_code}' $u)"
  echo "TUNNEL $u $(curl -s -m 10 -p -o /dev/null -w '%%{http_code}' $u)"
done
echo END
`, o.port))
		netRan(t, r)
		o.mustHits(t, 0, r)
		for _, name := range []string{"evil.test", "unlisted.test"} {
			if dns.askedAny(name) {
				t.Errorf("%s reached the DNS server although it was refused: %v", name, dns.queries())
			}
		}
		if regexp.MustCompile(`(PLAIN|TUNNEL) \S+ 200`).MatchString(r.stdout) {
			t.Errorf("a refused name was served\n%s", r)
		}
		egMustDeny(t, r, "evil.test:"+o.port, "policy")
		egMustDeny(t, r, "unlisted.test:"+o.port)
	})
}

// askedAny reports whether any question contains name (itself, a
// subdomain or a search-domain expansion).
func (d *egDNS) askedAny(name string) bool {
	for _, q := range d.queries() {
		if strings.Contains(q, name) {
			return true
		}
	}
	return false
}

// TestEgressWildcardTraps: "*.example.test:PORT" covers names strictly
// below example.test, whatever their case or trailing dot, and nothing
// else, although the DNS server resolves every name to the allowed
// origin's address (which a rule names).
func TestEgressWildcardTraps(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		o := egNewOrigin(t, "127.0.0.1:0", false, nil)
		dns := egNewDNS(t, func(string, int) ([]netip.Addr, bool) { return egAddrs("127.0.0.1"), true })
		pol := egPolicy(t, e, []string{"*.example.test:" + o.port, "127.0.0.1:" + o.port}, nil, nil,
			"[network]\nresolver = \""+dns.addr+"\"")
		refused := []string{"example.test", "evilexample.test", "example.test.evil.test", "a.example.test.evil.test", "a.example.testx", "xexample.test"}
		allowed := []string{"a.example.test", "A.EXAMPLE.TEST.", "b.a.example.test"}
		var script strings.Builder
		for _, h := range append(append([]string{}, refused...), allowed...) {
			fmt.Fprintf(&script, "echo \"HOST %s $(curl -s -m 10 -o /dev/null -w '%%{http_code}' http://%s:%s/)\"\n", h, h, o.port)
		}
		script.WriteString("echo END\n")
		r := e.sandboxd("run", "--policy", pol, "-c", script.String())
		netRan(t, r)
		for _, h := range refused {
			if !strings.Contains(r.stdout, "HOST "+h+" 403\n") {
				t.Errorf("%s: want 403 (%q)", h, egLine(r.stdout, "HOST "+h+" "))
			}
			if n := o.hostHits(h); n != 0 {
				t.Errorf("%s reached the origin %d times", h, n)
			}
			if dns.aQueries(h) != 0 {
				t.Errorf("%s was looked up although it was refused: %v", h, dns.queries())
			}
			egMustDeny(t, r, h+":"+o.port)
		}
		for _, h := range allowed {
			if !strings.Contains(r.stdout, "HOST "+h+" 200\n") {
				t.Errorf("%s: want 200 (%q)", h, egLine(r.stdout, "HOST "+h+" "))
			}
		}
		if n := o.hostHits("a.example.test"); n != 2 {
			t.Errorf("a.example.test and A.EXAMPLE.TEST. reached the origin as a.example.test %d times, want 2: %s", n, o.summary())
		}
		if n := o.hostHits("b.a.example.test"); n != 1 {
			t.Errorf("b.a.example.test reached the origin %d times, want 1: %s", n, o.summary())
		}
		o.mustHits(t, 3, r)
		egMustAllow(t, r, "a.example.test:"+o.port, 2)
		for _, b := range egNetBoundaries(r) {
			if d, _ := b["destination"].(string); d != strings.ToLower(d) || strings.Contains(d, ".:") {
				t.Errorf("a destination was not normalised: %v", b)
			}
		}
		if t.Failed() {
			t.Logf("%s\nboundaries %v", r, egNetBoundaries(r))
		}
	})
}

// egRawRun runs python (after egPyLib) inside with a policy allowing
// only the allowed origin, and returns the run and its cases.
func egRawRun(t *testing.T, e *env, allowed *egOrigin, py string) (result, map[string]egCase) {
	t.Helper()
	pol := egPolicy(t, e, []string{"127.0.0.1:" + allowed.port}, nil, nil, "")
	r := e.sandboxd("run", "--policy", pol, "-c", netPy(egPyLib+py)+"echo END\n")
	netRan(t, r)
	if os.Getenv("EGRESS_VERBOSE") != "" {
		t.Logf("%s", r)
	}
	return r, egCases(r.stdout)
}

// egPyVars defines A and U (the allowed and unlisted origins' host:port)
// for the raw cases.
func egPyVars(a, u *egOrigin) string {
	return fmt.Sprintf("A = '127.0.0.1:%s'\nU = '127.0.0.1:%s'\n", a.port, u.port)
}

// TestEgressUserinfo: an absolute URI or a CONNECT authority with
// userinfo is 400 even when its host is allowed (curl would strip the
// userinfo, so these are raw requests), including the classic
// "allowed@unlisted" confusion.
func TestEgressUserinfo(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		a := egNewOrigin(t, "127.0.0.1:0", false, nil)
		u := egNewOrigin(t, "127.0.0.1:0", false, nil)
		r, cases := egRawRun(t, e, a, egPyVars(a, u)+`
raw('user', 'GET http://allowed@' + A + '/ HTTP/1.1\r\nHost: ' + A + '\r\n' + AUTH + '\r\n')
raw('userpass', 'GET http://user:pw@' + A + '/ HTTP/1.1\r\nHost: ' + A + '\r\n' + AUTH + '\r\n')
raw('confused', 'GET http://' + A + '@' + U + '/ HTTP/1.1\r\nHost: ' + U + '\r\n' + AUTH + '\r\n')
raw('connect', 'CONNECT allowed@' + A + ' HTTP/1.1\r\nHost: ' + A + '\r\n' + AUTH + '\r\n')
`)
		for _, c := range []string{"user", "userpass", "confused"} {
			egWantStatus(t, cases, c, r, 400)
		}
		egWantStatus(t, cases, "connect", r, 400)
		a.mustHits(t, 0, r)
		u.mustHits(t, 0, r)
	})
}

// TestEgressHostMismatch: an absolute URI to the allowed origin with a
// Host header naming another destination is 400, and neither origin
// gets anything.
func TestEgressHostMismatch(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		a := egNewOrigin(t, "127.0.0.1:0", false, nil)
		u := egNewOrigin(t, "127.0.0.1:0", false, nil)
		r, cases := egRawRun(t, e, a, egPyVars(a, u)+`
raw('other', 'GET http://' + A + '/ HTTP/1.1\r\nHost: ' + U + '\r\n' + AUTH + '\r\n')
raw('name', 'GET http://' + A + '/ HTTP/1.1\r\nHost: evil.test\r\n' + AUTH + '\r\n')
raw('noport', 'GET http://' + A + '/ HTTP/1.1\r\nHost: 127.0.0.1\r\n' + AUTH + '\r\n')
raw('twohosts', 'GET http://' + A + '/ HTTP/1.1\r\nHost: ' + A + '\r\nHost: ' + U + '\r\n' + AUTH + '\r\n')
raw('http10', 'GET http://' + A + '/ HTTP/1.0\r\nHost: ' + U + '\r\n' + AUTH + '\r\n')
`)
		for _, c := range []string{"other", "name", "noport", "twohosts", "http10"} {
			egWantStatus(t, cases, c, r, 400)
		}
		a.mustHits(t, 0, r)
		u.mustHits(t, 0, r)
	})
}

// TestEgressKeepAliveSecondRequest: every request on a kept-alive
// connection is decided on its own: after an allowed request, one to an
// unlisted origin on the same connection (sent after the first answer,
// or pipelined with it) is 403 and never reaches it.
func TestEgressKeepAliveSecondRequest(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		a := egNewOrigin(t, "127.0.0.1:0", false, nil)
		u := egNewOrigin(t, "127.0.0.1:0", false, nil)
		r, cases := egRawRun(t, e, a, egPyVars(a, u)+`
def req(h, path):
    return 'GET http://' + h + path + ' HTTP/1.1\r\nHost: ' + h + '\r\n' + AUTH + '\r\n'
s = conn()
s.sendall(req(A, '/one').encode())
st, h, b = read_resp(s)
report('first', st, h)
print('FIRSTCONN', h.get('connection', '-'), flush=True)
s.sendall(req(U, '/two').encode())
st, h, b = read_resp(s)
report('second', st, h)
s.close()
s = conn()
s.sendall((req(A, '/p1') + req(U, '/p2')).encode())
st, h, b = read_resp(s)
report('pipelined1', st, h)
st, h, b = read_resp(s)
report('pipelined2', st, h)
s.close()
s = conn()
s.sendall(req(A, '/c1').encode())
st, h, b = read_resp(s)
report('then-get', st, h)
s.sendall(('CONNECT ' + U + ' HTTP/1.1\r\nHost: ' + U + '\r\n' + AUTH + '\r\n').encode())
st, h, b = read_resp(s, connect=True)
report('then-connect', st, h)
if st == 200:
    s.sendall(('GET /tunnelled HTTP/1.1\r\nHost: ' + U + '\r\n\r\n').encode())
    read_resp(s)
s.close()
`)
		egWantStatus(t, cases, "first", r, 200)
		egWantStatus(t, cases, "second", r, 403)
		if t.Failed() {
			t.Logf("the first response's Connection header: %q", egLine(r.stdout, "FIRSTCONN"))
		}
		egWantStatus(t, cases, "pipelined1", r, 200)
		egWantStatus(t, cases, "pipelined2", r, 403)
		egWantStatus(t, cases, "then-get", r, 200)
		egWantStatus(t, cases, "then-connect", r, 403)
		a.mustHits(t, 3, r)
		u.mustHits(t, 0, r)
		egMustDeny(t, r, u.addr)
	})
}

// TestEgressSmuggling: requests whose framing two parsers could read
// differently (Content-Length with Transfer-Encoding, duplicate lengths,
// obfuscated encodings) never smuggle a request to the origin: the
// allowed origin never sees the hidden request's path, and the unlisted
// origin gets nothing.
func TestEgressSmuggling(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		a := egNewOrigin(t, "127.0.0.1:0", false, nil)
		u := egNewOrigin(t, "127.0.0.1:0", false, nil)
		r, cases := egRawRun(t, e, a, egPyVars(a, u)+`
hidden = 'GET /smuggled HTTP/1.1\r\nHost: ' + U + '\r\n\r\n'
hidden_abs = 'GET http://' + U + '/smuggled HTTP/1.1\r\nHost: ' + U + '\r\n' + AUTH + '\r\n'
def post(extra, body):
    return 'POST http://' + A + '/ HTTP/1.1\r\nHost: ' + A + '\r\n' + AUTH + extra + '\r\n' + body
b1 = '0\r\n\r\n' + hidden
raw('clte', post('Content-Length: %d\r\nTransfer-Encoding: chunked\r\n' % len(b1), b1))
b2 = '%x\r\n%s\r\n0\r\n\r\n' % (len(hidden), hidden)
raw('tecl', post('Transfer-Encoding: chunked\r\nContent-Length: 4\r\n', b2))
raw('tecl-abs', post('Transfer-Encoding: chunked\r\nContent-Length: 4\r\n', '%x\r\n%s\r\n0\r\n\r\n' % (len(hidden_abs), hidden_abs)))
raw('dupcl', post('Content-Length: 0\r\nContent-Length: %d\r\n' % len(hidden), hidden))
raw('te-space', post('Transfer-Encoding : chunked\r\nContent-Length: %d\r\n' % len(b1), b1))
raw('te-double', post('Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\nContent-Length: %d\r\n' % len(b1), b1))
raw('te-x', post('Transfer-Encoding: xchunked\r\nContent-Length: %d\r\n' % len(b1), b1))
raw('te-tab', post('Transfer-Encoding:\tchunked\r\nContent-Length: %d\r\n' % len(b1), b1))
raw('cl-plus', post('Content-Length: +%d\r\n' % len(hidden), hidden))
`)
		egWantStatus(t, cases, "clte", r, 400)
		egWantStatus(t, cases, "tecl", r, 400)
		egWantStatus(t, cases, "tecl-abs", r, 400)
		for _, c := range []string{"dupcl", "te-space", "te-double", "te-x", "te-tab", "cl-plus"} {
			if got, ok := cases[c]; !ok || (got.status >= 200 && got.status < 300) {
				t.Errorf("case %s: status %d, want a refusal", c, got.status)
			}
		}
		if a.sawPath("/smuggled") {
			t.Errorf("a smuggled request reached the allowed origin: %s", a.summary())
		}
		u.mustHits(t, 0, r)
		if t.Failed() {
			t.Logf("%s\n%s", r, a.summary())
		}
	})
}

// TestEgressOversized: an oversized request line, header or header
// block is refused with a 4xx before any decision or dial.
func TestEgressOversized(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		a := egNewOrigin(t, "127.0.0.1:0", false, nil)
		u := egNewOrigin(t, "127.0.0.1:0", false, nil)
		r, cases := egRawRun(t, e, a, egPyVars(a, u)+`
raw('line', 'GET http://' + A + '/' + 'a' * 70000 + ' HTTP/1.1\r\nHost: ' + A + '\r\n' + AUTH + '\r\n')
raw('header', 'GET http://' + A + '/ HTTP/1.1\r\nHost: ' + A + '\r\n' + AUTH + 'X-Big: ' + 'b' * 70000 + '\r\n\r\n')
raw('headers', 'GET http://' + A + '/ HTTP/1.1\r\nHost: ' + A + '\r\n' + AUTH + ''.join('X-H%d: %s\r\n' % (i, 'c' * 60) for i in range(2000)) + '\r\n')
raw('connect', 'CONNECT ' + 'a' * 70000 + '.test:443 HTTP/1.1\r\n' + AUTH + '\r\n')
raw('connect-header', 'CONNECT ' + A + ' HTTP/1.1\r\nHost: ' + A + '\r\n' + AUTH + 'X-Big: ' + 'b' * 70000 + '\r\n\r\n')
`)
		for _, c := range []string{"line", "header", "headers", "connect", "connect-header"} {
			if got, ok := cases[c]; !ok || got.status < 400 || got.status > 499 {
				t.Errorf("case %s: status %d, want 4xx", c, got.status)
			}
		}
		a.mustHits(t, 0, r)
		u.mustHits(t, 0, r)
		if t.Failed() {
			t.Logf("%s", r)
		}
	})
}

// TestEgressSlowloris: 300 half-open CONNECTs held from inside do not
// stop a normal request, plain or tunnelled, to the allowed origin in
// the same run, and none of them reaches it.
func TestEgressSlowloris(t *testing.T) {
	// Serial: it depends on the proxy's read deadlines.
	forEach(t, func(t *testing.T, e *env) {
		a := egNewOrigin(t, "127.0.0.1:0", false, nil)
		r, _ := egRawRun(t, e, a, fmt.Sprintf(`
import subprocess
A = '127.0.0.1:%s'
held = []
for i in range(300):
    s = conn()
    if i %% 3 == 0:
        s.sendall(('CONNECT ' + A + ' HTTP/1.1\r\n' + AUTH).encode())
    elif i %% 3 == 1:
        s.sendall(b'CONNECT 1')
    held.append(s)
print('HELD', len(held), flush=True)
t0 = time.time()
out = subprocess.run(['curl', '-s', '-m', '8', 'http://' + A + '/plain'], capture_output=True, text=True).stdout
print('PLAIN', out.strip(), flush=True)
out = subprocess.run(['curl', '-s', '-m', '8', '-p', 'http://' + A + '/tunnel'], capture_output=True, text=True).stdout
print('TUNNEL', out.strip(), flush=True)
print('SECONDS %%.1f' %% (time.time() - t0))
for s in held:
    s.close()
`, a.port))
		body := strings.TrimSpace(a.body)
		if !strings.Contains(r.stdout, "HELD 300\n") {
			t.Fatalf("the half-open connections were not all made\n%s", r)
		}
		if !strings.Contains(r.stdout, "PLAIN "+body+"\n") || !strings.Contains(r.stdout, "TUNNEL "+body+"\n") {
			t.Errorf("a normal request failed while half-open connections were held\n%s", r)
		}
		a.mustHits(t, 2, r)
	})
}

// TestEgress407: a request without the run's credential — none, another
// password, another user, another scheme, or in the wrong header — is
// 407 (with a Proxy-Authenticate challenge) and reaches nothing, while
// the same request with it is served.
func TestEgress407(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		a := egNewOrigin(t, "127.0.0.1:0", false, nil)
		r, cases := egRawRun(t, e, a, fmt.Sprintf(`
A = '127.0.0.1:%s'
_, _, tok = base64.b64decode(CREDS).decode().partition(':')
def get(auth):
    return 'GET http://' + A + '/ HTTP/1.1\r\nHost: ' + A + '\r\n' + auth + '\r\n'
def b64(s):
    return base64.b64encode(s.encode()).decode()
for case, auth in [
    ('none', ''),
    ('password', 'Proxy-Authorization: Basic ' + b64('sandboxd:' + tok[:-1] + ('0' if tok[-1] != '0' else '1')) + '\r\n'),
    ('user', 'Proxy-Authorization: Basic ' + b64('root:' + tok) + '\r\n'),
    ('empty', 'Proxy-Authorization: Basic ' + b64(':') + '\r\n'),
    ('nouser', 'Proxy-Authorization: Basic ' + b64(tok) + '\r\n'),
    ('bearer', 'Proxy-Authorization: Bearer ' + tok + '\r\n'),
    ('origin-header', 'Authorization: Basic ' + CREDS + '\r\n'),
    ('prefix', 'Proxy-Authorization: Basic ' + b64('sandboxd:' + tok[:8]) + '\r\n'),
]:
    st, h, b = raw(case, get(auth))
    print('CHALLENGE', case, h.get('proxy-authenticate', '-').replace(' ', '_'))
st, h, b = raw('connect', 'CONNECT ' + A + ' HTTP/1.1\r\nHost: ' + A + '\r\n\r\n')
print('CHALLENGE connect', h.get('proxy-authenticate', '-').replace(' ', '_'))
raw('good', get(AUTH))
`, a.port))
		for _, c := range []string{"none", "password", "user", "empty", "nouser", "bearer", "origin-header", "prefix", "connect"} {
			egWantStatus(t, cases, c, r, 407)
			if line := egLine(r.stdout, "CHALLENGE "+c+" "); !strings.Contains(strings.ToLower(line), "basic") {
				t.Errorf("case %s: the 407 has no Basic Proxy-Authenticate challenge (%q)", c, line)
			}
		}
		egWantStatus(t, cases, "good", r, 200)
		// Only the request with the credential got through.
		a.mustHits(t, 1, r)
	})
}

// TestEgressLandlockOnly: without namespaces there is no proxy: the
// report's egress mode is "none" with a reason naming namespaces, and a
// connection to an origin an allow rule names reaches nothing. Only the
// unprivileged identity may run landlock-only (root is refused).
func TestEgressLandlockOnly(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		if e.id.root() {
			t.Skip("root refuses isolation = \"landlock-only\" (TestProcLandlockOnly covers it)")
		}
		a := egNewOrigin(t, "127.0.0.1:0", false, nil)
		pol := egPolicy(t, e, []string{"127.0.0.1:" + a.port}, nil, nil, "isolation = \"landlock-only\"")
		r := e.sandboxd("run", "--policy", pol, "-c", fmt.Sprintf(
			"env | grep -i '_proxy=' | sed 's/=.*//' | sort | tr '\\n' ' '; echo\n"+
				"curl -s -m 5 http://127.0.0.1:%[1]s/; curl -s -m 5 --noproxy '*' http://127.0.0.1:%[1]s/; echo END\n", a.port))
		netRan(t, r)
		a.mustHits(t, 0, r)
		eg, _ := r.report["egress"].(map[string]any)
		if eg == nil || eg["mode"] != "none" {
			t.Fatalf("report egress %v, want mode none\n%s", r.report["egress"], r)
		}
		if why, _ := eg["why"].(string); !strings.Contains(why, "namespace") {
			t.Errorf("report egress why %q does not say namespaces are needed", why)
		}
		if strings.Contains(r.stdout, a.body) {
			t.Errorf("the origin answered\n%s", r)
		}
	})
}

// TestEgressAskOnceFor50: 50 sequential connections to one destination
// an ask rule covers cost one question to the person (run-scoped grant),
// all 50 reach the origin, and the report counts 50 connections.
func TestEgressAskOnceFor50(t *testing.T) {
	// Serial: it reads the terminal's transcript a fixed time after the run.
	forEach(t, func(t *testing.T, e *env) {
		a := egNewOrigin(t, "127.0.0.1:0", false, nil)
		tm := egNewTerminal(t, e, func(int) string { return "y" })
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("terminal:\n%q", tm.text())
			}
		})
		pol := egPolicy(t, e, nil, []string{"127.0.0.1:" + a.port}, nil, "")
		r := e.sandboxdOpts(runOpts{tty: tm.slave, timeout: 60 * time.Second}, "run", "--policy", pol, "--reviewer", "human", "-c",
			fmt.Sprintf("for i in $(seq 50); do curl -s -m 20 -o /dev/null -w '%%{http_code}\\n' http://127.0.0.1:%s/$i; done | sort | uniq -c; echo END", a.port))
		netRan(t, r)
		time.Sleep(50 * time.Millisecond)
		if prompts := tm.asked(); prompts != 1 {
			t.Errorf("the person was asked %d times, want once\n%q", tm.asked(), tm.text())
		}
		if !regexp.MustCompile(`(?m)^\s*50 200$`).MatchString(r.stdout) {
			t.Errorf("not every request was served\n%s", r)
		}
		a.mustHits(t, 50, r)
		if b := egMustAllow(t, r, "127.0.0.1:"+a.port, 50); b != nil {
			if b["connections"] != float64(50) || b["source"] != "human" {
				t.Errorf("boundary %v: want 50 connections decided by human", b)
			}
		}
	})
}

// TestEgressKillSandboxd: SIGKILL to sandboxd while the command inside
// fetches the allowed origin every 50 ms: no request reaches the origin
// after the kill, and no process of the command survives it.
func TestEgressKillSandboxd(t *testing.T) {
	// Serial: it times how fast the command's tree is gone after sandboxd is killed.
	forEach(t, func(t *testing.T, e *env) {
		a := egNewOrigin(t, "127.0.0.1:0", false, nil)
		pol := egPolicy(t, e, []string{"127.0.0.1:" + a.port}, nil, nil, "")
		marker := "egress-kill-" + randHex(6)
		s := egStart(t, e, nil, "run", "--policy", pol, "-c",
			fmt.Sprintf("while :; do curl -s -m 5 -o /dev/null http://127.0.0.1:%s/; sleep 0.05; done # %s", a.port, marker))
		if !egWaitFor(20*time.Second, func() bool { return a.count() >= 5 }) {
			s.cmd.Process.Kill()
			<-s.done
			t.Fatalf("the loop never reached the origin (%s)\nstdout %s\nstderr %s", a.summary(), s.stdout, s.stderr)
		}
		if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-s.done
		time.Sleep(100 * time.Millisecond)
		before := a.count()
		time.Sleep(time.Second)
		if after := a.count(); after != before {
			t.Errorf("%d requests reached the origin after sandboxd was killed", after-before)
		}
		noSurvivors(t, marker)
		if _, err := os.Stat("/proc/" + fmt.Sprint(s.cmd.Process.Pid)); err == nil {
			t.Errorf("sandboxd %d still exists", s.cmd.Process.Pid)
		}
	})
}
