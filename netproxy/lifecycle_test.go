package netproxy

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCloseEndsTunnels(t *testing.T) {
	for _, how := range []string{"close", "cancel"} {
		t.Run(how, func(t *testing.T) {
			e := newEcho(t)
			dec := newFakeDecider("127.0.0.1:" + e.port())
			h := newHarness(t, dec)
			c, br, err := h.connect("127.0.0.1:" + e.port())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if how == "close" {
				_ = h.p.Close()
			} else {
				h.cancel()
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := br.ReadByte(); err == nil {
				t.Fatal("tunnel still open")
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("tunnel not closed")
			}
			if _, _, err := h.connect("127.0.0.1:" + e.port()); err == nil {
				t.Fatal("new connection accepted after close")
			}
		})
	}
}

func TestDeciderPanic(t *testing.T) {
	o := newOrigin(t)
	dec := newFakeDecider("127.0.0.1:" + o.port())
	dec.set(func(d *fakeDecider) { d.panics = 1 })
	h := newHarness(t, dec)
	code, body, hdr := httpGet(t, h, "http://127.0.0.1:"+o.port()+"/")
	if code != 403 || hdr.Get("X-Sandboxd-Decision") != "deny; source=error" {
		t.Fatalf("%d %q", code, body)
	}
	// Not cached: the next request is decided again and works.
	if code, body, _ := httpGet(t, h, "http://127.0.0.1:"+o.port()+"/"); code != 200 {
		t.Fatalf("after panic: %d %q", code, body)
	}
	if o.hits.Load() != 1 {
		t.Errorf("hits %d", o.hits.Load())
	}
}

func TestHandlerPanicClosesOnlyItsConnection(t *testing.T) {
	o := newOrigin(t)
	dec := &panicUse{fakeDecider: newFakeDecider("127.0.0.1:" + o.port())}
	h := newHarness(t, dec.fakeDecider, func(c *Config, _ *Dialer) { c.Decider = dec })
	dec.arm.Store(true)
	if _, _, err := h.connect("127.0.0.1:" + o.port()); err == nil {
		t.Fatal("expected a refusal")
	}
	if code, _, _ := httpGet(t, h, "http://127.0.0.1:"+o.port()+"/"); code != 200 {
		t.Fatalf("next request: %d", code)
	}
}

func TestTunnelIdle(t *testing.T) {
	e := newEcho(t)
	dec := newFakeDecider("127.0.0.1:" + e.port())
	h := newHarness(t, dec, withLimits(Limits{TunnelIdle: 300 * time.Millisecond}))
	idle, _, err := h.connect("127.0.0.1:" + e.port())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	busy, br, err := h.connect("127.0.0.1:" + e.port())
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	start := time.Now()
	for time.Since(start) < time.Second {
		if _, err := io.WriteString(busy, "x"); err != nil {
			t.Fatalf("busy tunnel closed after %v: %v", time.Since(start), err)
		}
		_ = busy.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := br.ReadByte(); err != nil {
			t.Fatalf("busy tunnel closed after %v: %v", time.Since(start), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = idle.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); err != io.EOF && !strings.Contains(err.Error(), "reset") {
		t.Errorf("idle tunnel: %v", err)
	}
}

func TestEarlyBytesReplayed(t *testing.T) {
	e := newEcho(t)
	dec := newFakeDecider("127.0.0.1:" + e.port())
	block := make(chan struct{})
	dec.set(func(d *fakeDecider) { d.block = block })
	h := newHarness(t, dec)
	c, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	target := "127.0.0.1:" + e.port()
	early := strings.Repeat("E", 3000)
	_, _ = io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nProxy-Authorization: "+authHeader(testToken)+"\r\n\r\n"+early)
	time.Sleep(50 * time.Millisecond)
	_, _ = io.WriteString(c, "late")
	close(block)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	want := "HTTP/1.1 200 Connection established\r\n\r\n" + early + "late"
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
		t.Fatalf("got %q (%v)", got[:min(len(got), 80)], err)
	}
}

func TestManyTunnels(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	e := newEcho(t)
	dec := newFakeDecider("127.0.0.1:" + e.port())
	h := newHarness(t, dec)
	type tun struct {
		c  net.Conn
		br io.Reader
	}
	tuns := make([]tun, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64) // handshakes in flight, not tunnels open
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, br, err := h.connect("127.0.0.1:" + e.port())
			if err != nil {
				errs <- err
				return
			}
			tuns[i] = tun{c, br}
		})
	}
	wg.Wait()
	// All n tunnels are open at once; use them all concurrently.
	for _, tu := range tuns {
		if tu.c == nil {
			continue
		}
		wg.Go(func() {
			_ = tu.c.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := io.WriteString(tu.c, "ping"); err != nil {
				errs <- err
				return
			}
			b := make([]byte, 4)
			if _, err := io.ReadFull(tu.br, b); err != nil || string(b) != "ping" {
				errs <- fmt.Errorf("echo %q: %v", b, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, tu := range tuns {
		if tu.c != nil {
			tu.c.Close()
		}
	}
}

func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		e := newEcho(t)
		o := newOrigin(t)
		dec := newFakeDecider("127.0.0.1:"+e.port(), "127.0.0.1:"+o.port())
		p, err := New(Config{Decider: dec, Token: testToken, Resolver: newFakeResolver()})
		if err != nil {
			t.Fatal(err)
		}
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		done := make(chan error, 1)
		go func() { done <- p.Serve(context.Background(), ln, nil) }()
		h := &harness{t: t, p: p, addr: ln.Addr().String(), dec: dec}
		var open []net.Conn
		for range 20 {
			c, _, err := h.connect("127.0.0.1:" + e.port())
			if err != nil {
				t.Fatal(err)
			}
			open = append(open, c)
		}
		if code, _, _ := httpGet(t, h, "http://127.0.0.1:"+o.port()+"/"); code != 200 {
			t.Fatal(code)
		}
		half, _ := net.Dial("tcp", h.addr)
		_, _ = io.WriteString(half, "CONNECT 127.0.0.1:1 HTTP/1.1\r\n")
		_ = p.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		for _, c := range append(open, half) {
			c.Close()
		}
		e.ln.Close()
		o.Close()
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
