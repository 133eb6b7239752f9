package netproxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Attacks on the rewritten handler (forward.go); each passing test is a
// regression, each failing one a bug.

// scriptOrigin is a raw TCP origin: for every connection it reads one
// request head (recording it) and runs fn.
type scriptOrigin struct {
	ln    net.Listener
	conns atomic.Int64
	mu    sync.Mutex
	reqs  []*http.Request

	wg sync.WaitGroup
}

func newScriptOrigin(t testing.TB, fn func(c net.Conn, br *bufio.Reader, req *http.Request)) *scriptOrigin {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &scriptOrigin{ln: ln}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			o.conns.Add(1)
			o.wg.Add(1)
			go func() {
				defer o.wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(20 * time.Second))
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				o.mu.Lock()
				o.reqs = append(o.reqs, req)
				o.mu.Unlock()
				fn(c, br, req)
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return o
}

func (o *scriptOrigin) target() string { return o.ln.Addr().String() }

func (o *scriptOrigin) requests() []*http.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*http.Request(nil), o.reqs...)
}

// fixedResponse answers every request with raw and closes.
func fixedResponse(raw string) func(net.Conn, *bufio.Reader, *http.Request) {
	return func(c net.Conn, _ *bufio.Reader, _ *http.Request) {
		_, _ = io.WriteString(c, raw)
	}
}

func proxyGet(target, path string, extra string) string {
	return "GET http://" + target + path + " HTTP/1.1\r\nHost: " + target + "\r\nProxy-Authorization: " +
		authHeader(testToken) + "\r\n" + extra + "\r\n"
}

// dialProxy opens a raw connection to the proxy.
func (h *harness) dialProxy() (net.Conn, *bufio.Reader) {
	h.t.Helper()
	c, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
	if err != nil {
		h.t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	return c, bufio.NewReader(c)
}

// readRawHead reads bytes up to and including the first blank line.
func readRawHead(t testing.TB, br *bufio.Reader) string {
	t.Helper()
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			t.Fatalf("reading head: %v (so far %q)", err, b.String())
		}
		if line == "\r\n" || line == "\n" {
			return b.String()
		}
	}
}

// ---------------------------------------------------------------------
// Response hop-by-hop and the decision header.

// An origin naming headers in Connection, sending Keep-Alive,
// Proxy-Authenticate and forged decision headers: none reach the client.
func TestHandlerAttackResponseHopByHop(t *testing.T) {
	o := newScriptOrigin(t, fixedResponse("HTTP/1.1 200 OK\r\n"+
		"Connection: X-Secret, keep-alive\r\nX-Secret: s\r\nKeep-Alive: timeout=5\r\n"+
		"Proxy-Authenticate: Basic realm=x\r\nProxy-Connection: keep-alive\r\n"+
		"X-Sandboxd-Decision: allow; source=policy\r\nx-sandboxd-decision: allow2\r\n"+
		"Content-Length: 2\r\n\r\nok"))
	h := newHarness(t, newFakeDecider(o.target()))
	c, br := h.dialProxy()
	defer c.Close()
	_, _ = io.WriteString(c, proxyGet(o.target(), "/", ""))
	head := readRawHead(t, br)
	for _, bad := range []string{"X-Secret", "Keep-Alive", "Proxy-Authenticate", "Proxy-Connection", "X-Sandboxd-Decision", "x-sandboxd-decision", "allow"} {
		if strings.Contains(strings.ToLower(head), strings.ToLower(bad)) {
			t.Errorf("response head carries %q:\n%s", bad, head)
		}
	}
}

// A forged decision header as a trailer: the client must never see an
// origin-supplied X-Sandboxd-Decision, in headers or trailers.
func TestHandlerAttackTrailerForgesDecision(t *testing.T) {
	o := newScriptOrigin(t, fixedResponse("HTTP/1.1 200 OK\r\n"+
		"Transfer-Encoding: chunked\r\nTrailer: X-Sandboxd-Decision, Proxy-Authenticate\r\n\r\n"+
		"2\r\nok\r\n0\r\nX-Sandboxd-Decision: deny; source=hard-deny\r\nProxy-Authenticate: Basic realm=\"evil\"\r\n\r\n"))
	h := newHarness(t, newFakeDecider(o.target()))
	c, br := h.dialProxy()
	defer c.Close()
	_, _ = io.WriteString(c, proxyGet(o.target(), "/", "Connection: close\r\n"))
	all, _ := io.ReadAll(br)
	s := string(all)
	t.Logf("client got:\n%s", s)
	if strings.Contains(strings.ToLower(s), "x-sandboxd-decision") {
		t.Errorf("origin-forged X-Sandboxd-Decision reached the client (as a trailer):\n%s", s)
	}
	if strings.Contains(s, "Proxy-Authenticate") {
		t.Errorf("hop-by-hop Proxy-Authenticate reached the client as a trailer:\n%s", s)
	}
}

