package netproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sandboxd/sandboxd/netdest"
)

// insideTimeout bounds one try of the run's own loopback: it is a
// local connect, so anything slow means nothing listens.
const insideTimeout = 500 * time.Millisecond

// holdSlack lets a decision outlast the Hold of the connection that
// started it, so that connection's refusal reliably says "no decision
// in time" and a late verdict still lands in the cache.
const holdSlack = time.Second

// entry is one decision about a destination: pending until done is
// closed, then final. In ScopeRun it is shared by every connection to
// the destination.
type entry struct {
	done chan struct{}
	// Set before done is closed, read only after.
	verdict   Verdict      // the verdict whose grant covers addrs
	addrs     []netip.Addr // the checked addresses
	ref       *refusal     // non-nil: denied or failed
	transient bool         // a failure, not a verdict: never cached
}

// permit is one connection's right to one dial: exactly one of addrs,
// on dest's port. decide issues it; dialPermit spends it.
type permit struct {
	s      *serveState
	client *clientConn // the client connection (its tunnel, if any)
	dest   netdest.Dest
	addrs  []netip.Addr
	via    Via
	inside net.Conn // a connection already made on the run's own loopback
	used   atomic.Bool
	// up is the connection the permit's dial made (set by upstream).
	up *upstreamConn
}

// release closes an inside connection nobody dialled for.
func (pm *permit) release() {
	if pm.inside != nil && pm.used.CompareAndSwap(false, true) {
		_ = pm.inside.Close()
	}
}

// decide is the one decision every way in goes through: the run's own
// loopback, then the (shared) decision, then one grant use for this
// connection. It returns a permit to dial, or why not.
func (p *Proxy) decide(ctx context.Context, s *serveState, cc *clientConn, via Via, dest netdest.Dest) (*permit, *refusal) {
	if dest.Loopback() {
		if c := s.dialInside(ctx, dest.Port); c != nil {
			p.stats.count("allow/inside")
			return &permit{s: s, client: cc, dest: dest, via: via, inside: c}, nil
		}
	}
	if ref := p.countDest(dest); ref != nil {
		return nil, ref
	}
	hctx, cancel := context.WithTimeout(ctx, p.lim.Hold)
	defer cancel()
	if cc != nil {
		cc.parked.Store(true)
		defer func() {
			cc.parked.Store(false)
			cc.early.Store(0)
		}()
	}
	start := time.Now()
	e, pending := p.entryFor(ctx, via, dest)
	select {
	case <-e.done:
	case <-hctx.Done():
		if pending {
			p.stats.waitNS.Add(int64(time.Since(start)))
		}
		if ctx.Err() != nil {
			return nil, &refusal{status: 403, decision: "deny", source: "cancelled", dest: dest, line: "The connection ended before a decision."}
		}
		return nil, timeoutRefusal(dest, p.lim.Hold)
	}
	if pending {
		p.stats.waitNS.Add(int64(time.Since(start)))
	}
	if e.ref != nil {
		return nil, e.ref
	}
	r := Request{Dest: dest, Addrs: slices.Clone(e.addrs), Via: via}
	if err := p.use(hctx, r, e.verdict.Grant); err != nil {
		p.log.Debug("netproxy: grant use refused", "dest", dest.String(), "err", err)
		return nil, deniedRefusal(dest, Verdict{Source: "error", Reason: "the grant for this connection could not be used"})
	}
	p.stats.count("allow/" + sourceKey(e.verdict.Source))
	return &permit{s: s, client: cc, dest: dest, addrs: r.Addrs, via: via}, nil
}

// countDest admits dest as one of the run's destinations, or refuses it
// undecided (and unrecorded) once MaxDests others were asked about: each
// is a decision, a cache entry and a report entry, which a command must
// not make the supervisor hold without bound.
func (p *Proxy) countDest(dest netdest.Dest) *refusal {
	key := dest.String()
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.dests[key]; ok {
		return nil
	}
	if len(p.dests) >= p.lim.MaxDests {
		return &refusal{status: 403, decision: "deny", source: "limit", dest: dest,
			line: fmt.Sprintf("Denied: this run already asked for %d destinations, the most one run may (network.max_destinations)", p.lim.MaxDests)}
	}
	p.dests[key] = struct{}{}
	return nil
}

