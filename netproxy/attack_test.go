package netproxy

import (
	"bufio"
	"bytes"
	"encoding/base64"
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

// Attacks on the proxy found in review; each is a regression test.

// uriOrigin records what an upstream HTTP server sees of each request.
type uriOrigin struct {
	ln   net.Listener
	srv  *http.Server
	mu   sync.Mutex
	uris []string // RequestURI as received
	host []string // r.Host as net/http derives it (absolute-form wins)
}

func newURIOrigin(t *testing.T) *uriOrigin {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &uriOrigin{ln: ln}
	o.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.uris = append(o.uris, r.RequestURI)
		o.host = append(o.host, r.Host)
		o.mu.Unlock()
		_, _ = io.WriteString(w, "ok")
	})}
	go o.srv.Serve(ln)
	t.Cleanup(func() { o.srv.Close() })
	return o
}

func (o *uriOrigin) port() string {
	_, p, _ := net.SplitHostPort(o.ln.Addr().String())
	return p
}

// doc.go: "what goes upstream is Host: <destination>, so a request cannot
// be decided for one host and routed to another". A path starting with
// "//" must stay an origin-form path upstream, never become an
// absolute-form target or an authority a Go origin reads as its Host
// (regression: passes; net/http sends "//evil.test/secret" as a path).
func TestAttackDoubleSlashPathReroutesUpstream(t *testing.T) {
	o := newURIOrigin(t)
	p := o.port()
	dec := newFakeDecider("allowed.test:" + p)
	h := newHarness(t, dec)
	h.res.add("allowed.test", "127.0.0.1")
	target := "allowed.test:" + p
	resp, body := h.raw("GET http://" + target + "//evil.test/secret HTTP/1.1\r\nHost: " + target +
		"\r\nProxy-Authorization: " + authHeader(testToken) + "\r\nConnection: close\r\n\r\n")
	if resp.StatusCode != 200 {
		return // refused: holds
	}
	_ = body
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.uris) != 1 {
		t.Fatalf("origin saw %v", o.uris)
	}
	if strings.Contains(o.uris[0], "://") || o.host[0] != target && o.host[0] != "allowed.test" {
		t.Fatalf("decided %s, but upstream received request-target %q (origin's Host: %q)", target, o.uris[0], o.host[0])
	}
}