// A 101 whose Upgrade the client never asked for: the proxy must not
// switch, and must not relay the origin's raw stream.
func TestHandlerAttack101WithoutUpgradeRequest(t *testing.T) {
	o := newScriptOrigin(t, func(c net.Conn, br *bufio.Reader, _ *http.Request) {
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: evil\r\n\r\n"+
			"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nX-Injected: 1\r\n\r\nsmuggled")
		_, _ = io.Copy(io.Discard, br)
	})
	h := newHarness(t, newFakeDecider(o.target()))
	c, br := h.dialProxy()
	defer c.Close()
	_, _ = io.WriteString(c, proxyGet(o.target(), "/", ""))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("status %s header %v", resp.Status, resp.Header)
	if resp.StatusCode == 101 {
		t.Errorf("proxy forwarded a 101 to a client that did not ask to upgrade")
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	rest, _ := io.ReadAll(br)
	if bytes.Contains(rest, []byte("smuggled")) || bytes.Contains(rest, []byte("X-Injected")) {
		t.Errorf("origin's post-101 bytes reached the client: %q", rest)
	}
}

// The 101 the client gets for a real upgrade carries no hop-by-hop
// junk the origin chose (Proxy-*, headers named in Connection) and is
// not turned into "Connection: close".
func TestHandlerAttackUpgrade101Head(t *testing.T) {
	o := newScriptOrigin(t, func(c net.Conn, br *bufio.Reader, _ *http.Request) {
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade, X-Secret\r\nUpgrade: websocket\r\n"+
			"X-Secret: s\r\nProxy-Authenticate: Basic realm=evil\r\nX-Sandboxd-Decision: allow\r\n\r\n")
		_, _ = io.Copy(c, br)
	})
	h := newHarness(t, newFakeDecider(o.target()))
	c, br := h.dialProxy()
	defer c.Close()
	_, _ = io.WriteString(c, proxyGet(o.target(), "/ws", "Connection: Upgrade\r\nUpgrade: websocket\r\n"))
	head := readRawHead(t, br)
	t.Logf("101 head:\n%s", head)
	if !strings.HasPrefix(head, "HTTP/1.1 101") {
		t.Fatalf("not a 101: %q", head)
	}
	for _, bad := range []string{"X-Sandboxd-Decision", "Proxy-Authenticate", "X-Secret:", "close"} {
		if strings.Contains(head, bad) {
			t.Errorf("101 head carries %q", bad)
		}
	}
	_, _ = io.WriteString(c, "ping")
	got := make([]byte, 4)
	if _, err := io.ReadFull(br, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo over upgrade: %q %v", got, err)
	}
}