// entryFor returns the decision for dest, starting it if needed.
// pending reports whether it was not final yet (the caller waits).
func (p *Proxy) entryFor(ctx context.Context, via Via, dest netdest.Dest) (*entry, bool) {
	if p.cfg.Scope == ScopeConnection {
		e := &entry{done: make(chan struct{})}
		dctx, cancel := context.WithTimeout(p.base, p.lim.Hold+holdSlack)
		stop := context.AfterFunc(ctx, cancel)
		p.deciding.Add(1)
		go func() {
			defer p.deciding.Done()
			defer stop()
			defer cancel()
			p.runDecision(dctx, e, via, dest)
		}()
		return e, true
	}
	key := dest.String()
	p.mu.Lock()
	e, ok := p.cache[key]
	if !ok {
		e = &entry{done: make(chan struct{})}
		p.cache[key] = e
	}
	p.mu.Unlock()
	if ok {
		select {
		case <-e.done:
			return e, false
		default:
			return e, true
		}
	}
	// The decision outlives the connection that started it: others may
	// be waiting on it, and a client hanging up must not decide for them.
	p.deciding.Add(1)
	go func() {
		defer p.deciding.Done()
		dctx, cancel := context.WithTimeout(p.base, p.lim.Hold+holdSlack)
		defer cancel()
		p.runDecision(dctx, e, via, dest)
		if e.transient {
			p.mu.Lock()
			if p.cache[key] == e {
				delete(p.cache, key)
			}
			p.mu.Unlock()
		}
	}()
	return e, true
}

// runDecision fills e: Decide before any lookup, then, for an allowed
// name, one lookup and Resolved on its addresses.
func (p *Proxy) runDecision(ctx context.Context, e *entry, via Via, dest netdest.Dest) {
	defer close(e.done)
	defer func() {
		if r := recover(); r != nil {
			p.log.Warn("netproxy: decider panicked", "dest", dest.String(), "panic", fmt.Sprint(r))
			e.ref = deniedRefusal(dest, Verdict{Source: "error", Reason: "the decider failed"})
			e.transient = true
		}
		if e.ref != nil && p.base.Err() != nil {
			e.transient = true
		}
	}()
	r := Request{Dest: dest, Via: via}
	if dest.IsIP() {
		r.Addrs = []netip.Addr{dest.Addr}
	}
	p.stats.decisions.Add(1)
	v := p.cfg.Decider.Decide(ctx, r)
	if !v.Allow {
		e.ref = deniedRefusal(dest, v)
		e.transient = v.Once
		return
	}
	if dest.IsIP() {
		e.verdict, e.addrs = v, r.Addrs
		return
	}
	addrs, err := p.lookup(ctx, dest.Host)
	if err != nil {
		p.log.Debug("netproxy: lookup failed", "dest", dest.String(), "err", err)
		e.ref = unreachableRefusal(dest, "the name could not be resolved")
		e.transient = true
		return
	}
	r.Addrs = addrs
	v2 := p.cfg.Decider.Resolved(ctx, r, v.Grant)
	if !v2.Allow {
		e.ref = deniedRefusal(dest, v2)
		return
	}
	e.verdict, e.addrs = v2, addrs
}

// use spends one use of grant, a panic counting as a refusal.
func (p *Proxy) use(ctx context.Context, r Request, grant string) (err error) {
	defer func() {
		if x := recover(); x != nil {
			err = fmt.Errorf("netproxy: use panicked: %v", x)
		}
	}()
	return p.cfg.Decider.Use(ctx, r, grant)
}

// lookup resolves an allowed name once. Addresses are unmapped and
// stripped of zones so what is checked is what is dialled.
func (p *Proxy) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, p.lim.DialTimeout)
	defer cancel()
	got, err := p.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("netproxy: lookup %s: %w", host, err)
	}
	var addrs []netip.Addr
	for _, a := range got {
		a = a.Unmap().WithZone("")
		if a.IsValid() && !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("netproxy: lookup %s: no addresses", host)
	}
	return addrs, nil
}

// dialInside tries the run's own loopback, IPv4 then IPv6. The proxy's
// own port is never tried: that would loop back into the proxy.
func (s *serveState) dialInside(ctx context.Context, port uint16) net.Conn {
	if s.inside == nil || port == s.selfPort {
		return nil
	}
	for _, a := range []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()} {
		dctx, cancel := context.WithTimeout(ctx, insideTimeout)
		c, err := s.inside(dctx, "tcp", netip.AddrPortFrom(a, port).String())
		cancel()
		if err == nil && c != nil {
			return c
		}
	}
	return nil
}

