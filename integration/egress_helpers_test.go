package integration

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Helpers of the egress proxy's tests (egress_test.go, egress_tools_test.go):
// origins that count what reaches them, a DNS server that logs what it is
// asked, a private address on an interface the test creates, policies,
// raw proxy requests from inside and the report's network boundaries.

// egOrigin is an HTTP(S) server on the host that counts every request
// that reaches it, by Host header and by path.
type egOrigin struct {
	srv        *httptest.Server
	addr       string // host:port as listened
	host, port string
	body       string // what the default handler answers

	mu     sync.Mutex
	hits   int
	byHost map[string]int
	paths  []string
}

// egNewOrigin starts an origin listening on listen ("127.0.0.1:0",
// "[::1]:PORT", "10.254.254.1:0", ...). next, if not nil, answers
// instead of the default handler (which writes o.body).
func egNewOrigin(t *testing.T, listen string, useTLS bool, next http.Handler) *egOrigin {
	t.Helper()
	network := "tcp"
	if strings.HasPrefix(listen, "[") {
		network = "tcp6"
	}
	ln, err := net.Listen(network, listen)
	if err != nil {
		t.Fatalf("origin listen %s: %v", listen, err)
	}
	o := &egOrigin{byHost: map[string]int{}, body: "ORIGIN-" + randHex(8) + "\n"}
	o.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.hits++
		h := strings.ToLower(r.Host)
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
		o.byHost[h]++
		o.paths = append(o.paths, r.URL.Path)
		o.mu.Unlock()
		if next != nil {
			next.ServeHTTP(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, o.body)
	}))
	o.srv.Listener.Close()
	o.srv.Listener = ln
	o.srv.Config.ErrorLog = nil
	if useTLS {
		o.srv.StartTLS()
	} else {
		o.srv.Start()
	}
	t.Cleanup(o.srv.Close)
	o.addr = ln.Addr().String()
	o.host, o.port, _ = net.SplitHostPort(o.addr)
	return o
}

// count is how many requests reached the origin.
func (o *egOrigin) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hits
}

// hostHits is how many requests named host (lowercase, no port).
func (o *egOrigin) hostHits(host string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byHost[host]
}

// sawPath reports whether any request had path p.
func (o *egOrigin) sawPath(p string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, q := range o.paths {
		if q == p {
			return true
		}
	}
	return false
}

func (o *egOrigin) summary() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprintf("origin %s: %d hits, by host %v, paths %v", o.addr, o.hits, o.byHost, o.paths)
}

// mustHits fails unless exactly n requests reached the origin.
func (o *egOrigin) mustHits(t *testing.T, n int, r result) {
	t.Helper()
	time.Sleep(20 * time.Millisecond)
	if got := o.count(); got != n {
		t.Errorf("%s; want %d hits\n%s", o.summary(), n, r)
	}
}

// caFile writes the origin's TLS certificate (it is its own CA) as PEM
// into dir, readable by both identities.
func (o *egOrigin) caFile(t *testing.T, e *env) string {
	t.Helper()
	p := filepath.Join(e.dir, "ca-"+randHex(3)+".pem")
	e.writeFile(p, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: o.srv.Certificate().Raw})), 0o644)
	return p
}