// Bytes the client sends in the same write as an upgrade request reach
// the origin exactly once, in order, ahead of later bytes.
func TestHandlerAttackUpgradeEarlyBytesOnce(t *testing.T) {
	got := make(chan []byte, 1)
	o := newScriptOrigin(t, func(c net.Conn, br *bufio.Reader, _ *http.Request) {
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		b, _ := io.ReadAll(br)
		got <- b
	})
	h := newHarness(t, newFakeDecider(o.target()))
	c, br := h.dialProxy()
	defer c.Close()
	early := strings.Repeat("0123456789abcdef", 600) // 9600 bytes: > the server's 4 KiB buffer
	_, _ = io.WriteString(c, proxyGet(o.target(), "/ws", "Connection: Upgrade\r\nUpgrade: websocket\r\n")+early)
	head := readRawHead(t, br)
	if !strings.HasPrefix(head, "HTTP/1.1 101") {
		t.Fatalf("not a 101: %q", head)
	}
	_, _ = io.WriteString(c, "LATE")
	_ = c.(*net.TCPConn).CloseWrite()
	select {
	case b := <-got:
		if string(b) != early+"LATE" {
			t.Fatalf("origin got %d bytes (want %d); prefix %q", len(b), len(early)+4, b[:min(len(b), 40)])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("origin never saw the client's FIN (half-close over an upgrade)")
	}
}

// Bytes over an upgraded connection are counted like tunnel bytes.
func TestHandlerAttackUpgradeBytesCounted(t *testing.T) {
	o := newScriptOrigin(t, func(c net.Conn, br *bufio.Reader, _ *http.Request) {
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		_, _ = io.Copy(c, br)
	})
	h := newHarness(t, newFakeDecider(o.target()))
	c, br := h.dialProxy()
	defer c.Close()
	_, _ = io.WriteString(c, proxyGet(o.target(), "/ws", "Connection: Upgrade\r\nUpgrade: websocket\r\n"))
	readRawHead(t, br)
	msg := strings.Repeat("x", 100000)
	go io.WriteString(c, msg)
	if _, err := io.ReadFull(br, make([]byte, len(msg))); err != nil {
		t.Fatal(err)
	}
	// Each direction adds to its counter after its write returns, so the
	// echo can reach the client before the upward copy has counted its
	// last chunk: the counters must catch up, not be there already.
	deadline := time.Now().Add(5 * time.Second)
	for {
		cn := h.p.Counters()
		if cn.BytesUp == int64(len(msg)) && cn.BytesDown == int64(len(msg)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("relayed %d bytes each way over a WebSocket; counters up=%d down=%d", len(msg), cn.BytesUp, cn.BytesDown)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An upgraded connection with no bytes either way is closed after
// TunnelIdle, like a CONNECT tunnel.
func TestHandlerAttackUpgradeIdle(t *testing.T) {
	o := newScriptOrigin(t, func(c net.Conn, br *bufio.Reader, _ *http.Request) {
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		_, _ = io.Copy(c, br)
	})
	h := newHarness(t, newFakeDecider(o.target()), withLimits(Limits{TunnelIdle: 200 * time.Millisecond}))
	c, br := h.dialProxy()
	defer c.Close()
	_, _ = io.WriteString(c, proxyGet(o.target(), "/ws", "Connection: Upgrade\r\nUpgrade: websocket\r\n"))
	readRawHead(t, br)
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err := br.ReadByte()
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Errorf("idle upgraded connection still open after 3s with TunnelIdle=200ms")
	}
}

// ---------------------------------------------------------------------
// Framing of forwarded responses.

// A chunked body the origin cuts short must not reach the client as a
// complete body (terminating chunk written by the proxy).
func TestHandlerAttackTruncatedChunkedBody(t *testing.T) {
	o := newScriptOrigin(t, fixedResponse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"5\r\nhello\r\n10\r\nonly-part"))
	h := newHarness(t, newFakeDecider(o.target()))
	c, br := h.dialProxy()
	defer c.Close()
	_, _ = io.WriteString(c, proxyGet(o.target(), "/", ""))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("origin cut its chunked body short, client got a clean end of body: %q", b)
	}
}

// Same with an unknown-length (close-delimited) body from an HTTP/1.0
// style origin: the client must see an error or a close, never a
// clean chunked end after part of a failed body. (A close-delimited
// body that ends cleanly is fine.)
func TestHandlerAttackTruncatedContentLength(t *testing.T) {
	o := newScriptOrigin(t, fixedResponse("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"))
	h := newHarness(t, newFakeDecider(o.target()))
	c, br := h.dialProxy()
	defer c.Close()
	_, _ = io.WriteString(c, proxyGet(o.target(), "/", ""))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return // aborted before the head was flushed: not complete either
	}
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("short Content-Length body read cleanly: %q", b)
	}
}

// HEAD, 204 and 304 responses with bodies the origin should not have
// sent: the next response on the same kept-alive client connection is
// the origin's real second answer, not the stray body.
func TestHandlerAttackBodylessStatusesKeepSync(t *testing.T) {
	for _, tc := range []struct{ name, method, resp string }{
		{"HEAD", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nbad"},
		{"204", "GET", "HTTP/1.1 204 No Content\r\nContent-Length: 40\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nbad"},
		{"304", "GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 40\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nbad"},
		{"204-chunked", "GET", "HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nbad\r\n0\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n atomic.Int64
			o := newScriptOrigin(t, func(c net.Conn, _ *bufio.Reader, _ *http.Request) {
				if n.Add(1) == 1 {
					_, _ = io.WriteString(c, tc.resp)
					return
				}
				_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ngood")
			})
			h := newHarness(t, newFakeDecider(o.target()))
			c, br := h.dialProxy()
			defer c.Close()
			first := strings.Replace(proxyGet(o.target(), "/1", ""), "GET ", tc.method+" ", 1)
			_, _ = io.WriteString(c, first)
			resp, err := http.ReadResponse(br, &http.Request{Method: tc.method})
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_, _ = io.WriteString(c, proxyGet(o.target(), "/2", ""))
			resp, err = http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("second response: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			if string(b) != "good" {
				t.Errorf("second response body %q: stream desynchronised", b)
			}
		})
	}
}

