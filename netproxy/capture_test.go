package netproxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// capturedListener stands in for the namespace's capture listener: each
// accepted connection reports, as its local address, the destination
// queued for it (what the kernel's TPROXY gives the real one).
type capturedListener struct {
	net.Listener
	mu    sync.Mutex
	dests []netip.AddrPort
}

type capturedConn struct {
	net.Conn
	local *net.TCPAddr
}

func (c *capturedConn) LocalAddr() net.Addr { return c.local }

func (l *capturedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	d := l.dests[0]
	l.dests = l.dests[1:]
	l.mu.Unlock()
	return &capturedConn{Conn: c, local: net.TCPAddrFromAddrPort(d)}, nil
}

// captureHarness serves a capture listener on the harness's proxy.
func captureHarness(t *testing.T, h *harness) *capturedListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := &capturedListener{Listener: ln}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.p.ServeCapture(ctx, cl, nil) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeCapture: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("ServeCapture did not return")
		}
	})
	return cl
}

// dialCaptured connects as the command would to dest, and says whether
// the echo came back.
func dialCaptured(t *testing.T, cl *capturedListener, dest netip.AddrPort) bool {
	t.Helper()
	cl.mu.Lock()
	cl.dests = append(cl.dests, dest)
	cl.mu.Unlock()
	c, err := net.DialTimeout("tcp", cl.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		return false
	}
	buf := make([]byte, 4)
	_, err = io.ReadFull(c, buf)
	return err == nil && string(buf) == "ping"
}

func stubAddr(t *testing.T, p *Proxy, name string) netip.Addr {
	t.Helper()
	r := parseReply(t, p.stub.answer(query(t, 1, name+".", dnsmessage.TypeA)))
	if len(r.addrs) != 1 {
		t.Fatalf("no stub address for %s: %+v", name, r)
	}
	return r.addrs[0]
}

// TestCaptureDecides: a captured connection is decided like a CONNECT to
// the name behind the stub address (or the IP literal), resolved and
// dialled only after an allow; refused ones are reset and never reach
// the resolver.
func TestCaptureDecides(t *testing.T) {
	echo := newEcho(t)
	port := echo.port()
	dec := newFakeDecider("allowed.test:" + port)
	h := newHarness(t, dec)
	h.res.add("allowed.test", "127.0.0.1")
	h.res.add("denied.test", "127.0.0.1")
	cl := captureHarness(t, h)
	p := uint16(mustPort(t, port))

	allowed := stubAddr(t, h.p, "allowed.test")
	if !dialCaptured(t, cl, netip.AddrPortFrom(allowed, p)) {
		t.Fatal("the allowed name did not reach the origin through capture")
	}
	if !dialCaptured(t, cl, netip.AddrPortFrom(allowed, p)) {
		t.Fatal("a second connection to the allowed name did not reach it")
	}
	denied := stubAddr(t, h.p, "denied.test")
	if dialCaptured(t, cl, netip.AddrPortFrom(denied, p)) {
		t.Fatal("a denied name reached the origin")
	}
	// An address of the stub's range it never gave, and an IP literal.
	if dialCaptured(t, cl, netip.AddrPortFrom(netip.MustParseAddr("198.19.3.3"), p)) {
		t.Fatal("an address the stub never gave reached the origin")
	}
	if dialCaptured(t, cl, netip.AddrPortFrom(netip.MustParseAddr("10.9.9.9"), p)) {
		t.Fatal("a denied IP literal was forwarded")
	}
	if got := echo.conns.Load(); got != 2 {
		t.Errorf("the origin got %d connections, want 2", got)
	}
	dec.mu.Lock()
	var decided []string
	for _, r := range dec.decides {
		decided = append(decided, r.Dest.String()+" via "+string(r.Via))
	}
	dec.mu.Unlock()
	want := []string{"allowed.test:" + port + " via capture", "denied.test:" + port + " via capture", "10.9.9.9:" + port + " via capture"}
	if len(decided) != len(want) {
		t.Fatalf("decided %v, want %v (one decision per destination)", decided, want)
	}
	for i := range want {
		if decided[i] != want[i] {
			t.Errorf("decided %v, want %v", decided, want)
			break
		}
	}
	if q := h.res.log(); len(q) != 1 || q[0] != "allowed.test" {
		t.Errorf("resolver asked %v, want only allowed.test", q)
	}
	c := h.p.Counters()
	if c.Connections["deny/stub-unknown"] != 1 || c.Connections["allow/policy"] != 2 || c.Connections["deny/policy"] != 2 {
		t.Errorf("counters %v", c.Connections)
	}
}