// egPolicy writes a policy file under the env's directory: the network
// rules (each "net connect " is prefixed) and any extra TOML.
func egPolicy(t *testing.T, e *env, allow, ask, deny []string, extra string) string {
	t.Helper()
	list := func(rules []string) string {
		var q []string
		for _, r := range rules {
			q = append(q, strconv.Quote("net connect "+r))
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	var b strings.Builder
	// Top-level keys first: extra may hold them and its own tables.
	b.WriteString(extra + "\n")
	b.WriteString("[boundaries]\n")
	if len(allow) > 0 {
		b.WriteString("allow = " + list(allow) + "\n")
	}
	if len(ask) > 0 {
		b.WriteString("ask = " + list(ask) + "\n")
	}
	if len(deny) > 0 {
		b.WriteString("deny = " + list(deny) + "\n")
	}
	p := filepath.Join(e.dir, "policies", "egress-"+randHex(3)+".toml")
	e.writeFile(p, b.String(), 0o644)
	return p
}

// egNetBoundaries are the report's network boundaries.
func egNetBoundaries(r result) []map[string]any {
	var out []map[string]any
	bs, _ := r.report["boundaries"].([]any)
	for _, b := range bs {
		if m, ok := b.(map[string]any); ok && m["surface"] == "network" {
			out = append(out, m)
		}
	}
	return out
}

// egBoundary is the report's network boundary for dest, or nil.
func egBoundary(r result, dest string) map[string]any {
	for _, b := range egNetBoundaries(r) {
		if b["destination"] == dest {
			return b
		}
	}
	return nil
}

// egMustDeny fails unless the report has a network boundary for dest
// with decision deny (and, if sources are given, one of them as source).
func egMustDeny(t *testing.T, r result, dest string, sources ...string) {
	t.Helper()
	b := egBoundary(r, dest)
	if b == nil {
		t.Errorf("no network boundary for %s in the report: %v\n%s", dest, egNetBoundaries(r), r)
		return
	}
	if b["decision"] != "deny" {
		t.Errorf("boundary for %s: decision %v, want deny: %v", dest, b["decision"], b)
	}
	if len(sources) > 0 {
		src, _ := b["source"].(string)
		ok := false
		for _, s := range sources {
			ok = ok || s == src
		}
		if !ok {
			t.Errorf("boundary for %s: source %q, want one of %v: %v", dest, src, sources, b)
		}
	}
}

// egAllowed is the report's egress.allowed entry for dest (what the
// policy allowed: no boundary), or nil.
func egAllowed(r result, dest string) map[string]any {
	eg, _ := r.report["egress"].(map[string]any)
	as, _ := eg["allowed"].([]any)
	for _, a := range as {
		if m, ok := a.(map[string]any); ok && m["destination"] == dest {
			return m
		}
	}
	return nil
}

// egMustAllow fails unless dest was allowed carrying at least minConns
// connections: by the policy (listed under egress.allowed, and no
// boundary, since nothing was refused or reviewed; the entry returned
// says source policy) or by a reviewer (a boundary with decision allow).
func egMustAllow(t *testing.T, r result, dest string, minConns int) map[string]any {
	t.Helper()
	b := egBoundary(r, dest)
	if a := egAllowed(r, dest); a != nil {
		if b != nil {
			t.Errorf("%s is both allowed by the policy and a boundary: %v", dest, b)
		}
		b = map[string]any{"decision": "allow", "source": "policy"}
		for k, v := range a {
			b[k] = v
		}
	}
	if b == nil {
		t.Errorf("%s was neither allowed by the policy nor a boundary in the report: %v %v\n%s", dest, r.report["egress"], egNetBoundaries(r), r)
		return nil
	}
	if b["decision"] != "allow" {
		t.Errorf("boundary for %s: decision %v, want allow: %v", dest, b["decision"], b)
	}
	if c, _ := b["connections"].(float64); int(c) < minConns {
		t.Errorf("%s: %v connections, want at least %d: %v", dest, b["connections"], minConns, b)
	}
	return b
}

// egDNS is a DNS server on the host's loopback (UDP) that answers A
// queries from answer and logs every question it gets.
type egDNS struct {
	addr string
	mu   sync.Mutex
	log  []string       // "name TYPE", name lowercase without the trailing dot
	seen map[string]int // A questions by name
	// answer returns the A records for name (asked for the n-th time,
	// from 1; 0 for another type), or false for NXDOMAIN.
	answer func(name string, n int) ([]netip.Addr, bool)
}

func egNewDNS(t *testing.T, answer func(name string, n int) ([]netip.Addr, bool)) *egDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &egDNS{addr: pc.LocalAddr().String(), seen: map[string]int{}, answer: answer}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := d.respond(buf[:n]); resp != nil {
				pc.WriteTo(resp, from)
			}
		}
	}()
	return d
}

func (d *egDNS) respond(msg []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	name := strings.TrimSuffix(strings.ToLower(q.Name.String()), ".")
	d.mu.Lock()
	d.log = append(d.log, name+" "+strings.TrimPrefix(q.Type.String(), "Type"))
	n := 0
	if q.Type == dnsmessage.TypeA {
		d.seen[name]++
		n = d.seen[name]
	}
	d.mu.Unlock()
	// Only A records are answered; another type gets an empty answer
	// for a known name.
	addrs, ok := d.answer(name, n)
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if !ok {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	b.StartQuestions()
	b.Question(q)
	b.StartAnswers()
	for _, addr := range addrs {
		if ok && q.Type == dnsmessage.TypeA && addr.Is4() {
			b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 0}, dnsmessage.AResource{A: addr.As4()})
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// queries is the log of questions so far.
func (d *egDNS) queries() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.log...)
}

