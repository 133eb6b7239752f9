package netproxy

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAuthRequired(t *testing.T) {
	o := newOrigin(t)
	dec := newFakeDecider("allowed.test:" + o.port())
	h := newHarness(t, dec)
	h.res.add("allowed.test", "127.0.0.1")
	target := "allowed.test:" + o.port()
	cases := map[string]string{
		"none":        "",
		"wrong user":  "Proxy-Authorization: Basic " + b64("root:"+testToken) + "\r\n",
		"wrong token": "Proxy-Authorization: " + authHeader("nope") + "\r\n",
		"other run":   "Proxy-Authorization: " + authHeader("tok-run-2") + "\r\n",
		"bearer":      "Proxy-Authorization: Bearer " + testToken + "\r\n",
		"two headers": "Proxy-Authorization: " + authHeader(testToken) + "\r\nProxy-Authorization: " + authHeader(testToken) + "\r\n",
	}
	for name, hdr := range cases {
		for _, req := range []string{
			"CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n" + hdr + "\r\n",
			"GET http://" + target + "/ HTTP/1.1\r\nHost: " + target + "\r\n" + hdr + "\r\n",
		} {
			resp, body := h.raw(req)
			if resp.StatusCode != 407 || resp.Header.Get("Proxy-Authenticate") != `Basic realm="sandboxd"` {
				t.Errorf("%s: %s %q", name, resp.Status, body)
			}
			if strings.Contains(body, testToken) {
				t.Errorf("%s: body leaks the token", name)
			}
		}
	}
	if n := o.hits.Load(); n != 0 {
		t.Errorf("origin hit %d times", n)
	}
	if d, _, _ := dec.calls(); len(d) != 0 {
		t.Errorf("decider asked %d times", len(d))
	}
	if got := h.p.Counters().Connections["deny/auth"]; got != int64(2*len(cases)) {
		t.Errorf("deny/auth = %d", got)
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestConnectTLS(t *testing.T) {
	srv := newTLSOrigin(t)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	dec := newFakeDecider("example.com:" + port)
	h := newHarness(t, dec)
	h.res.add("example.com", "127.0.0.1")

	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(&url.URL{Scheme: "http", Host: h.addr, User: url.UserPassword("sandboxd", testToken)})
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := c.Post("https://example.com:"+port+"/", "text/plain", strings.NewReader("ping"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "tls says pong" {
		t.Fatalf("%s %q", resp.Status, b)
	}
	d, r, u := dec.calls()
	if len(d) != 1 || d[0].Addrs != nil || d[0].Via != ViaConnect || len(r) != 1 || len(u) != 1 {
		t.Fatalf("calls: decide %v resolved %v use %v", d, r, u)
	}
	if got := r[0].Addrs; len(got) != 1 || got[0] != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("Resolved addrs %v", got)
	}
	tr.CloseIdleConnections()
	// Relayed bytes are counted as they are written; the tunnel ends after.
	eventually(t, "tunnel bytes counted", func() bool { cs := h.p.Counters(); return cs.BytesUp > 0 && cs.BytesDown > 0 })
	cs := h.p.Counters()
	if cs.BytesUp == 0 || cs.BytesDown == 0 || cs.Connections["allow/policy"] != 1 || cs.Decisions != 1 {
		t.Errorf("counters %+v", cs)
	}
}

func newTLSOrigin(t *testing.T) *httptest.Server {
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		_, _ = io.WriteString(w, "tls says pong")
	}))
	t.Cleanup(s.Close)
	return s
}

