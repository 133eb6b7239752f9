package netproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
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
			p.serveCaptured(s, c.(*clientConn))
		}()
	}
	cancel()
	s.closeAll()
	wg.Wait()
	if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("netproxy: capture: %w", err)
}

// serveCaptured decides one captured connection and relays it.
func (p *Proxy) serveCaptured(s *serveState, cc *clientConn) {
	defer cc.Close()
	dest, why := p.capturedDest(cc.LocalAddr())
	if why != "" {
		p.log.Debug("netproxy: captured connection refused", "to", cc.LocalAddr().String(), "why", why)
		p.stats.count("deny/" + why)
		reset(cc)
		return
	}
	pm, ref := p.decide(s.ctx, s, cc, ViaCapture, dest)
	if ref != nil {
		p.stats.count(ref.decision + "/" + ref.source)
		reset(cc)
		return
	}
	defer pm.release()
	up, err := p.dialPermit(s.ctx, pm, "tcp", pm.dest.String())
	if err != nil {
		ref := p.dialRefusal(pm, err)
		p.stats.count(ref.decision + "/" + ref.source)
		reset(cc)
		return
	}
	tunnelBoth(cc, nil, up)
}

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