// asked reports whether any question named name or a name ending in
// "."+name (a search-domain expansion of it, or its own subdomain).
func (d *egDNS) asked(name string) bool {
	for _, q := range d.queries() {
		qn, _, _ := strings.Cut(q, " ")
		if qn == name || strings.HasPrefix(qn, name+".") {
			return true
		}
	}
	return false
}

// aQueries is how many A questions named exactly name.
func (d *egDNS) aQueries(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seen[name]
}

// egPrivateAddr is the private IPv4 address a test's non-loopback origins
// listen on: 10.254.254.1 on a veth interface the test creates (removed
// at cleanup). Go's HTTP client never proxies loopback addresses, so
// go's own traffic needs an origin off loopback. Traffic to it is local
// delivery: nothing leaves the host.
func egPrivateAddr(t *testing.T) string {
	t.Helper()
	const ip = "10.254.254.1"
	if os.Geteuid() != 0 {
		t.Skip("creating a test interface needs root")
	}
	if egHasAddr(ip) {
		return ip // another test run made it; it removes it
	}
	name := "sbxeg" + randHex(3)
	peer := "sbxeh" + strings.TrimPrefix(name, "sbxeg")
	ipCmd := func(args ...string) error {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
		return nil
	}
	if err := ipCmd("link", "add", name, "type", "dummy"); err != nil {
		if err2 := ipCmd("link", "add", name, "type", "veth", "peer", "name", peer); err2 != nil {
			t.Fatalf("cannot create a test interface: %v; %v", err, err2)
		}
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", name).Run() })
	if err := ipCmd("addr", "add", ip+"/32", "dev", name); err != nil {
		t.Fatal(err)
	}
	if err := ipCmd("link", "set", name, "up"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100 && !egHasAddr(ip); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	return ip
}

func egHasAddr(ip string) bool {
	as, _ := net.InterfaceAddrs()
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().String() == ip {
			return true
		}
	}
	return false
}

// egPyLib is python that talks to the run's proxy with raw bytes: the
// proxy's address and credential come from $HTTP_PROXY. raw(case, data)
// prints "CASE <case> <status> <X-Sandboxd-Decision or ->" (status 0:
// closed without a response; -1: timed out).
const egPyLib = `
import os, socket, base64, sys, time
from urllib.parse import urlsplit, unquote
_P = urlsplit(os.environ['HTTP_PROXY'])
PHOST, PPORT = _P.hostname, _P.port
CREDS = base64.b64encode((unquote(_P.username) + ':' + unquote(_P.password)).encode()).decode()
AUTH = 'Proxy-Authorization: Basic ' + CREDS + '\r\n'

def conn():
    return socket.create_connection((PHOST, PPORT), timeout=10)

_left = {}

def read_resp(s, connect=False):
    # Bytes read past one response (a pipelined next one, or tunnelled
    # bytes after a CONNECT's 2xx) are kept for the next call on the
    # same socket.
    data = _left.pop(id(s), b'')
    try:
        while b'\r\n\r\n' not in data:
            c = s.recv(65536)
            if not c:
                break
            data += c
    except socket.timeout:
        return -1, {}, b''
    except OSError:
        return 0, {}, b''
    if b'\r\n\r\n' not in data:
        return 0, {}, b''
    head, _, body = data.partition(b'\r\n\r\n')
    lines = head.decode('latin-1').split('\r\n')
    try:
        status = int(lines[0].split()[1])
    except Exception:
        return 0, {}, b''
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(':')
        hdrs[k.strip().lower()] = v.strip()
    if connect and 200 <= status < 300:
        _left[id(s)] = body
        return status, hdrs, b''
    if 'content-length' in hdrs:
        n = int(hdrs['content-length'])
        try:
            while len(body) < n:
                c = s.recv(65536)
                if not c:
                    break
                body += c
        except OSError:
            pass
        _left[id(s)] = body[n:]
        body = body[:n]
    elif status not in (204, 304) and hdrs.get('transfer-encoding', '') != 'chunked' and status >= 200:
        try:
            s.settimeout(2)
            while True:
                c = s.recv(65536)
                if not c:
                    break
                body += c
        except OSError:
            pass
    return status, hdrs, body

def report(case, status, hdrs):
    print('CASE', case, status, hdrs.get('x-sandboxd-decision', '-').replace(' ', '_') or '-', flush=True)

def raw(case, data):
    try:
        s = conn()
        s.sendall(data.encode('latin-1') if isinstance(data, str) else data)
        status, hdrs, body = read_resp(s)
        s.close()
    except OSError as e:
        print('CASE', case, 0, 'error:' + str(e).replace(' ', '_'), flush=True)
        return 0, {}, b''
    report(case, status, hdrs)
    return status, hdrs, body
`

// egCase is one raw request's outcome as egPyLib printed it.
type egCase struct {
	status   int
	decision string
}

var egCaseRE = regexp.MustCompile(`(?m)^CASE (\S+) (-?\d+) (\S+)$`)

// egCases parses every CASE line of stdout.
func egCases(stdout string) map[string]egCase {
	out := map[string]egCase{}
	for _, m := range egCaseRE.FindAllStringSubmatch(stdout, -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = egCase{status: n, decision: m[3]}
	}
	return out
}

// egWantStatus fails unless case c answered one of want.
func egWantStatus(t *testing.T, cases map[string]egCase, c string, r result, want ...int) {
	t.Helper()
	got, ok := cases[c]
	if !ok {
		t.Errorf("case %s did not run\n%s", c, r)
		return
	}
	for _, w := range want {
		if got.status == w {
			return
		}
	}
	t.Errorf("case %s: status %d (decision %s), want %v", c, got.status, got.decision, want)
}

// egStarted is a sandboxd run started in the background.
type egStarted struct {
	cmd            *exec.Cmd
	stdout, stderr *bytes.Buffer
	done           chan struct{}
	err            error
}

// egStart starts sandboxd like sandboxdOpts does (same identity, HOME,
// PATH and workspace) but returns at once.
func egStart(t *testing.T, e *env, extraEnv []string, args ...string) *egStarted {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = e.ws
	cmd.Env = append([]string{
		"HOME=" + e.home,
		"PATH=" + egPath,
		"LANG=C.UTF-8",
		"USER=" + e.id.name,
		"GOFLAGS=-mod=mod",
		"GOTOOLCHAIN=local",
		"GOPROXY=off",
	}, extraEnv...)
	s := &egStarted{cmd: cmd, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if os.Geteuid() == 0 && e.id.uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid), Groups: []uint32{}}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.done
	})
	return s
}

