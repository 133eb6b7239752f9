package netproxy

import (
	"context"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/sandboxd/sandboxd/netdest"
)

// SOCKS5 (RFC 1928), CONNECT only. The endpoint listens inside the run's
// network namespace like the HTTP proxy, so only the run can reach it:
// "no authentication" is accepted, which is what OpenBSD nc -X 5 and
// ssh's ProxyCommand offer. A client that offers only username/password
// (RFC 1929) must present the run's credential (user "sandboxd", the
// token), as for the HTTP proxy. Names are resolved by the proxy after
// an allow (socks5h semantics): the destination is decided on the name
// as sent.

// SOCKS5 constants.
const (
	socksVersion   = 5
	socksNoAuth    = 0x00
	socksUserPass  = 0x02
	socksNoMethods = 0xff

	socksConnect = 1

	socksIPv4   = 1
	socksDomain = 3
	socksIPv6   = 4

	socksOK           = 0
	socksNotAllowed   = 2
	socksHostUnreach  = 4
	socksRefused      = 5
	socksBadCommand   = 7
	socksBadAddrType  = 8
	socksAuthVersion  = 1
	socksAuthOK       = 0
	socksAuthRejected = 1
)

// errSOCKS is a malformed SOCKS5 exchange.
var errSOCKS = errors.New("netproxy: socks5")

// socksRequest is a parsed SOCKS5 request: its command and destination,
// or the reply code it gets when it cannot be served.
type socksRequest struct {
	cmd  byte
	dest netdest.Dest
	rep  byte // non-zero: refuse with this code
}

// ServeSOCKS serves one attempt's SOCKS5 listener until ctx is done or
// ln fails; it takes ownership of ln. Each CONNECT is decided like an
// HTTP CONNECT to the same destination (ViaSOCKS).
func (p *Proxy) ServeSOCKS(ctx context.Context, ln net.Listener, inside Dialer) error {
	return p.serveEach(ctx, ln, inside, "socks", p.serveSOCKS, nil)
}

// serveSOCKS runs one client's handshake, decision and tunnel.
func (p *Proxy) serveSOCKS(s *serveState, cc *clientConn) {
	defer cc.Close()
	// The handshake is bounded like a request head; the decision is
	// bounded by the hold.
	_ = cc.SetReadDeadline(time.Now().Add(p.lim.HeaderTimeout))
	req, err := p.socksHandshake(cc, cc)
	if err != nil {
		p.log.Debug("netproxy: socks handshake", "err", err)
		p.stats.count("deny/malformed")
		return
	}
	_ = cc.SetReadDeadline(time.Time{})
	if req.rep != 0 {
		p.stats.count("deny/malformed")
		_ = socksReply(cc, req.rep)
		return
	}
	up := p.open(s.ctx, cc, ViaSOCKS, req.dest, socksAnswer(cc))
	if up == nil {
		return
	}
	if err := socksReply(cc, socksOK); err != nil {
		_ = up.Close()
		return
	}
	tunnelBoth(cc, nil, up)
}

// socksHandshake reads the method negotiation (answering it on w) and
// the request. It reads exactly the bytes they hold, so nothing the
// client sends after the request is consumed before the tunnel.
func (p *Proxy) socksHandshake(r io.Reader, w io.Writer) (socksRequest, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return socksRequest{}, err
	}
	if hdr[0] != socksVersion || hdr[1] == 0 {
		return socksRequest{}, fmt.Errorf("%w: version %d, %d methods", errSOCKS, hdr[0], hdr[1])
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(r, methods); err != nil {
		return socksRequest{}, err
	}
	method := byte(socksNoMethods)
	for _, m := range methods {
		if m == socksNoAuth {
			method = socksNoAuth
			break
		}
		if m == socksUserPass {
			method = socksUserPass
		}
	}
	if _, err := w.Write([]byte{socksVersion, method}); err != nil {
		return socksRequest{}, err
	}
	switch method {
	case socksNoMethods:
		return socksRequest{}, fmt.Errorf("%w: no acceptable method", errSOCKS)
	case socksUserPass:
		ok, err := p.socksAuth(r)
		if err != nil {
			return socksRequest{}, err
		}
		status := byte(socksAuthOK)
		if !ok {
			status = socksAuthRejected
			p.stats.count("deny/auth")
		}
		if _, err := w.Write([]byte{socksAuthVersion, status}); err != nil {
			return socksRequest{}, err
		}
		if !ok {
			return socksRequest{}, fmt.Errorf("%w: wrong credentials", errSOCKS)
		}
	}
	return readSOCKSRequest(r)
}