var (
	errNoPermit   = errors.New("netproxy: no permit: this dial was not decided")
	errPermitUsed = errors.New("netproxy: permit already used")
)

// transportDial is the plain-HTTP transport's only dialer.
func (p *Proxy) transportDial(ctx context.Context, network, addr string) (net.Conn, error) {
	pm, _ := ctx.Value(permitKey{}).(*permit)
	return p.dialPermit(ctx, pm, network, addr)
}

// permitKey carries a *permit in an outgoing request's context.
type permitKey struct{}

// dialPermit is the only dialer that reaches the network: one dial per
// permit, to exactly the destination decided, at one of its checked
// addresses, never a reserved one nor a cloud metadata endpoint.
func (p *Proxy) dialPermit(ctx context.Context, pm *permit, network, addr string) (net.Conn, error) {
	if pm == nil {
		return nil, errNoPermit
	}
	if !pm.used.CompareAndSwap(false, true) {
		return nil, errPermitUsed
	}
	if network != "tcp" || addr != pm.dest.String() {
		return nil, fmt.Errorf("netproxy: dial %s %q: not the decided destination %s", network, addr, pm.dest)
	}
	if pm.inside != nil {
		return p.upstream(pm, pm.inside)
	}
	if len(netdest.Metadata(pm.dest)) > 0 {
		return nil, &refusalError{metadataRefusal(pm.dest)}
	}
	for _, a := range loopbackBoth(pm.addrs) {
		if ap := netip.AddrPortFrom(a, pm.dest.Port); p.cfg.Reserved != nil && p.cfg.Reserved(ap) {
			return nil, &refusalError{deniedRefusal(pm.dest, Verdict{Source: "hard-deny", Reason: "it is one of sandboxd's own listeners"})}
		}
		if len(netdest.MetadataAddr(a)) > 0 {
			return nil, &refusalError{metadataRefusal(pm.dest)}
		}
	}
	var last error
	for _, a := range loopbackBoth(pm.addrs) {
		dctx, cancel := context.WithTimeout(ctx, p.lim.DialTimeout)
		c, err := p.cfg.Dial(dctx, "tcp", netip.AddrPortFrom(a, pm.dest.Port).String())
		cancel()
		if err == nil {
			return p.upstream(pm, c)
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	if last == nil {
		last = errors.New("no addresses")
	}
	return nil, &refusalError{unreachableRefusal(pm.dest, dialReason(last))}
}

// metadataRefusal refuses a dial to a cloud metadata endpoint
// (netdest.MetadataEndpoints): the decider refuses them first, so this
// is only reached if it failed open, and then nothing is dialled.
func metadataRefusal(dest netdest.Dest) *refusal {
	return deniedRefusal(dest, Verdict{Source: "hard-deny", Reason: "it is a cloud metadata endpoint, which is never dialled"})
}

// loopbackBoth adds ::1 after 127.0.0.1: every loopback spelling is one
// destination (netdest folds ::1 to 127.0.0.1), and a server that listens
// only on ::1 (a dev server bound to "localhost") is that destination too.
func loopbackBoth(addrs []netip.Addr) []netip.Addr {
	for _, a := range addrs {
		if a == netip.AddrFrom4([4]byte{127, 0, 0, 1}) && !slices.Contains(addrs, netip.IPv6Loopback()) {
			return append(slices.Clone(addrs), netip.IPv6Loopback())
		}
	}
	return addrs
}

// upstream wraps and registers a dialled connection; a tunnel's gets
// byte counting and the idle watch.
func (p *Proxy) upstream(pm *permit, c net.Conn) (net.Conn, error) {
	u := newUpstreamConn(pm.s, c)
	pm.up = u
	if pm.via != ViaHTTP && pm.via != ViaCapturedHTTP && pm.client != nil { // tunnels from the start
		p.startTunnel(pm)
	}
	if !pm.s.track(u) {
		return nil, net.ErrClosed
	}
	return u, nil
}

// startTunnel makes the permit's connection a tunnel: bytes counted
// both ways, closed when idle. A CONNECT is one from its dial; a plain
// request becomes one when the origin switches protocols.
func (p *Proxy) startTunnel(pm *permit) {
	t := startTunnel(pm.client, pm.up, p.lim.TunnelIdle)
	pm.up.tun.Store(t)
	pm.client.tun.Store(t)
}

// dialReason is a short, safe description of a dial failure.
func dialReason(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "the connection timed out"
	case errors.Is(err, context.Canceled):
		return "the connection was cancelled"
	}
	return "the connection was refused or failed"
}