// egPath is the PATH every sandboxd run of the harness gets.
const egPath = "/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// egWaitFor polls cond every 10 ms until it holds or d passes.
func egWaitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// egNeed skips the test when a tool it drives is not installed (on the
// PATH the sandboxed command gets).
func egNeed(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		found := false
		for _, dir := range filepath.SplitList(egPath) {
			if st, err := os.Stat(filepath.Join(dir, tool)); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				found = true
				break
			}
		}
		if !found {
			t.Skipf("%s is not installed (not on %s)", tool, egPath)
		}
	}
}

// egPromptEnd ends every question the human reviewer asks, a network
// one ("Allow connections to this destination? (the command waits)
// [y/N]") as well as a filesystem one.
const egPromptEnd = "[y/N]"

// egNewTerminal is a pty the test plays the person at, answering every
// question (counted by egPromptEnd) with answer(n) ("" leaves it
// unanswered).
func egNewTerminal(t *testing.T, e *env, answer func(n int) string) *terminal {
	t.Helper()
	return newTerminalFor(t, e, egPromptEnd, func(n int, _ string) string { return answer(n) })
}

// logOnFailure shows the terminal's transcript if t fails.
func (tm *terminal) logOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("terminal:\n%q", tm.text())
		}
	})
}

// asked counts the questions shown so far.
func (tm *terminal) asked() int {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.prompts
}

// egAddrs parses addresses for a DNS answer.
func egAddrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}
