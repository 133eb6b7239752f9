package netproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"

	"github.com/sandboxd/sandboxd/netdest"
)

// ServeCapture serves one attempt's capture listener until ctx is done
// or ln fails; it takes ownership of ln. Every connection on it is one
// the command made straight to an address off the namespace's loopback,
// which the kernel delivered here with the address it was made to as
// its local address (see the package comment). It is decided like a
// CONNECT to that destination: the name behind a stub address, or the
// IP literal. A refused connection is reset, since a raw connection has
// no way to carry a reason.
func (p *Proxy) ServeCapture(ctx context.Context, ln net.Listener, inside Dialer) error {
	// Plain HTTP on port 80 is served by an HTTP server of its own, fed
	// the connections as they are captured.
	web := &connQueue{conns: make(chan net.Conn), done: make(chan struct{}), addr: ln.Addr()}
	srv := p.newServer(ctx)
	srv.Handler = http.HandlerFunc(p.serveCapturedHTTP)
	webDone := make(chan struct{})
	go func() {
		defer close(webDone)
		_ = srv.Serve(web)
	}()
	err := p.serveEach(ctx, ln, inside, "capture",
		func(s *serveState, cc *clientConn) { p.serveCaptured(s, cc, web) },
		func() { _ = srv.Close() })
	_ = srv.Close()
	<-webDone
	return err
}

// serveEach accepts on ln until ctx is done or ln fails, and runs handle
// for each connection on a goroutine of its own; stop (if any) runs once
// accepting has ended, before every connection is closed and waited
// for. It takes ownership of ln. It is ServeCapture's and ServeSOCKS's
// loop.
func (p *Proxy) serveEach(ctx context.Context, ln net.Listener, inside Dialer, what string, handle func(*serveState, *clientConn), stop func()) error {
	ctx, release, err := p.startServing(ctx, ln)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newServeState(ctx, p, ln, inside)
	closeLn := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer closeLn()
	var wg sync.WaitGroup
	ll := &limitListener{Listener: ln, s: s}
	for {
		c, aerr := ll.Accept()
		if aerr != nil {
			err = aerr
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			handle(s, c.(*clientConn))
		}()
	}
	cancel()
	if stop != nil {
		stop()
	}
	s.closeAll()
	wg.Wait()
	if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("netproxy: %s: %w", what, err)
}

// serveCaptured decides one captured connection and relays it, or, on
// port 80, hands it to web, where each request is decided as HTTP.
func (p *Proxy) serveCaptured(s *serveState, cc *clientConn, web *connQueue) {
	dest, why := p.capturedDest(cc.LocalAddr())
	if why != "" {
		p.log.Debug("netproxy: captured connection refused", "to", cc.LocalAddr().String(), "why", why)
		p.stats.count("deny/" + why)
		reset(cc)
		return
	}
	if dest.Port == 80 {
		cc.captured = dest
		web.put(cc)
		return
	}
	defer cc.Close()
	up := p.open(s.ctx, cc, ViaCapture, dest, func(*refusal, bool) { reset(cc) })
	if up == nil {
		return
	}
	tunnelBoth(cc, nil, up)
}

// serveCapturedHTTP decides one plain-HTTP request on a captured
// connection to port 80: in origin form (or absolute form naming the
// same destination), with one Host header naming where the connection
// was made, each request on a kept-alive connection on its own.
func (p *Proxy) serveCapturedHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := workContext(r)
	defer cancel()
	cc := clientOf(r.Context())
	if ref := admitCaptured(ctx, r, cc); ref != nil {
		p.writeRefusal(w, r, ref)
		return
	}
	p.forward(ctx, w, r, cc.captured, ViaCapturedHTTP)
}

// admitCaptured checks a captured request's head against the
// connection's destination: no request may be decided for one host and
// sent to another.
func admitCaptured(ctx context.Context, r *http.Request, cc *clientConn) *refusal {
	h, ok := cc.tap.next(ctx)
	switch {
	case !ok || h.bad || h.method != r.Method || h.uri != r.RequestURI:
		return malformedRefusal(errors.New("the request head could not be read"))
	case h.clte:
		return malformedRefusal(errors.New("both Content-Length and Transfer-Encoding"))
	case len(h.hosts) != 1 || h.hosts[0] == "":
		return malformedRefusal(errors.New("a request needs exactly one Host header, naming where it connected"))
	case r.Method == http.MethodConnect:
		return malformedRefusal(errors.New("CONNECT on a connection made straight to port 80"))
	}
	dest, uri := cc.captured, r.RequestURI
	if strings.HasPrefix(uri, "/") {
		switch {
		case hasJunk(uri) || strings.IndexByte(uri, '#') >= 0:
			return malformedRefusal(targetErr("control characters, spaces or a fragment in the request target"))
		case r.URL.IsAbs() || r.URL.Host != "":
			return malformedRefusal(errors.New("ambiguous request target"))
		}
		if err := sameHost(h.hosts[0], dest, 80); err != nil {
			return malformedRefusal(err)
		}
		return nil
	}
	d, err := parseTarget(r.Method, uri, h.hosts[0])
	if err != nil {
		return malformedRefusal(err)
	}
	if d.String() != dest.String() {
		return malformedRefusal(fmt.Errorf("the request names %s but the connection was made to %s", d, dest))
	}
	return nil
}

// connQueue is a net.Listener whose connections are handed to it.
type connQueue struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	addr  net.Addr
}

// put hands c to the server accepting on q (closing it once q is closed).
func (q *connQueue) put(c net.Conn) {
	select {
	case q.conns <- c:
	case <-q.done:
		_ = c.Close()
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.addr }

// capturedDest is the destination a captured connection was made to, or
// why it has none: an address the stub gave is the name it gave it to;
// an address in the stub's range it never gave is nobody's. Loopback
// never reaches capture (the namespace's own), except the capture
// listener's own address, which is nobody's either.
func (p *Proxy) capturedDest(a net.Addr) (netdest.Dest, string) {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return netdest.Dest{}, "malformed"
	}
	ap := ta.AddrPort()
	addr := ap.Addr().Unmap()
	if ap.Port() == 0 || addr.IsLoopback() || addr.IsUnspecified() {
		return netdest.Dest{}, "malformed"
	}
	if stubPrefix.Contains(addr) {
		name, ok := p.stub.name(addr)
		if !ok {
			return netdest.Dest{}, "stub-unknown"
		}
		d, err := netdest.ParseHost(name, ap.Port())
		if err != nil {
			return netdest.Dest{}, "malformed"
		}
		return d, ""
	}
	d, err := netdest.ParseHost(literal(addr), ap.Port())
	if err != nil {
		return netdest.Dest{}, "malformed"
	}
	return d, ""
}

// literal is an address as a host: IPv6 in brackets, as a CONNECT names it.
func literal(a netip.Addr) string {
	if a.Is6() {
		return "[" + a.String() + "]"
	}
	return a.String()
}

// reset closes c with a reset rather than an orderly end, so the client
// sees the connection refused, not an empty reply.
func reset(c *clientConn) {
	if c.tcp != nil {
		_ = c.tcp.SetLinger(0)
	}
	_ = c.Close()
}