func TestPlainHTTPAllowed(t *testing.T) {
	o := newOrigin(t)
	dec := newFakeDecider("allowed.test:" + o.port())
	h := newHarness(t, dec)
	h.res.add("allowed.test", "127.0.0.1")
	resp, err := h.client(testToken).Post("http://ALLOWED.test:"+o.port()+"/x", "text/plain", strings.NewReader("0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "hello from origin; got 10 bytes" {
		t.Fatalf("%s %q", resp.Status, b)
	}
	if resp.Header.Get("X-Sandboxd-Decision") != "" {
		t.Errorf("origin's X-Sandboxd-Decision passed through")
	}
	o.mu.Lock()
	hosts, auth := o.hosts, o.auth
	o.mu.Unlock()
	if len(hosts) != 1 || hosts[0] != "allowed.test:"+o.port() || auth[0] != "" {
		t.Errorf("origin saw Host %q, Proxy-Authorization %q", hosts, auth)
	}
	cs := h.p.Counters()
	if cs.BytesUp != 10 || cs.BytesDown != int64(len(b)) {
		t.Errorf("bytes up %d down %d", cs.BytesUp, cs.BytesDown)
	}
	if d, _, u := dec.calls(); len(d) != 1 || d[0].Via != ViaHTTP || len(u) != 1 {
		t.Errorf("calls %v %v", d, u)
	}
}

func TestMalformedTargets(t *testing.T) {
	o := newOrigin(t)
	p := o.port()
	dec := newFakeDecider("127.0.0.1:"+p, "allowed.test:"+p)
	h := newHarness(t, dec)
	h.res.add("allowed.test", "127.0.0.1")
	auth := "Proxy-Authorization: " + authHeader(testToken) + "\r\n"
	cases := map[string]string{
		"origin-form":          "GET / HTTP/1.1\r\nHost: 127.0.0.1:" + p + "\r\n",
		"https absolute":       "GET https://127.0.0.1:" + p + "/ HTTP/1.1\r\nHost: 127.0.0.1:" + p + "\r\n",
		"ftp":                  "GET ftp://127.0.0.1:" + p + "/ HTTP/1.1\r\nHost: 127.0.0.1:" + p + "\r\n",
		"userinfo":             "GET http://allowed@127.0.0.1:" + p + "/ HTTP/1.1\r\nHost: 127.0.0.1:" + p + "\r\n",
		"user:pw":              "GET http://user:pw@127.0.0.1:" + p + "/ HTTP/1.1\r\nHost: 127.0.0.1:" + p + "\r\n",
		"host mismatch":        "GET http://allowed.test:" + p + "/ HTTP/1.1\r\nHost: evil.test:" + p + "\r\n",
		"host port mismatch":   "GET http://allowed.test:" + p + "/ HTTP/1.1\r\nHost: allowed.test\r\n",
		"connect host differs": "CONNECT allowed.test:" + p + " HTTP/1.1\r\nHost: evil.test:" + p + "\r\n",
		"connect path":         "CONNECT allowed.test:" + p + "/x HTTP/1.1\r\nHost: allowed.test:" + p + "\r\n",
		"connect userinfo":     "CONNECT u@allowed.test:" + p + " HTTP/1.1\r\nHost: allowed.test:" + p + "\r\n",
		"connect no port":      "CONNECT allowed.test HTTP/1.1\r\nHost: allowed.test\r\n",
		"options star":         "OPTIONS * HTTP/1.1\r\nHost: allowed.test\r\n",
		"fragment":             "GET http://evil.test#@allowed.test:" + p + "/ HTTP/1.1\r\nHost: allowed.test:" + p + "\r\n",
		"percent host":         "GET http://%61llowed.test:" + p + "/ HTTP/1.1\r\nHost: allowed.test:" + p + "\r\n",
		"cl and te":            "POST http://allowed.test:" + p + "/ HTTP/1.1\r\nHost: allowed.test:" + p + "\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n",
	}
	for _, port := range []string{"443:22", "+443", "0", "65536", "", "0443", "0x1bb", " 443"} {
		cases["connect port "+port] = "CONNECT allowed.test:" + port + " HTTP/1.1\r\nHost: allowed.test\r\n"
		cases["http port "+port] = "GET http://allowed.test:" + port + "/ HTTP/1.1\r\nHost: allowed.test\r\n"
	}
	for name, req := range cases {
		req = strings.Replace(req, "\r\n", "\r\n"+auth, 1) + "\r\n"
		resp, body := h.raw(req)
		if resp.StatusCode != 400 {
			t.Errorf("%s: %s %q", name, resp.Status, body)
			continue
		}
		// net/http refuses some of these itself; ours say why.
		if d := resp.Header.Get("X-Sandboxd-Decision"); d != "" && (d != "deny; source=malformed" || !strings.Contains(body, "malformed")) {
			t.Errorf("%s: %v %q", name, resp.Header, body)
		}
	}
	if n := o.hits.Load(); n != 0 {
		t.Errorf("origin hit %d times", n)
	}
	if d, _, _ := dec.calls(); len(d) != 0 {
		t.Errorf("decider asked %v", d)
	}
	if q := h.res.log(); len(q) != 0 {
		t.Errorf("resolver asked %v", q)
	}
}

func TestKeepAliveEachRequestDecided(t *testing.T) {
	allowed, unlisted := newOrigin(t), newOrigin(t)
	dec := newFakeDecider("127.0.0.1:" + allowed.port())
	h := newHarness(t, dec)
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i, o := range []*origin{allowed, unlisted} {
		target := "127.0.0.1:" + o.port()
		fmt.Fprintf(c, "GET http://%s/ HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\n\r\n", target, target, authHeader(testToken))
		resp, body := readResp(t, br)
		want := []int{200, 403}[i]
		if resp.StatusCode != want {
			t.Fatalf("request %d: %s %q", i, resp.Status, body)
		}
		if i == 1 && (resp.Header.Get("X-Sandboxd-Decision") != "deny; source=policy" ||
			!containsAll(body, "sandboxd denied the connection to "+target, "Denied by policy", "will be denied too")) {
			t.Errorf("refusal: %v %q", resp.Header, body)
		}
	}
	if allowed.hits.Load() != 1 || unlisted.hits.Load() != 0 {
		t.Errorf("hits: allowed %d unlisted %d", allowed.hits.Load(), unlisted.hits.Load())
	}
}

func TestSmuggledRequestIsDecided(t *testing.T) {
	allowed, unlisted := newOrigin(t), newOrigin(t)
	dec := newFakeDecider("127.0.0.1:" + allowed.port())
	h := newHarness(t, dec)
	a, u := "127.0.0.1:"+allowed.port(), "127.0.0.1:"+unlisted.port()
	hidden := "GET http://" + u + "/ HTTP/1.1\r\nHost: " + u + "\r\nProxy-Authorization: " + authHeader(testToken) + "\r\n\r\n"
	auth := "Proxy-Authorization: " + authHeader(testToken) + "\r\n"
	// CL+TE: refused outright.
	body := "0\r\n\r\n" + hidden
	resp, _ := h.raw("POST http://" + a + "/ HTTP/1.1\r\nHost: " + a + "\r\n" + auth +
		fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n", len(body)) + body)
	if resp.StatusCode != 400 {
		t.Errorf("CL+TE: %s", resp.Status)
	}
	// A chunked body hiding a request: the hidden bytes stay body.
	chunk := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(hidden), hidden)
	resp, _ = h.raw("POST http://" + a + "/ HTTP/1.1\r\nHost: " + a + "\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\n" + chunk)
	if resp.StatusCode != 200 {
		t.Errorf("chunked: %s", resp.Status)
	}
	if unlisted.hits.Load() != 0 || allowed.hits.Load() != 1 {
		t.Errorf("hits: allowed %d unlisted %d", allowed.hits.Load(), unlisted.hits.Load())
	}
}

func TestOversizedHead(t *testing.T) {
	o := newOrigin(t)
	dec := newFakeDecider("127.0.0.1:" + o.port())
	h := newHarness(t, dec, withLimits(Limits{MaxHeaderBytes: 4 << 10}))
	target := "127.0.0.1:" + o.port()
	long := strings.Repeat("a", 64<<10)
	for name, req := range map[string]string{
		"request line": "GET http://" + target + "/" + long + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n",
		"header":       "GET http://" + target + "/ HTTP/1.1\r\nHost: " + target + "\r\nX-Big: " + long + "\r\n\r\n",
	} {
		resp, _ := h.raw(req)
		if resp.StatusCode != 431 && resp.StatusCode != 400 {
			t.Errorf("%s: %s", name, resp.Status)
		}
	}
	if d, _, _ := dec.calls(); len(d) != 0 || o.hits.Load() != 0 {
		t.Errorf("decider %d calls, origin %d hits", len(d), o.hits.Load())
	}
}

func TestSlowloris(t *testing.T) {
	o := newOrigin(t)
	dec := newFakeDecider("127.0.0.1:" + o.port())
	h := newHarness(t, dec)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 200 {
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		_, _ = io.WriteString(c, "CONNECT 127.0.0.1:"+o.port()+" HTTP/1.1\r\nHost: x\r\n")
	}
	start := time.Now()
	code, _, _ := httpGet(t, h, "http://127.0.0.1:"+o.port()+"/")
	if code != 200 || time.Since(start) > 5*time.Second {
		t.Errorf("status %d after %v", code, time.Since(start))
	}
}

func TestDeniedNameNeverResolved(t *testing.T) {
	dec := newFakeDecider()
	dec.set(func(d *fakeDecider) { d.source, d.reason = "reviewer", "not needed for\x1b[31m this\r\ntask" })
	h := newHarness(t, dec)
	h.res.add("secret.test", "127.0.0.1")
	_, _, err := h.connect("secret.test:443")
	if statusOf(err) != 403 {
		t.Fatalf("got %v", err)
	}
	body := err.(*statusErr).body
	if !containsAll(body, "sandboxd denied the connection to secret.test:443", "Denied by the reviewer: not needed for", "will be denied too") ||
		strings.ContainsAny(body, "\x1b\r") || strings.Count(body, "\n") > 3 {
		t.Errorf("body %q", body)
	}
	if q := h.res.log(); len(q) != 0 {
		t.Errorf("resolver asked %v", q)
	}
	d, r, _ := dec.calls()
	if len(d) != 1 || d[0].Addrs != nil || d[0].Dest.Host != "secret.test" || len(r) != 0 {
		t.Errorf("decide %v resolved %v", d, r)
	}
	// Run-scoped: a second try is answered from the cache.
	_, _, err = h.connect("secret.test:443")
	if statusOf(err) != 403 {
		t.Fatalf("second: %v", err)
	}
	if d, _, _ := dec.calls(); len(d) != 1 {
		t.Errorf("asked again: %d", len(d))
	}
}

func TestReviewerErrorReadsDifferently(t *testing.T) {
	dec := newFakeDecider()
	dec.set(func(d *fakeDecider) { d.source, d.reason = "error", "model unavailable" })
	h := newHarness(t, dec)
	_, _, err := h.connect("203.0.113.9:443")
	if statusOf(err) != 403 || !strings.Contains(err.Error(), "The reviewer could not decide (error): model unavailable") {
		t.Fatalf("got %v", err)
	}
	if d, _, _ := dec.calls(); len(d) != 1 || len(d[0].Addrs) != 1 || d[0].Addrs[0] != netip.MustParseAddr("203.0.113.9") {
		t.Errorf("Decide %v", d)
	}
}

func TestResolvedDenyHonoured(t *testing.T) {
	o := newOrigin(t)
	dec := newFakeDecider("rebind.test:" + o.port())
	dec.set(func(d *fakeDecider) { d.denyAddr[netip.MustParseAddr("127.0.0.1")] = true })
	h := newHarness(t, dec)
	h.res.add("rebind.test", "::ffff:127.0.0.1")
	code, body, hdr := httpGet(t, h, "http://rebind.test:"+o.port()+"/")
	if code != 403 || hdr.Get("X-Sandboxd-Decision") != "deny; source=hard-deny" {
		t.Fatalf("%d %v %q", code, hdr, body)
	}
	_, r, u := dec.calls()
	if len(r) != 1 || len(r[0].Addrs) != 1 || r[0].Addrs[0] != netip.MustParseAddr("127.0.0.1") || len(u) != 0 {
		t.Errorf("resolved %v use %v", r, u)
	}
	if o.hits.Load() != 0 {
		t.Errorf("origin hit")
	}
}

func TestScopeRunOneDecision(t *testing.T) {
	e := newEcho(t)
	dec := newFakeDecider("echo.test:" + e.port())
	block := make(chan struct{})
	dec.set(func(d *fakeDecider) { d.block = block })
	h := newHarness(t, dec)
	h.res.add("echo.test", "127.0.0.1")
	errs := make(chan error, 50)
	for range 50 {
		go func() { errs <- tunnelEcho(h, "echo.test:"+e.port(), "hi") }()
	}
	eventually(t, "a pending decision", func() bool { d, _, _ := dec.calls(); return len(d) == 1 })
	time.Sleep(50 * time.Millisecond)
	close(block)
	for range 50 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	d, r, u := dec.calls()
	if len(d) != 1 || len(r) != 1 || len(u) != 50 {
		t.Errorf("decide %d resolved %d use %d", len(d), len(r), len(u))
	}
	if h.p.Counters().DecisionWait <= 0 {
		t.Errorf("no review wait measured")
	}
}

func TestScopeConnection(t *testing.T) {
	e := newEcho(t)
	dec := newFakeDecider("127.0.0.1:" + e.port())
	h := newHarness(t, dec, func(c *Config, _ *Dialer) { c.Scope = ScopeConnection })
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if err := tunnelEcho(h, "127.0.0.1:"+e.port(), "hi"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if d, _, u := dec.calls(); len(d) != 50 || len(u) != 50 {
		t.Errorf("decide %d use %d", len(d), len(u))
	}
}

func TestWaitersShareTheVerdict(t *testing.T) {
	e := newEcho(t)
	dec := newFakeDecider() // denies
	block := make(chan struct{})
	dec.set(func(d *fakeDecider) { d.block = block })
	h := newHarness(t, dec)
	errs := make(chan error, 10)
	for range 10 {
		go func() { _, _, err := h.connect("127.0.0.1:" + e.port()); errs <- err }()
	}
	eventually(t, "a pending decision", func() bool { d, _, _ := dec.calls(); return len(d) == 1 })
	time.Sleep(50 * time.Millisecond)
	close(block)
	for range 10 {
		if err := <-errs; statusOf(err) != 403 {
			t.Errorf("got %v", err)
		}
	}
	if e.conns.Load() != 0 {
		t.Errorf("origin reached")
	}
}

func TestHoldTimeout(t *testing.T) {
	o := newOrigin(t)
	dec := newFakeDecider("127.0.0.1:" + o.port())
	dec.set(func(d *fakeDecider) { d.block = make(chan struct{}) })
	h := newHarness(t, dec, withLimits(Limits{Hold: 200 * time.Millisecond}))
	code, body, hdr := httpGet(t, h, "http://127.0.0.1:"+o.port()+"/")
	if code != 403 || !strings.Contains(body, "No decision was made in time") || hdr.Get("X-Sandboxd-Decision") == "" {
		t.Fatalf("%d %q", code, body)
	}
	if o.hits.Load() != 0 {
		t.Errorf("origin hit")
	}
}

func TestReservedNeverDialled(t *testing.T) {
	o := newOrigin(t)
	dec := newFakeDecider("127.0.0.1:"+o.port(), "alias.test:"+o.port())
	ap := netip.MustParseAddrPort(o.Listener.Addr().String())
	h := newHarness(t, dec, func(c *Config, _ *Dialer) {
		c.Reserved = func(a netip.AddrPort) bool { return a == ap }
	})
	h.res.add("alias.test", "127.0.0.1")
	for _, target := range []string{"http://127.0.0.1:" + o.port() + "/", "http://alias.test:" + o.port() + "/"} {
		code, body, hdr := httpGet(t, h, target)
		if code != 403 || hdr.Get("X-Sandboxd-Decision") != "deny; source=hard-deny" {
			t.Errorf("%s: %d %q", target, code, body)
		}
	}
	if _, _, err := h.connect("127.0.0.1:" + o.port()); statusOf(err) != 403 {
		t.Errorf("CONNECT: %v", err)
	}
	if o.hits.Load() != 0 {
		t.Errorf("reserved origin hit %d", o.hits.Load())
	}
}

func TestInsideLoopback(t *testing.T) {
	e := newEcho(t)
	dec := newFakeDecider()
	var insideDials []string
	var mu sync.Mutex
	h := newHarness(t, dec, func(_ *Config, in *Dialer) {
		*in = func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			insideDials = append(insideDials, addr)
			mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	})
	for _, target := range []string{"localhost:" + e.port(), "127.0.0.1:" + e.port(), "[::1]:" + e.port()} {
		if err := tunnelEcho(h, target, "inside"); err != nil {
			t.Errorf("%s: %v", target, err)
		}
	}
	if d, _, _ := dec.calls(); len(d) != 0 {
		t.Errorf("decider asked %v", d)
	}
	if got := h.p.Counters().Connections["allow/inside"]; got != 3 {
		t.Errorf("allow/inside = %d", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(insideDials) != 3 || insideDials[0] != "127.0.0.1:"+e.port() {
		t.Errorf("inside dials %v", insideDials)
	}
}

// tunnelEcho opens a tunnel to an echo server and checks msg comes back.
func tunnelEcho(h *harness, target, msg string) error {
	c, br, err := h.connect(target)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(br, got); err != nil {
		return err
	}
	if string(got) != msg {
		return fmt.Errorf("echo %q", got)
	}
	return nil
}

// Cloud metadata endpoints are never dialled, even when the decider
// allows them: by address (Azure's WireServer, a public address; the EKS
// Pod Identity Agent over IPv6), by a metadata name, and by a name that
// resolves to one, alone or among other addresses; through a plain
// request and a CONNECT. The refusal comes before any dial: the origin
// the names resolve to is never reached, and the WireServer answers a
// 403 of the proxy's own, not a failed connection.
func TestMetadataNeverDialled(t *testing.T) {
	o := newOrigin(t)
	port := o.port()
	targets := []string{"168.63.129.16:80", "[fd00:ec2::23]:80", "metadata.google.internal:" + port,
		"wire.test:" + port, "mixed.test:" + port}
	dec := newFakeDecider(targets...)
	h := newHarness(t, dec)
	h.res.add("metadata.google.internal", "127.0.0.1")
	h.res.add("wire.test", "168.63.129.16")
	h.res.add("mixed.test", "127.0.0.1", "168.63.129.16")
	for _, target := range targets {
		code, body, hdr := httpGet(t, h, "http://"+target+"/")
		if code != 403 || hdr.Get("X-Sandboxd-Decision") != "deny; source=hard-deny" || !strings.Contains(body, "metadata") {
			t.Errorf("GET %s: %d %q %q", target, code, hdr.Get("X-Sandboxd-Decision"), body)
		}
		if _, _, err := h.connect(target); statusOf(err) != 403 {
			t.Errorf("CONNECT %s: %v", target, err)
		}
	}
	if d, _, _ := dec.calls(); len(d) == 0 {
		t.Error("the decider was never asked: the test proves nothing")
	}
	if o.hits.Load() != 0 {
		t.Errorf("the origin behind a metadata name was reached %d times", o.hits.Load())
	}
}

// TestConfigDial: every upstream connection, plain HTTP and CONNECT,
// is made by Config.Dial (a daemon's dials as the caller), to exactly
// the checked address; a Dial that fails reaches nothing; the default
// resolver's queries go through Dial too.
func TestConfigDial(t *testing.T) {
	o := newOrigin(t)
	dec := newFakeDecider("127.0.0.1:"+o.port(), "name.test:"+o.port())
	var mu sync.Mutex
	var dials []string
	fail := false
	h := newHarness(t, dec, func(c *Config, _ *Dialer) {
		c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dials = append(dials, network+" "+addr)
			f := fail
			mu.Unlock()
			if f {
				return nil, errors.New("refused by the test")
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	})
	h.res.add("name.test", "127.0.0.1")
	if code, body, _ := httpGet(t, h, "http://name.test:"+o.port()+"/"); code != 200 {
		t.Fatalf("GET: %d %q", code, body)
	}
	c, _, err := h.connect("127.0.0.1:" + o.port())
	if err != nil {
		t.Fatalf("CONNECT: %v", err)
	}
	c.Close()
	mu.Lock()
	want := "tcp 127.0.0.1:" + o.port()
	if len(dials) != 2 || dials[0] != want || dials[1] != want {
		t.Errorf("Dial was asked %q, want %q twice", dials, want)
	}
	fail = true
	mu.Unlock()
	hits := o.hits.Load()
	if code, body, _ := httpGet(t, h, "http://127.0.0.1:"+o.port()+"/again"); code != 502 {
		t.Errorf("GET with a failing Dial: %d %q", code, body)
	}
	if o.hits.Load() != hits {
		t.Error("the origin was reached without Dial")
	}

	p, err := New(Config{Decider: dec, Token: testToken, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no")
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if r, ok := p.resolver.(*net.Resolver); !ok || r.Dial == nil || !r.PreferGo {
		t.Errorf("with Dial set, the default resolver is %#v: its queries would not go through Dial", p.resolver)
	}
}
