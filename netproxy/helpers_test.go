package netproxy

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const testToken = "tok-run-1"

type harness struct {
	t      testing.TB
	p      *Proxy
	addr   string
	dec    *fakeDecider
	res    *fakeResolver
	cancel context.CancelFunc
	done   chan error
}

type harnessOpt func(*Config, *Dialer)

func newHarness(t testing.TB, dec *fakeDecider, opts ...harnessOpt) *harness {
	t.Helper()
	h := &harness{t: t, dec: dec, res: newFakeResolver(), done: make(chan error, 1)}
	cfg := Config{Decider: dec, Token: testToken, Resolver: h.res}
	var inside Dialer
	for _, o := range opts {
		o(&cfg, &inside)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.p, h.addr = p, ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- p.Serve(ctx, ln, inside) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Serve did not return")
		}
		_ = p.Close()
	})
	return h
}

func withLimits(l Limits) harnessOpt {
	return func(c *Config, _ *Dialer) { c.Limits = l }
}

func authHeader(token string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte("sandboxd:"+token))
}

// origin is an HTTP server that counts hits and records Host headers.
type origin struct {
	*httptest.Server
	hits  atomic.Int64
	mu    sync.Mutex // guards hosts, auth
	hosts []string
	auth  []string
}

func newOrigin(t *testing.T) *origin {
	o := &origin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.hits.Add(1)
		o.mu.Lock()
		o.hosts = append(o.hosts, r.Host)
		o.auth = append(o.auth, r.Header.Get("Proxy-Authorization"))
		o.mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Sandboxd-Decision", "spoofed")
		_, _ = io.WriteString(w, "hello from origin; got "+strconv.Itoa(len(body))+" bytes")
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *origin) port() string {
	_, port, _ := net.SplitHostPort(o.Listener.Addr().String())
	return port
}

// echoServer echoes every connection until EOF; it counts connections.
type echoServer struct {
	ln    net.Listener
	conns atomic.Int64
	wg    sync.WaitGroup
}

func newEcho(t testing.TB) *echoServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.conns.Add(1)
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return e
}

func (e *echoServer) port() string {
	_, port, _ := net.SplitHostPort(e.ln.Addr().String())
	return port
}

// raw sends one raw request on a new connection and reads the response.
func (h *harness) raw(req string) (*http.Response, string) {
	h.t.Helper()
	c, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
	if err != nil {
		h.t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		h.t.Fatal(err)
	}
	return readResp(h.t, bufio.NewReader(c))
}

func readResp(t testing.TB, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp, string(b)
}

// connect opens a tunnel to target through the proxy.
func (h *harness) connect(target string) (net.Conn, *bufio.Reader, error) {
	c, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	_, err = io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+
		"\r\nProxy-Authorization: "+authHeader(testToken)+"\r\n\r\n")
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		c.Close()
		return nil, nil, &statusErr{resp.StatusCode, string(b)}
	}
	return c, br, nil
}

type statusErr struct {
	code int
	body string
}

func (e *statusErr) Error() string { return strconv.Itoa(e.code) + ": " + e.body }

func statusOf(err error) int {
	var se *statusErr
	if errors.As(err, &se) {
		return se.code
	}
	return 0
}

// client is an http.Client that uses the proxy with the run's token.
func (h *harness) client(token string) *http.Client {
	u := &url.URL{Scheme: "http", Host: h.addr, User: url.UserPassword("sandboxd", token)}
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}, Timeout: 10 * time.Second}
}

func httpGet(t *testing.T, h *harness, target string) (int, string, http.Header) {
	t.Helper()
	resp, err := h.client(testToken).Get(target)
	if err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// acceptEach serves a loopback listener of its own, calling handle for
// each connection in a goroutine of its own, and returns its address;
// the listener closes when the test ends.
func acceptEach(t testing.TB, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return ln.Addr().String()
}
