package netproxy

import (
	"context"
	"net"

	"github.com/sandboxd/sandboxd/netdest"
)

// answer tells a client, in its own way in's words, that its connection
// is refused: an HTTP response (CONNECT, plain HTTP), a SOCKS5 reply
// code, a reset (capture). dialled says the refusal came from the dial
// of an allowed destination rather than from the decision, which SOCKS5
// answers with other codes. The refusal is counted before it is called.
type answer func(ref *refusal, dialled bool)

// open is the one path from a destination a way in has read to an
// upstream connection: decide it (permitFor), dial exactly what was
// decided through the permit, and count and answer every refusal on the
// way with tell. It returns nil when the client was refused. CONNECT,
// SOCKS5 and capture call it; plain HTTP takes its first half
// (permitFor), since its dial is the transport's.
func (p *Proxy) open(ctx context.Context, cc *clientConn, via Via, dest netdest.Dest, tell answer) net.Conn {
	pm := p.permitFor(ctx, cc, via, dest, tell)
	if pm == nil {
		return nil
	}
	defer pm.release()
	up, err := p.dialPermit(ctx, pm, "tcp", pm.dest.String())
	if err != nil {
		p.refuse(p.dialRefusal(pm, err), true, tell)
		return nil
	}
	return up
}

// permitFor decides dest for one connection: its permit to dial, or nil
// once the refusal has been counted and answered with tell.
func (p *Proxy) permitFor(ctx context.Context, cc *clientConn, via Via, dest netdest.Dest, tell answer) *permit {
	pm, ref := p.decide(ctx, cc.s, cc, via, dest)
	if ref != nil {
		p.stats.countVia(ref.decision, via)
		p.refuse(ref, false, tell)
		return nil
	}
	p.stats.countVia("allow", via)
	return pm
}

// refuse counts a refusal once, by "decision/source", and answers it.
func (p *Proxy) refuse(ref *refusal, dialled bool, tell answer) {
	p.stats.count(ref.decision + "/" + ref.source)
	tell(ref, dialled)
}
