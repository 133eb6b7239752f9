package netproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/sandboxd/sandboxd/netdest"
	"golang.org/x/net/dns/dnsmessage"
)

// stubPrefix is where the stub's addresses come from: the benchmarking
// range (RFC 2544), which no real destination uses.
var stubPrefix = netip.MustParsePrefix("198.18.0.0/15")

// stubTTL is the TTL of the stub's answers. The mapping lasts for the
// run, so any TTL is right; a short one keeps nothing stale afterwards.
const stubTTL = 60

// stubNames maps the names the stub answered to the addresses it gave
// them: one address per name for the proxy's life, never reused for
// another name. Its methods are safe for concurrent use.
type stubNames struct {
	mu     sync.Mutex
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string
	next   netip.Addr // the next address to give; invalid when none is left
	left   int        // how many more names may be given one
}

// newStubNames makes an empty table that gives at most max addresses
// (0: DefaultStubNames; never more than the range holds).
func newStubNames(max int) *stubNames {
	if max <= 0 {
		max = DefaultStubNames
	}
	n := &stubNames{byName: map[string]netip.Addr{}, byAddr: map[netip.Addr]string{},
		next: stubPrefix.Addr().Next(), left: 1 << (32 - stubPrefix.Bits())}
	n.left = min(n.left, max)
	return n
}

// errStubFull is the stub's answer once every address was given.
var errStubFull = errors.New("netproxy: stub: no address left for another name")

// addr returns name's address, giving it the next one on first use.
func (n *stubNames) addr(name string) (netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a, ok := n.byName[name]; ok {
		return a, nil
	}
	// Skip addresses ending in .0 or .255: some tools take them for a
	// network or broadcast address.
	for n.next.IsValid() && stubPrefix.Contains(n.next) {
		if b := n.next.As4(); b[3] == 0 || b[3] == 255 {
			n.next = n.next.Next()
			continue
		}
		break
	}
	if n.left <= 0 || !n.next.IsValid() || !stubPrefix.Contains(n.next) {
		return netip.Addr{}, errStubFull
	}
	a := n.next
	n.next = n.next.Next()
	n.left--
	n.byName[name], n.byAddr[a] = a, name
	return a, nil
}

// name returns the name the stub gave a, if it gave one.
func (n *stubNames) name(a netip.Addr) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s, ok := n.byAddr[a.Unmap()]
	return s, ok
}

// ServeDNS answers DNS queries on pc (the run's stub resolver, on the
// namespace's loopback) until ctx is done or pc fails; it takes
// ownership of pc. It never asks a real resolver: see answer.
func (p *Proxy) ServeDNS(ctx context.Context, pc net.PacketConn) error {
	ctx, release, err := p.startServing(ctx, pc)
	if err != nil {
		return err
	}
	defer release()
	stop := context.AfterFunc(ctx, func() { _ = pc.Close() })
	defer stop()
	defer pc.Close()
	buf := make([]byte, 4096)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("netproxy: stub: %w", err)
		}
		if out := p.stub.answer(buf[:n]); out != nil {
			p.stats.dns.Add(1)
			_, _ = pc.WriteTo(out, from)
		}
	}
}

// answer is the stub's reply to one query (nil: none, for what is not a
// query). Only an A question for a valid host name gets an address:
//   - A: the name's stub address (a name under .localhost: 127.0.0.1);
//   - AAAA, and every other type but TXT and CNAME: an empty answer, so
//     a resolver settles on the A record;
//   - TXT and CNAME (the record types DNS tunnels carry data in),
//     names that are not valid host names (CRLF, underscores, over-long
//     labels, IP literals), a class other than IN, more than one
//     question, and a full table: REFUSED;
//   - an opcode other than QUERY: NOTIMP; a malformed question: FORMERR.
func (n *stubNames) answer(msg []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil || h.Response {
		return nil
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, Authoritative: true,
		RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	reply := func(rcode dnsmessage.RCode, q *dnsmessage.Question, a netip.Addr) []byte {
		rh.RCode = rcode
		b := dnsmessage.NewBuilder(make([]byte, 0, 512), rh)
		if q != nil {
			if b.StartQuestions() != nil || b.Question(*q) != nil {
				return nil
			}
		}
		if a.IsValid() {
			if b.StartAnswers() != nil {
				return nil
			}
			if b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: stubTTL},
				dnsmessage.AResource{A: a.As4()}) != nil {
				return nil
			}
		}
		out, err := b.Finish()
		if err != nil {
			return nil
		}
		return out
	}
	if h.OpCode != 0 {
		return reply(dnsmessage.RCodeNotImplemented, nil, netip.Addr{})
	}
	q, err := p.Question()
	if err != nil {
		return reply(dnsmessage.RCodeFormatError, nil, netip.Addr{})
	}
	if _, err := p.Question(); !errors.Is(err, dnsmessage.ErrSectionDone) {
		return reply(dnsmessage.RCodeRefused, nil, netip.Addr{})
	}
	if q.Class != dnsmessage.ClassINET {
		return reply(dnsmessage.RCodeRefused, &q, netip.Addr{})
	}
	name, ok := stubName(q.Name)
	if !ok {
		return reply(dnsmessage.RCodeRefused, &q, netip.Addr{})
	}
	switch q.Type {
	case dnsmessage.TypeA:
	case dnsmessage.TypeTXT, dnsmessage.TypeCNAME:
		return reply(dnsmessage.RCodeRefused, &q, netip.Addr{})
	default:
		return reply(dnsmessage.RCodeSuccess, &q, netip.Addr{})
	}
	if name == "127.0.0.1" {
		return reply(dnsmessage.RCodeSuccess, &q, netip.AddrFrom4([4]byte{127, 0, 0, 1}))
	}
	a, err := n.addr(name)
	if err != nil {
		return reply(dnsmessage.RCodeRefused, &q, netip.Addr{})
	}
	return reply(dnsmessage.RCodeSuccess, &q, a)
}

// stubName is the destination name a question asks about, if it is a
// valid host name: what netdest accepts as a name (not an IP literal),
// folded as netdest folds it; the loopback names give "127.0.0.1".
func stubName(q dnsmessage.Name) (string, bool) {
	s := q.String()
	if s == "." || s == "" {
		return "", false
	}
	// A label may hold any byte on the wire, a dot included; netdest
	// refuses every byte but letters, digits, hyphens and dots, so a
	// name is only ever decided as the labels it spells.
	d, err := netdest.ParseHost(s, 1)
	if err != nil {
		return "", false
	}
	if d.IsIP() {
		if d.Loopback() && d.Host == "127.0.0.1" && !looksNumeric(s) {
			return "127.0.0.1", true // localhost, *.localhost
		}
		return "", false
	}
	return d.Host, true
}

// looksNumeric reports whether s (a name with a trailing dot) has a last
// label that starts with a digit: netdest reads such names as IPv4.
func looksNumeric(s string) bool {
	s = s[:len(s)-1]
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '.' {
			s = s[i+1:]
			break
		}
	}
	return s != "" && s[0] >= '0' && s[0] <= '9'
}