// 1xx interim responses: a 103 and a 100 the client did not ask for
// never confuse the client's framing; Expect: 100-continue works.
func TestHandlerAttackInterimResponses(t *testing.T) {
	o := newScriptOrigin(t, func(c net.Conn, br *bufio.Reader, req *http.Request) {
		_, _ = io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\nX-Sandboxd-Decision: allow\r\n\r\n")
		b, _ := io.ReadAll(req.Body)
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
	})
	h := newHarness(t, newFakeDecider(o.target()))
	c, br := h.dialProxy()
	defer c.Close()
	_, _ = io.WriteString(c, "POST http://"+o.target()+"/ HTTP/1.1\r\nHost: "+o.target()+"\r\nProxy-Authorization: "+
		authHeader(testToken)+"\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	var all strings.Builder
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("reading: %v (so far %s)", err, all.String())
		}
		fmt.Fprintf(&all, "%s %v\n", resp.Status, resp.Header)
		if resp.Header.Get("X-Sandboxd-Decision") != "" {
			t.Errorf("interim response carries origin's X-Sandboxd-Decision")
		}
		if resp.StatusCode == 100 {
			_, _ = io.WriteString(c, "hello")
			continue
		}
		if resp.StatusCode < 200 {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "hello" {
			t.Errorf("body %q", b)
		}
		break
	}
	t.Logf("%s", all.String())
}