// TestCaptureShareDecisions: a destination decided for a CONNECT is the
// same decision for a captured connection (one Decide).
func TestCaptureShareDecisions(t *testing.T) {
	echo := newEcho(t)
	dec := newFakeDecider("shared.test:" + echo.port())
	h := newHarness(t, dec)
	h.res.add("shared.test", "127.0.0.1")
	cl := captureHarness(t, h)
	c, _, err := h.connect("shared.test:" + echo.port())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	a := stubAddr(t, h.p, "shared.test")
	if !dialCaptured(t, cl, netip.AddrPortFrom(a, uint16(mustPort(t, echo.port())))) {
		t.Fatal("the captured connection did not reach the origin")
	}
	dec.mu.Lock()
	n := len(dec.decides)
	dec.mu.Unlock()
	if n != 1 {
		t.Errorf("%d decisions, want 1 shared by CONNECT and capture", n)
	}
}

// TestCaptureLoopbackRefused: the capture listener's own address (the
// only loopback it can be reached on) is nobody's.
func TestCaptureLoopbackRefused(t *testing.T) {
	dec := newFakeDecider()
	h := newHarness(t, dec)
	cl := captureHarness(t, h)
	for _, d := range []string{"127.0.0.1:80", "[::1]:80", "0.0.0.0:80"} {
		if dialCaptured(t, cl, netip.MustParseAddrPort(d)) {
			t.Errorf("%s was forwarded", d)
		}
	}
	dec.mu.Lock()
	defer dec.mu.Unlock()
	if len(dec.decides) != 0 {
		t.Errorf("decided %v", dec.decides)
	}
}

