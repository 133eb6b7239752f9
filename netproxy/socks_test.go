package netproxy

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// socksHarness serves a SOCKS5 listener on the harness's proxy.
func socksHarness(t *testing.T, h *harness) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.p.ServeSOCKS(ctx, ln, nil) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("ServeSOCKS: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("ServeSOCKS did not return")
		}
	})
	return ln.Addr().String()
}

// socksName is a CONNECT request for a name.
func socksName(name string, port uint16) []byte {
	b := []byte{5, 1, 0, 3, byte(len(name))}
	b = append(b, name...)
	return binary.BigEndian.AppendUint16(b, port)
}

// socksDial runs a client: greeting (methods), optional auth, request;
// it returns the reply code (-1: the connection ended first) and the
// connection, tunnelled when the code is 0.
func socksDial(t *testing.T, addr string, methods []byte, auth []byte, req []byte) (int, net.Conn) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write(append([]byte{5, byte(len(methods))}, methods...))
	var m [2]byte
	if _, err := io.ReadFull(c, m[:]); err != nil || m[1] == 0xff {
		return -1, c
	}
	if m[1] == 2 {
		c.Write(auth)
		var a [2]byte
		if _, err := io.ReadFull(c, a[:]); err != nil || a[1] != 0 {
			return -1, c
		}
	}
	c.Write(req)
	var rep [10]byte
	if _, err := io.ReadFull(c, rep[:]); err != nil {
		return -1, c
	}
	return int(rep[1]), c
}

func userPass(user, pass string) []byte {
	b := append([]byte{1, byte(len(user))}, user...)
	b = append(b, byte(len(pass)))
	return append(b, pass...)
}

// TestSOCKS: CONNECT to an allowed name tunnels (the name resolved by
// the proxy after the allow); a denied name, BIND, UDP ASSOCIATE, an
// unknown address type, a bad name and wrong credentials are refused,
// and none of them reaches the resolver or the origin.
func TestSOCKS(t *testing.T) {
	echo := newEcho(t)
	port := uint16(mustPort(t, echo.port()))
	dec := newFakeDecider("allowed.test:"+echo.port(), "127.0.0.1:"+echo.port())
	h := newHarness(t, dec)
	h.res.add("allowed.test", "127.0.0.1")
	h.res.add("denied.test", "127.0.0.1")
	addr := socksHarness(t, h)

	code, c := socksDial(t, addr, []byte{0}, nil, socksName("allowed.test", port))
	if code != 0 {
		t.Fatalf("allowed name: reply %d", code)
	}
	c.Write([]byte("ping"))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("no echo through the tunnel: %q %v", buf, err)
	}
	// Credentials, when they are all the client offers.
	if code, _ := socksDial(t, addr, []byte{2}, userPass("sandboxd", testToken), socksName("allowed.test", port)); code != 0 {
		t.Errorf("with the run's credential: reply %d", code)
	}
	if code, _ := socksDial(t, addr, []byte{2}, userPass("sandboxd", "wrong"), socksName("allowed.test", port)); code != -1 {
		t.Errorf("with a wrong credential: reply %d, want the connection closed", code)
	}
	if code, _ := socksDial(t, addr, []byte{1}, nil, nil); code != -1 {
		t.Errorf("GSSAPI only: reply %d, want no acceptable method", code)
	}
	ipReq := append([]byte{5, 1, 0, 1, 127, 0, 0, 1}, byte(port>>8), byte(port))
	if code, _ := socksDial(t, addr, []byte{0}, nil, ipReq); code != 0 {
		t.Errorf("an allowed IPv4 literal: reply %d", code)
	}
	refused := map[string][]byte{
		"denied name":    socksName("denied.test", port),
		"bind":           append([]byte{5, 2, 0, 3, 12}, append([]byte("allowed.test"), byte(port>>8), byte(port))...),
		"udp associate":  append([]byte{5, 3, 0, 3, 12}, append([]byte("allowed.test"), byte(port>>8), byte(port))...),
		"address type 9": {5, 1, 0, 9, 1, 2, 3, 4, 0, 80},
		"CRLF in a name": socksName("allowed.test\r\nx", port),
		"underscore":     socksName("_x.allowed.test", port),
		"port 0":         socksName("allowed.test", 0),
	}
	want := map[string]int{"denied name": 2, "bind": 7, "udp associate": 7, "address type 9": 8, "CRLF in a name": 2, "underscore": 2, "port 0": 2}
	for name, req := range refused {
		if code, _ := socksDial(t, addr, []byte{0}, nil, req); code != want[name] {
			t.Errorf("%s: reply %d, want %d", name, code, want[name])
		}
	}
	if got := echo.conns.Load(); got != 3 {
		t.Errorf("the origin got %d connections, want 3", got)
	}
	for _, q := range h.res.log() {
		if q != "allowed.test" {
			t.Errorf("the resolver was asked %q", q)
		}
	}
	dec.mu.Lock()
	defer dec.mu.Unlock()
	for _, r := range dec.decides {
		if r.Via != ViaSOCKS {
			t.Errorf("decided %s via %s", r.Dest, r.Via)
		}
	}
}

// FuzzSOCKSHandshake: no input panics or reads past what it declares;
// a request that parses names a destination netdest accepts, or carries
// a refusal code.
func FuzzSOCKSHandshake(f *testing.F) {
	f.Add(append([]byte{5, 1, 0}, socksName("example.com", 443)...))
	f.Add(append([]byte{5, 1, 2}, append(userPass("sandboxd", "x"), socksName("a.b", 22)...)...))
	f.Add([]byte{5, 1, 0, 5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 80})
	f.Add([]byte{5, 1, 0, 5, 3, 0, 3, 0, 0, 0})
	dec := newFakeDecider()
	p, err := New(Config{Decider: dec, Token: testToken})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		req, err := p.socksHandshake(r, io.Discard)
		if err != nil {
			return
		}
		if req.rep == 0 {
			if req.cmd != socksConnect || req.dest.Port == 0 || req.dest.Host == "" {
				t.Fatalf("served %+v", req)
			}
			if strings.ContainsAny(req.dest.Host, "\r\n\x00 ") {
				t.Fatalf("a host with junk: %q", req.dest.Host)
			}
		}
	})
}