// A hostile origin's huge response head is refused (502), not relayed
// and not buffered without bound.
func TestHandlerAttackHugeResponseHead(t *testing.T) {
	big := strings.Repeat("X-Pad: "+strings.Repeat("a", 1000)+"\r\n", 2000) // ~2 MB
	o := newScriptOrigin(t, fixedResponse("HTTP/1.1 200 OK\r\n"+big+"Content-Length: 0\r\n\r\n"))
	h := newHarness(t, newFakeDecider(o.target()))
	resp, _ := h.raw(proxyGet(o.target(), "/", ""))
	if resp.StatusCode != 502 {
		t.Errorf("huge response head: %s", resp.Status)
	}
	// And many 1xx heads (each small) count toward the same limit.
	many := strings.Repeat("HTTP/1.1 103 Early Hints\r\n"+strings.Repeat("Link: </"+strings.Repeat("b", 500)+">\r\n", 20)+"\r\n", 500)
	o2 := newScriptOrigin(t, fixedResponse(many+"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	h.dec.set(func(d *fakeDecider) { d.allow[o2.target()] = true })
	resp, _ = h.raw(proxyGet(o2.target(), "/", ""))
	if resp.StatusCode != 502 {
		t.Errorf("5 MB of 103s: %s", resp.Status)
	}
}

// ---------------------------------------------------------------------
// CONNECT early bytes.

// > 4 KiB of tunnel bytes in the same write as the CONNECT head, while
// the decision is parked: after an allow they arrive once, in order.
func TestHandlerAttackConnectBigEarlyBytes(t *testing.T) {
	got := make(chan []byte, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		got <- b
	}()
	target := ln.Addr().String()
	dec := newFakeDecider(target)
	block := make(chan struct{})
	dec.set(func(d *fakeDecider) { d.block = block })
	h := newHarness(t, dec)
	c, br := h.dialProxy()
	defer c.Close()
	var early bytes.Buffer
	for i := 0; early.Len() < 200<<10; i++ {
		fmt.Fprintf(&early, "%08d|", i)
	}
	go func() {
		_, _ = io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: "+authHeader(testToken)+"\r\n\r\n")
		_, _ = c.Write(early.Bytes())
	}()
	time.Sleep(300 * time.Millisecond)
	close(block)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	select {
	case b := <-got:
		if !bytes.Equal(b, early.Bytes()) {
			t.Fatalf("origin got %d bytes, want %d (first diff at %d)", len(b), early.Len(), firstDiff(b, early.Bytes()))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("origin never got the client's FIN")
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// Early bytes of a CONNECT that is then denied never reach anything,
// and the connection is closed (not parsed as HTTP).
func TestHandlerAttackConnectEarlyBytesDenied(t *testing.T) {
	var hits atomic.Int64
	denied := acceptEach(t, func(c net.Conn) {
		hits.Add(1)
		c.Close()
	})
	o := newOrigin(t)
	allowed := "127.0.0.1:" + o.port()
	dec := newFakeDecider(allowed) // ln's target is not allowed
	h := newHarness(t, dec)
	c, br := h.dialProxy()
	defer c.Close()
	target := denied
	smuggle := proxyGet(allowed, "/smuggled", "")
	_, _ = io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: "+authHeader(testToken)+"\r\n\r\n"+smuggle)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 403 {
		t.Fatalf("CONNECT to unlisted: %s", resp.Status)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	rest, _ := io.ReadAll(br)
	if len(rest) > 0 {
		t.Errorf("after a refused CONNECT the proxy answered the early bytes: %q", rest)
	}
	if hits.Load() != 0 || o.hits.Load() != 0 {
		t.Errorf("refused CONNECT's early bytes reached an origin (denied %d, allowed %d)", hits.Load(), o.hits.Load())
	}
}

// ---------------------------------------------------------------------
// Half-close and teardown.

func halfCloseOrigin(t *testing.T, originFirst bool) string {
	return acceptEach(t, func(c net.Conn) {
		defer c.Close()
		tc := c.(*net.TCPConn)
		if originFirst {
			_, _ = io.WriteString(tc, "bye")
			_ = tc.CloseWrite()
			b, _ := io.ReadAll(tc) // the client keeps talking after our FIN
			_, _ = tc.Write(b)     // fails (write side shut): the client sees nothing
			return
		}
		b, _ := io.ReadAll(tc) // until the client's FIN
		_, _ = tc.Write([]byte(fmt.Sprintf("got %d", len(b))))
	})
}

func TestHandlerAttackHalfClose(t *testing.T) {
	for _, originFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("originFirst=%v", originFirst), func(t *testing.T) {
			target := halfCloseOrigin(t, originFirst)
			h := newHarness(t, newFakeDecider(target), withLimits(Limits{TunnelIdle: time.Minute}))
			c, br, err := h.connect(target)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if originFirst {
				b := make([]byte, 3)
				if _, err := io.ReadFull(br, b); err != nil || string(b) != "bye" {
					t.Fatalf("%q %v", b, err)
				}
				if _, err := br.ReadByte(); err != io.EOF {
					t.Fatalf("after origin's FIN: %v", err)
				}
				// We can still send; then our FIN ends the tunnel.
				_, _ = io.WriteString(c, "more")
				_ = c.(*net.TCPConn).CloseWrite()
			} else {
				_, _ = io.WriteString(c, "12345")
				_ = c.(*net.TCPConn).CloseWrite()
				b, err := io.ReadAll(br)
				if err != nil || string(b) != "got 5" {
					t.Fatalf("%q %v", b, err)
				}
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("half-close took %v", d)
			}
		})
	}
}

// After Serve ends, no goroutine of an upgrade relay or a tunnel with a
// client that never reads remains.
func TestHandlerAttackNoLeakAfterServe(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		ws := newScriptOrigin(t, func(c net.Conn, br *bufio.Reader, _ *http.Request) {
			_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
			_, _ = io.Copy(c, br)
		})
		flood := newScriptOrigin(t, func(c net.Conn, br *bufio.Reader, _ *http.Request) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
			buf := make([]byte, 64<<10)
			for {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		})
		e := newEcho(t)
		dec := newFakeDecider(ws.target(), flood.target(), "127.0.0.1:"+e.port())
		p, err := New(Config{Decider: dec, Token: testToken, Resolver: newFakeResolver()})
		if err != nil {
			t.Fatal(err)
		}
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		done := make(chan error, 1)
		go func() { done <- p.Serve(context.Background(), ln, nil) }()
		h := &harness{t: t, p: p, addr: ln.Addr().String(), dec: dec}
		var open []net.Conn
		c1, br1 := h.dialProxy()
		_, _ = io.WriteString(c1, proxyGet(ws.target(), "/ws", "Connection: Upgrade\r\nUpgrade: websocket\r\n"))
		readRawHead(t, br1)
		c2, _ := h.dialProxy()
		_, _ = io.WriteString(c2, proxyGet(flood.target(), "/", "")) // never read
		c3, _, err := h.connect("127.0.0.1:" + e.port())
		if err != nil {
			t.Fatal(err)
		}
		go func() { // never reads the echo
			buf := make([]byte, 64<<10)
			for {
				if _, err := c3.Write(buf); err != nil {
					return
				}
			}
		}()
		open = append(open, c1, c2, c3)
		time.Sleep(300 * time.Millisecond)
		_ = p.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Serve did not return")
		}
		for _, c := range open {
			c.Close()
		}
		ws.ln.Close()
		flood.ln.Close()
		e.ln.Close()
		ws.wg.Wait()
		flood.wg.Wait()
		e.wg.Wait()
	}()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d before, %d after\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// ---------------------------------------------------------------------
// More of the upgrade path.

// Over an upgrade the client's FIN is a half-close: what the origin
// sends after it still reaches the client (as in a CONNECT tunnel).
func TestHandlerAttackUpgradeHalfClose(t *testing.T) {
	o := newScriptOrigin(t, func(c net.Conn, br *bufio.Reader, _ *http.Request) {
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		b, _ := io.ReadAll(br)
		time.Sleep(50 * time.Millisecond)
		fmt.Fprintf(c, "got %d", len(b))
	})
	h := newHarness(t, newFakeDecider(o.target()))
	c, br := h.dialProxy()
	defer c.Close()
	_, _ = io.WriteString(c, proxyGet(o.target(), "/ws", "Connection: Upgrade\r\nUpgrade: websocket\r\n"))
	readRawHead(t, br)
	_, _ = io.WriteString(c, "12345")
	_ = c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(br)
	if string(b) != "got 5" {
		t.Errorf("after the client's FIN over an upgrade the origin's reply was lost: %q %v", b, err)
	}
}

// What the origin sends in the same write as its 101 reaches the
// client once, right after the 101.
func TestHandlerAttackUpgradeOriginEarlyBytes(t *testing.T) {
	o := newScriptOrigin(t, func(c net.Conn, br *bufio.Reader, _ *http.Request) {
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nHELLO")
		_, _ = io.Copy(io.Discard, br)
	})
	h := newHarness(t, newFakeDecider(o.target()))
	c, br := h.dialProxy()
	defer c.Close()
	_, _ = io.WriteString(c, proxyGet(o.target(), "/ws", "Connection: Upgrade\r\nUpgrade: websocket\r\n"))
	readRawHead(t, br)
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	b, _ := io.ReadAll(br)
	if string(b) != "HELLO" {
		t.Errorf("origin's early bytes: %q", b)
	}
}

// A kept-alive connection: an allowed request, then an upgrade request
// to an unlisted host. The second is decided (denied), never reaches
// anything.
func TestHandlerAttackUpgradeUnlistedAfterAllowed(t *testing.T) {
	ok := newOrigin(t)
	var evilHits atomic.Int64
	evil := newScriptOrigin(t, func(c net.Conn, br *bufio.Reader, _ *http.Request) {
		evilHits.Add(1)
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		_, _ = io.Copy(c, br)
	})
	allowed := "127.0.0.1:" + ok.port()
	h := newHarness(t, newFakeDecider(allowed))
	c, br := h.dialProxy()
	defer c.Close()
	_, _ = io.WriteString(c, proxyGet(allowed, "/", ""))
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("allowed: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_, _ = io.WriteString(c, proxyGet(evil.target(), "/ws", "Connection: Upgrade\r\nUpgrade: websocket\r\n"))
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 403 || evilHits.Load() != 0 {
		t.Errorf("upgrade to an unlisted host after an allowed one: %s, origin hits %d", resp.Status, evilHits.Load())
	}
}

// An upgrade the origin declines (200, no switch): what the client
// sends next on the connection, WebSocket bytes shaped as a request to
// an unlisted host, is refused and never forwarded.
func TestHandlerAttackUpgradeDeclinedThenSmuggle(t *testing.T) {
	decl := newScriptOrigin(t, fixedResponse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno"))
	var evilHits atomic.Int64
	evil := newScriptOrigin(t, func(c net.Conn, _ *bufio.Reader, _ *http.Request) {
		evilHits.Add(1)
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil")
	})
	h := newHarness(t, newFakeDecider(decl.target(), evil.target()))
	c, br := h.dialProxy()
	defer c.Close()
	// Pipelined: the upgrade, then (as if WebSocket data) another request.
	_, _ = io.WriteString(c, proxyGet(decl.target(), "/ws", "Connection: Upgrade\r\nUpgrade: websocket\r\n")+
		proxyGet(evil.target(), "/x", ""))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp, err = http.ReadResponse(br, nil)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		t.Logf("second: %s %q", resp.Status, b)
		if resp.StatusCode == 200 {
			t.Errorf("a request pipelined after a declined upgrade was forwarded")
		}
	}
	if evilHits.Load() != 0 {
		t.Errorf("forwarded to the second origin")
	}
}

// ---------------------------------------------------------------------
// Backpressure: a client that never reads keeps the proxy's memory
// bounded, on plain HTTP and in tunnels.
func TestHandlerAttackSlowReaderMemory(t *testing.T) {
	var sent atomic.Int64
	flood := newScriptOrigin(t, func(c net.Conn, _ *bufio.Reader, _ *http.Request) {
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Write(buf)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	tunnelFlood := acceptEach(t, func(c net.Conn) {
		defer c.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Write(buf)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	h := newHarness(t, newFakeDecider(flood.target(), tunnelFlood))
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var conns []net.Conn
	for range 8 {
		c, _ := h.dialProxy()
		_, _ = io.WriteString(c, proxyGet(flood.target(), "/", ""))
		conns = append(conns, c)
		tc, _, err := h.connect(tunnelFlood)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, tc)
	}
	time.Sleep(1500 * time.Millisecond)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	for _, c := range conns {
		c.Close()
	}
	growth := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("origins sent %d MiB; heap grew %d MiB", sent.Load()>>20, growth>>20)
	if growth > 64<<20 {
		t.Errorf("16 never-reading clients grew the heap by %d MiB", growth>>20)
	}
}

// ---------------------------------------------------------------------
// A bare 101 to a client that did not ask: what follows on the client
// connection is still HTTP, each request decided.
func TestHandlerAttack101WithoutUpgradeThenRequest(t *testing.T) {
	o := newScriptOrigin(t, fixedResponse("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: evil\r\n\r\n"))
	var evilHits atomic.Int64
	evil := newScriptOrigin(t, func(c net.Conn, _ *bufio.Reader, _ *http.Request) {
		evilHits.Add(1)
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil")
	})
	h := newHarness(t, newFakeDecider(o.target()))
	c, br := h.dialProxy()
	defer c.Close()
	_, _ = io.WriteString(c, proxyGet(o.target(), "/", ""))
	readRawHead(t, br)
	_, _ = io.WriteString(c, proxyGet(evil.target(), "/", ""))
	resp, err := http.ReadResponse(br, nil)
	if err == nil {
		t.Logf("after the bare 101: %s", resp.Status)
	}
	if evilHits.Load() != 0 {
		t.Errorf("undecided request forwarded after a bare 101")
	}
}

// A client that sends CONNECT, its request and its FIN in one go (as
// `printf ... | nc -N` does) while the decision is pending: the FIN is
// a half-close, not a hang-up; after the allow the bytes go through and
// the answer comes back.
func TestHandlerAttackConnectFINWhileParked(t *testing.T) {
	for _, parked := range []bool{false, true} {
		t.Run(fmt.Sprintf("parked=%v", parked), func(t *testing.T) {
			target := halfCloseOrigin(t, false)
			dec := newFakeDecider(target)
			var block chan struct{}
			if parked {
				block = make(chan struct{})
				dec.set(func(d *fakeDecider) { d.block = block })
			}
			h := newHarness(t, dec)
			c, br := h.dialProxy()
			defer c.Close()
			_, _ = io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: "+authHeader(testToken)+"\r\n\r\n12345")
			_ = c.(*net.TCPConn).CloseWrite()
			if parked {
				time.Sleep(200 * time.Millisecond)
				close(block)
			}
			resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("CONNECT then FIN: %s %q (counters %v)", resp.Status, b, h.p.Counters().Connections)
			}
			b, _ := io.ReadAll(br)
			if string(b) != "got 5" {
				t.Errorf("reply %q", b)
			}
		})
	}
}

// Same for a plain-HTTP request followed by the client's FIN.
func TestHandlerAttackHTTPFINWhileParked(t *testing.T) {
	o := newOrigin(t)
	target := "127.0.0.1:" + o.port()
	dec := newFakeDecider(target)
	block := make(chan struct{})
	dec.set(func(d *fakeDecider) { d.block = block })
	h := newHarness(t, dec)
	c, br := h.dialProxy()
	defer c.Close()
	_, _ = io.WriteString(c, proxyGet(target, "/", "Connection: close\r\n"))
	_ = c.(*net.TCPConn).CloseWrite()
	time.Sleep(200 * time.Millisecond)
	close(block)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Errorf("GET then FIN while parked: %s %q", resp.Status, b)
	}
}

// What the client sends that is hop-by-hop never reaches the origin;
// an upgrade keeps only Connection: Upgrade and Upgrade.
func TestHandlerAttackRequestHopByHop(t *testing.T) {
	o := newScriptOrigin(t, fixedResponse("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	h := newHarness(t, newFakeDecider(o.target()))
	hdrs := "Connection: X-Secret, keep-alive\r\nX-Secret: s\r\nKeep-Alive: 300\r\nTE: trailers\r\n" +
		"Proxy-Connection: keep-alive\r\nProxy-Foo: bar\r\nUpgrade: h2c\r\n"
	resp, _ := h.raw(proxyGet(o.target(), "/", hdrs))
	if resp.StatusCode != 200 {
		t.Fatalf("%s", resp.Status)
	}
	got := o.requests()[0].Header
	if v := got.Values("Connection"); len(v) > 1 || len(v) == 1 && v[0] != "close" { // the transport's own
		t.Errorf("origin got Connection: %v", v)
	}
	for _, k := range []string{"X-Secret", "Keep-Alive", "Te", "Proxy-Connection", "Proxy-Foo", "Proxy-Authorization", "Upgrade"} {
		if v, ok := got[k]; ok {
			t.Errorf("origin got %s: %v", k, v)
		}
	}
}

// Tunnel bytes, early bytes included, are counted exactly once each way.
func TestHandlerAttackTunnelCountsOnce(t *testing.T) {
	e := newEcho(t)
	target := "127.0.0.1:" + e.port()
	dec := newFakeDecider(target)
	block := make(chan struct{})
	dec.set(func(d *fakeDecider) { d.block = block })
	h := newHarness(t, dec)
	c, br := h.dialProxy()
	defer c.Close()
	early := strings.Repeat("e", 3000)
	_, _ = io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: "+authHeader(testToken)+"\r\n\r\n"+early)
	time.Sleep(100 * time.Millisecond)
	close(block)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(resp, err)
	}
	late := strings.Repeat("l", 50000)
	go io.WriteString(c, late)
	if _, err := io.ReadFull(br, make([]byte, len(early)+len(late))); err != nil {
		t.Fatal(err)
	}
	want := int64(len(early) + len(late))
	eventually(t, "counters", func() bool { cn := h.p.Counters(); return cn.BytesUp >= want && cn.BytesDown >= want })
	time.Sleep(50 * time.Millisecond)
	if cn := h.p.Counters(); cn.BytesUp != want || cn.BytesDown != want {
		t.Errorf("relayed %d each way; counted up=%d down=%d", want, cn.BytesUp, cn.BytesDown)
	}
}

// The handler called without a proxy connection (no clientConn in the
// context, no Hijacker) refuses; it never panics.
func TestHandlerAttackNoConnNoPanic(t *testing.T) {
	p, err := New(Config{Decider: newFakeDecider("127.0.0.1:1"), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, req := range []string{
		"CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\nProxy-Authorization: " + authHeader(testToken) + "\r\n\r\n",
		"GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: 127.0.0.1:1\r\nProxy-Authorization: " + authHeader(testToken) + "\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(req)))
		if err != nil {
			t.Fatal(err)
		}
		w := &recorder{h: http.Header{}}
		p.ServeHTTP(w, r)
		if w.code != 400 && w.code != 407 {
			t.Errorf("%q: %d", req[:20], w.code)
		}
	}
}

type recorder struct {
	h    http.Header
	code int
	b    bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) WriteHeader(c int)           { r.code = c }
func (r *recorder) Write(b []byte) (int, error) { return r.b.Write(b) }