func mustPort(t *testing.T, s string) int {
	t.Helper()
	p, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCaptureHTTP80: a captured connection to port 80 is parsed as HTTP:
// each request on it is decided on its own, its Host must name where the
// connection was made, and what goes upstream is the decided request.
func TestCaptureHTTP80(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:80")
	if err != nil {
		t.Skipf("an origin on port 80 is needed: %v", err)
	}
	var hits atomic.Int64
	var mu sync.Mutex
	var seen []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		mu.Lock()
		seen = append(seen, r.Host)
		mu.Unlock()
		io.WriteString(w, "origin")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	dec := newFakeDecider("web.test:80")
	h := newHarness(t, dec)
	h.res.add("web.test", "127.0.0.1")
	h.res.add("other.test", "127.0.0.1")
	cl := captureHarness(t, h)
	web := stubAddr(t, h.p, "web.test")
	other := stubAddr(t, h.p, "other.test")

	exchange := func(dest netip.Addr, reqs ...string) []int {
		t.Helper()
		cl.mu.Lock()
		cl.dests = append(cl.dests, netip.AddrPortFrom(dest, 80))
		cl.mu.Unlock()
		c, err := net.DialTimeout("tcp", cl.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		var codes []int
		for _, req := range reqs {
			if _, err := io.WriteString(c, req); err != nil {
				break
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				codes = append(codes, 0)
				break
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes = append(codes, resp.StatusCode)
		}
		return codes
	}
	get := func(target, host string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n"
	}
	check := func(name string, got []int, want ...int) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: statuses %v, want %v", name, got, want)
		}
	}
	check("two requests on one connection", exchange(web, get("/a", "web.test"), get("/b", "WEB.test:80")), 200, 200)
	check("absolute form naming the same host", exchange(web, get("http://web.test/c", "web.test")), 200)
	check("a Host naming another host", exchange(web, get("/d", "other.test")), 400)
	check("a second request naming another host", exchange(web, get("/e", "web.test"), get("/f", "other.test")), 200, 400)
	check("absolute form naming another host", exchange(web, get("http://other.test/g", "other.test")), 400)
	check("no Host", exchange(web, "GET /h HTTP/1.0\r\n\r\n"), 400)
	check("two Hosts", exchange(web, "GET /i HTTP/1.1\r\nHost: web.test\r\nHost: other.test\r\n\r\n"), 400)
	check("CONNECT", exchange(web, "CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n"), 400)
	check("a denied name", exchange(other, get("/j", "other.test")), 403)
	if got := hits.Load(); got != 4 {
		t.Errorf("the origin got %d requests, want 4", got)
	}
	mu.Lock()
	hosts := fmt.Sprint(seen)
	mu.Unlock()
	if hosts != "[web.test web.test web.test web.test]" {
		t.Errorf("Host headers upstream %s, want the decided destination only", hosts)
	}
	dec.mu.Lock()
	defer dec.mu.Unlock()
	for _, r := range dec.decides {
		if r.Via != ViaCapturedHTTP {
			t.Errorf("decided %s via %s, want %s", r.Dest, r.Via, ViaCapturedHTTP)
		}
	}
}

// TestLimitsAcrossWaysIn: MaxConns counts the connections of every
// listener together, and a run may ask about MaxDests destinations at
// most: the next new one is refused undecided, one already asked about
// is still decided.
func TestLimitsAcrossWaysIn(t *testing.T) {
	echo := newEcho(t)
	dec := newFakeDecider("127.0.0.1:" + echo.port())
	h := newHarness(t, dec, withLimits(Limits{MaxConns: 3, MaxDests: 17}))
	cl := captureHarness(t, h)
	socks := socksHarness(t, h)
	var held []net.Conn
	cl.mu.Lock()
	cl.dests = append(cl.dests, netip.MustParseAddrPort("10.1.1.1:9"))
	cl.mu.Unlock()
	block := make(chan struct{})
	dec.mu.Lock()
	dec.block = block // the captured connection waits for its decision
	dec.mu.Unlock()
	for _, addr := range []string{h.addr, socks, cl.Addr().String()} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	eventually(t, "three connections counted", func() bool { return h.p.active.Load() == 3 })
	c, err := net.Dial("tcp", socks)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("a fourth connection (on another listener) was served")
	}
	c.Close()
	for _, c := range held {
		c.Close()
	}
	close(block)
	eventually(t, "connections released", func() bool { return h.p.active.Load() == 0 })
	dec.mu.Lock()
	dec.block = nil
	dec.decides = nil
	dec.mu.Unlock()
	port := uint16(mustPort(t, echo.port()))
	for i := range 15 { // 10.1.1.1:9 was the first destination
		if code, _ := socksDial(t, socks, []byte{0}, nil, socksName("d"+strconv.Itoa(i)+".test", port)); code != 2 {
			t.Fatalf("destination %d: reply %d", i, code)
		}
	}
	ipReq := append([]byte{5, 1, 0, 1, 127, 0, 0, 1}, byte(port>>8), byte(port))
	if code, _ := socksDial(t, socks, []byte{0}, nil, ipReq); code != 0 {
		t.Errorf("the 17th destination: reply %d, want it decided (allowed)", code)
	}
	if code, _ := socksDial(t, socks, []byte{0}, nil, socksName("one-more.test", port)); code != 2 {
		t.Errorf("the 18th destination: reply %d, want refused", code)
	}
	if code, _ := socksDial(t, socks, []byte{0}, nil, ipReq); code != 0 {
		t.Errorf("a destination already asked about: reply %d, want it still decided", code)
	}
	dec.mu.Lock()
	n := len(dec.decides)
	dec.mu.Unlock()
	if n != 16 {
		t.Errorf("%d decisions since 10.1.1.1:9's, want 16 (the 18th destination undecided)", n)
	}
	if got := h.p.Counters().Connections["deny/limit"]; got < 2 {
		t.Errorf("deny/limit = %d, want the refused connection and destination counted", got)
	}
}