// wsOrigin answers every request with a WebSocket 101 and then discards
// whatever the client sends.
func newWSOrigin(t *testing.T) (port string, got *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
				buf := make([]byte, 64<<10)
				for {
					n, err := br.Read(buf)
					got.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, got
}

// After a WebSocket upgrade on a plain-HTTP request, the relay hands
// every client byte to the Host tap too (clientConn.Read), whose parser
// keeps reading "requests" from the WebSocket stream. A stream with no
// newline is one request line that textproto accumulates without bound
// (and the tap records it a second time in tapReader.rec): the
// supervisor's heap grows with every byte the command sends over an
// allowed WebSocket, until sandboxd is OOM-killed.
func TestAttackWebsocketTapUnboundedMemory(t *testing.T) {
	port, got := newWSOrigin(t)
	target := "127.0.0.1:" + port
	dec := newFakeDecider(target)
	h := newHarness(t, dec)
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://%s/ws HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n", target, target, authHeader(testToken))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 {
		t.Fatalf("upgrade: %s", resp.Status)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	const total = 96 << 20
	chunk := bytes.Repeat([]byte("A"), 1<<20)
	for sent := 0; sent < total; sent += len(chunk) {
		if _, err := c.Write(chunk); err != nil {
			t.Fatalf("after %d MiB: %v", sent>>20, err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for got.Load() < total && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("origin received %d MiB", got.Load()>>20)
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap in use grew by %d MiB after relaying %d MiB over a WebSocket", growth>>20, total>>20)
	if growth > 32<<20 {
		t.Fatalf("supervisor heap grew by %d MiB while relaying %d MiB of one WebSocket: unbounded per-connection memory", growth>>20, total>>20)
	}
}

// Spellings that must never be decided as one destination and delivered
// to another, nor reach the decider malformed (regression: passes).
func TestAttackTargetSpellings(t *testing.T) {
	o := newOrigin(t)
	p := o.port()
	dec := newFakeDecider("allowed.test:" + p)
	h := newHarness(t, dec)
	h.res.add("allowed.test", "127.0.0.1")
	auth := "Proxy-Authorization: " + authHeader(testToken) + "\r\n"
	a := "allowed.test:" + p
	for name, req := range map[string]string{
		"at in path":          "GET http://evil.test:" + p + "/@allowed.test:" + p + "/ HTTP/1.1\r\nHost: evil.test:" + p + "\r\n",
		"backslash":           "GET http://evil.test:" + p + "\\@allowed.test:" + p + "/ HTTP/1.1\r\nHost: allowed.test:" + p + "\r\n",
		"backslash2":          "GET http://allowed.test:" + p + "\\@evil.test/ HTTP/1.1\r\nHost: allowed.test:" + p + "\r\n",
		"query at":            "GET http://evil.test:" + p + "?@allowed.test:" + p + "/ HTTP/1.1\r\nHost: allowed.test:" + p + "\r\n",
		"tab in uri":          "GET http://allowed.test:" + p + "\t/ HTTP/1.1\r\nHost: allowed.test:" + p + "\r\n",
		"zone":                "GET http://[fe80::1%25lo]:" + p + "/ HTTP/1.1\r\n",
		"http10 no host evil": "GET http://evil.test:" + p + "/ HTTP/1.0\r\n",
		"two hosts":           "GET http://" + a + "/ HTTP/1.1\r\nHost: " + a + "\r\nHost: evil.test:" + p + "\r\n",
		"host obs-fold":       "GET http://" + a + "/ HTTP/1.1\r\nHost: " + a + "\r\n evil.test\r\n",
		"host with userinfo":  "GET http://" + a + "/ HTTP/1.1\r\nHost: x@" + a + "\r\n",
		"connect ws":          "CONNECT evil.test:" + p + " HTTP/1.1\r\nHost: " + a + "\r\n",
		"connect v6 zone":     "CONNECT [fe80::1%lo]:" + p + " HTTP/1.1\r\n",
		"h2c prior knowledge": "PRI * HTTP/2.0\r\n\r\nSM\r\n",
		"absolute https port": "GET http://evil.test:" + p + ":" + p + "/ HTTP/1.1\r\n",
		"uppercase evil":      "GET HTTP://EVIL.TEST:" + p + "/ HTTP/1.1\r\n",
		"te chunked identity": "POST http://evil.test:" + p + "/ HTTP/1.1\r\nHost: evil.test:" + p + "\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n",
		"dup cl":              "POST http://evil.test:" + p + "/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n",
	} {
		req = strings.Replace(req, "\r\n", "\r\n"+auth, 1) + "\r\n"
		resp, body := h.raw(req)
		if resp.StatusCode == 200 {
			t.Errorf("%s: %s %q", name, resp.Status, body)
		}
	}
	if n := o.hits.Load(); n != 0 {
		t.Errorf("origin hit %d times", n)
	}
	for _, d := range func() []Request { d, _, _ := dec.calls(); return d }() {
		if d.Dest.String() == "allowed.test:"+p {
			continue
		}
		if d.Dest.Host != "evil.test" {
			t.Errorf("decider asked about %v", d.Dest)
		}
	}
}

// Pipelined in one write: an allowed request, then one for an unlisted
// origin. Each is decided; the second never reaches anything (passes).
func TestAttackPipelinedSecondDecided(t *testing.T) {
	allowed, unlisted := newOrigin(t), newOrigin(t)
	dec := newFakeDecider("127.0.0.1:" + allowed.port())
	h := newHarness(t, dec)
	a, u := "127.0.0.1:"+allowed.port(), "127.0.0.1:"+unlisted.port()
	auth := "Proxy-Authorization: " + authHeader(testToken) + "\r\n"
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET http://"+a+"/ HTTP/1.1\r\nHost: "+a+"\r\n"+auth+"\r\n"+
		"GET http://"+u+"/ HTTP/1.1\r\nHost: "+a+"\r\n"+auth+"\r\n"+
		"GET http://"+u+"/ HTTP/1.1\r\n"+auth+"\r\n")
	br := bufio.NewReader(c)
	for i := 0; i < 3; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			break
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if unlisted.hits.Load() != 0 || allowed.hits.Load() != 1 {
		t.Errorf("hits: allowed %d unlisted %d", allowed.hits.Load(), unlisted.hits.Load())
	}
}

// Proxy-Authorization variants: only the exact credential passes, and a
// refused one never reaches the decider (passes).
func TestAttackAuthVariants(t *testing.T) {
	o := newOrigin(t)
	target := "127.0.0.1:" + o.port()
	dec := newFakeDecider(target)
	h := newHarness(t, dec)
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for name, hdrs := range map[string]string{
		"none":           "",
		"other user":     "Proxy-Authorization: Basic " + b64("root:"+testToken) + "\r\n",
		"empty password": "Proxy-Authorization: Basic " + b64("sandboxd:") + "\r\n",
		"extra colon":    "Proxy-Authorization: Basic " + b64("sandboxd:"+testToken+":") + "\r\n",
		"prefix token":   "Proxy-Authorization: Basic " + b64("sandboxd:"+testToken[:len(testToken)-1]) + "\r\n",
		"token as user":  "Proxy-Authorization: Basic " + b64(testToken+":sandboxd") + "\r\n",
		"bearer":         "Proxy-Authorization: Bearer " + testToken + "\r\n",
		"two headers":    "Proxy-Authorization: Basic " + b64("x:y") + "\r\nProxy-Authorization: " + authHeader(testToken) + "\r\n",
		"comma joined":   "Proxy-Authorization: " + authHeader(testToken) + ", Basic " + b64("x:y") + "\r\n",
		"raw userinfo":   "Proxy-Authorization: Basic sandboxd:" + testToken + "\r\n",
		"nul suffix":     "Proxy-Authorization: Basic " + b64("sandboxd:"+testToken+"\x00") + "\r\n",
		"authorization":  "Authorization: " + authHeader(testToken) + "\r\n",
	} {
		resp, _ := h.raw("GET http://" + target + "/ HTTP/1.1\r\nHost: " + target + "\r\n" + hdrs + "\r\n")
		if resp.StatusCode != 407 {
			t.Errorf("%s: %s", name, resp.Status)
		}
		c, err := net.Dial("tcp", h.addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n"+hdrs+"\r\n")
		cr, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "CONNECT"})
		if err != nil || cr.StatusCode != 407 {
			t.Errorf("CONNECT %s: %v %v", name, cr, err)
		}
		c.Close()
	}
	for _, lower := range []string{"basic", "BASIC"} {
		resp, _ := h.raw("GET http://" + target + "/ HTTP/1.1\r\nHost: " + target + "\r\nProxy-Authorization: " + lower + " " + b64("sandboxd:"+testToken) + "\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Errorf("scheme %q: %s", lower, resp.Status)
		}
	}
	if n := o.hits.Load(); n != 2 {
		t.Errorf("origin hit %d times, want 2", n)
	}
	if d, _, _ := dec.calls(); len(d) > 1 {
		t.Errorf("decider asked %d times", len(d))
	}
}

// The plain-HTTP transport's permit is one dial: a redirect or a retry by
// the transport never dials again (regression: the dialer refuses).
func TestAttackPermitOneDial(t *testing.T) {
	p, err := New(Config{Decider: newFakeDecider(), Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.transportDial(t.Context(), "tcp", "127.0.0.1:1"); err == nil {
		t.Fatal("transport dialled without a permit")
	}
	if p.tr.Proxy != nil {
		t.Fatal("the transport would use an environment proxy")
	}
}