// socksAuth reads an RFC 1929 username/password and checks it against
// the run's credential, in constant time.
func (p *Proxy) socksAuth(r io.Reader) (bool, error) {
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return false, err
	}
	if b[0] != socksAuthVersion {
		return false, fmt.Errorf("%w: auth version %d", errSOCKS, b[0])
	}
	field := func() ([]byte, error) {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, err
		}
		v := make([]byte, b[0])
		_, err := io.ReadFull(r, v)
		return v, err
	}
	user, err := field()
	if err != nil {
		return false, err
	}
	pass, err := field()
	if err != nil {
		return false, err
	}
	got := append(append(user, ':'), pass...)
	return subtle.ConstantTimeCompare(got, p.wantAuth) == 1, nil
}

// readSOCKSRequest reads one request: VER CMD RSV ATYP DST.ADDR
// DST.PORT. A request that parses but cannot be served (another command,
// another address type, a name that is no host name) comes back with
// rep set; a malformed one is an error.
func readSOCKSRequest(r io.Reader) (socksRequest, error) {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return socksRequest{}, err
	}
	if h[0] != socksVersion || h[2] != 0 {
		return socksRequest{}, fmt.Errorf("%w: bad request header % x", errSOCKS, h)
	}
	req := socksRequest{cmd: h[1]}
	var host string
	switch h[3] {
	case socksIPv4:
		var a [4]byte
		if _, err := io.ReadFull(r, a[:]); err != nil {
			return socksRequest{}, err
		}
		host = netip.AddrFrom4(a).String()
	case socksIPv6:
		var a [16]byte
		if _, err := io.ReadFull(r, a[:]); err != nil {
			return socksRequest{}, err
		}
		host = "[" + netip.AddrFrom16(a).String() + "]"
	case socksDomain:
		var n [1]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return socksRequest{}, err
		}
		name := make([]byte, n[0])
		if _, err := io.ReadFull(r, name); err != nil {
			return socksRequest{}, err
		}
		host = string(name)
	default:
		// The rest of the request cannot be read: refuse and close.
		req.rep = socksBadAddrType
		return req, nil
	}
	var port [2]byte
	if _, err := io.ReadFull(r, port[:]); err != nil {
		return socksRequest{}, err
	}
	if req.cmd != socksConnect {
		req.rep = socksBadCommand // no BIND, no UDP ASSOCIATE
		return req, nil
	}
	if hasJunk(host) {
		req.rep = socksNotAllowed
		return req, nil
	}
	d, err := netdest.ParseHost(host, binary.BigEndian.Uint16(port[:]))
	if err != nil {
		req.rep = socksNotAllowed
		return req, nil
	}
	req.dest = d
	return req, nil
}

// socksAnswer is SOCKS5's answer to a refusal: not allowed (2) for a
// refused decision or a denied dial; for an allowed destination whose
// dial failed, connection refused (5) when it was unreachable, host
// unreachable (4) otherwise.
func socksAnswer(w io.Writer) answer {
	return func(ref *refusal, dialled bool) {
		code := byte(socksNotAllowed)
		if dialled && ref.decision != "deny" {
			code = socksHostUnreach
			if ref.source == "unreachable" {
				code = socksRefused
			}
		}
		_ = socksReply(w, code)
	}
}

// socksReply answers a request; the bound address is not the command's
// business (0.0.0.0:0).
func socksReply(w io.Writer, rep byte) error {
	_, err := w.Write([]byte{socksVersion, rep, 0, socksIPv4, 0, 0, 0, 0, 0, 0})
	return err
}
