package confine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// How a connect to any address off loopback reaches the supervisor (see
// netproxy/doc.go for why this way and what it costs):
//   - a local route for every address (0.0.0.0/0 and ::/0 in table local,
//     on lo): a connect anywhere is delivered on the namespace's own
//     loopback instead of failing with ENETUNREACH;
//   - an nf_tables TPROXY rule in prerouting on lo, for TCP to anything
//     but 127.0.0.0/8 and ::1: the SYN is given to one transparent
//     listener (127.0.0.1:port, [::1]:port) whose accepted sockets keep
//     the address the command connected to as their local address;
//   - UDP leaves no socket but to and from the stub resolver on
//     127.0.0.1:53: an output rule drops every other datagram (sendto
//     fails with EPERM), whatever seccomp allows.
//
// The helper sets this up as the namespace's root, before it drops its
// capabilities; the command cannot change it (no CAP_NET_ADMIN, and
// seccomp refuses netlink sockets).

// loIndex is the loopback's interface index in every network namespace.
const loIndex = 1

// stubPort is the stub resolver's port on 127.0.0.1.
const stubPort = 53

// capture is the capture a helper prepared before its setup came: it
// depends on nothing of the run's plan but whether the run captures,
// and its port is the helper's own choice (no variable of the command
// names it, which matters only for the plan: the port is no secret,
// /proc/net/tcp inside shows it), so a ready helper installs it while it
// waits.
type capture struct {
	port uint16
	// listeners are the transparent listeners (IPv4, then IPv6 when the
	// namespace has it), stub the stub resolver's socket (-1: none).
	listeners []int
	stub      int
	// err is why there is no capture (its descriptors are closed then).
	err error
}

// ephemeralLow and ephemeralHigh bound the capture's port: the kernel's
// ephemeral range in a fresh network namespace (ip_local_port_range), as
// for the proxy's port (session's newEgressPlan): a port a command binds
// by number is unlikely to be there, and an ephemeral bind skips a port
// something listens on.
const ephemeralLow, ephemeralHigh = 32768, 60999

// pickPort is a random port of the ephemeral range that taken refuses
// (nil: none is).
func pickPort(taken func(uint16) bool) uint16 {
	for {
		p := uint16(ephemeralLow + rand.IntN(ephemeralHigh-ephemeralLow))
		if taken == nil || !taken(p) {
			return p
		}
	}
}

// prepareCapture installs the capture at a port of its choosing. When
// anything fails it undoes what it did and keeps why instead: direct
// connects then stay unroutable, and the run is told so (sendCapture).
func prepareCapture() *capture {
	c := &capture{stub: -1}
	c.fail(c.install(pickPort(nil)))
	return c
}

func (c *capture) install(port uint16) error {
	if err := c.listen(port); err != nil {
		return err
	}
	dns, err := stubSocket()
	if err != nil {
		return err
	}
	c.stub = dns
	v6 := len(c.listeners) == 2
	if err := captureRules(port, v6); err != nil {
		return err
	}
	if err := addLocalRoute(unix.AF_INET); err != nil {
		removeCaptureRules()
		return fmt.Errorf("capture: local route: %w", err)
	}
	if v6 {
		if err := addLocalRoute(unix.AF_INET6); err != nil {
			removeCaptureRules()
			return fmt.Errorf("capture: local IPv6 route: %w", err)
		}
	}
	return nil
}

// listen makes the transparent listeners at port.
func (c *capture) listen(port uint16) error {
	ln4, err := transparentListener(unix.AF_INET, port)
	if err != nil {
		return err
	}
	c.listeners, c.port = []int{ln4}, port
	// IPv6 is optional: a namespace without it has no ::1 to listen on,
	// and nothing to capture there either.
	if ln6, err := transparentListener(unix.AF_INET6, port); err == nil {
		c.listeners = append(c.listeners, ln6)
	}
	return nil
}

// fail records err (nil: nothing failed) and closes the capture's
// sockets.
func (c *capture) fail(err error) {
	if err == nil {
		return
	}
	c.err = err
	for _, fd := range append(c.listeners, c.stub) {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	c.listeners, c.stub = nil, -1
}

// moveOff moves the capture's listeners and TPROXY rules to another
// port when the run's proxy takes its port (proxy, and proxy+2 with
// socks): the proxy's port is in the command's environment and cannot
// move. One run in about 14,000 meets it. The stub and the routes name
// no port and stay.
func (c *capture) moveOff(proxy uint16, socks bool) {
	taken := func(p uint16) bool { return proxy != 0 && (p == proxy || socks && p == proxy+2) }
	if c.err != nil || !taken(c.port) {
		return
	}
	for _, fd := range c.listeners {
		unix.Close(fd)
	}
	c.listeners = nil
	removeCaptureRules()
	port := pickPort(taken)
	err := c.listen(port)
	if err == nil {
		err = captureRules(port, len(c.listeners) == 2)
	}
	c.fail(err)
}

// sendCapture hands the capture's sockets to the supervisor, or says why there
// is none.
func (h *helper) sendCapture(c *capture) {
	if c.err != nil {
		wire.Send(h.sock, wire.Message{Kind: wire.Capture, Error: c.err.Error(),
			Why: "the capture could not be installed in the sandbox's network namespace (" + publicerr.Reason(c.err) + ")"})
		h.mark("capture failed")
		return
	}
	fds := append(c.listeners, c.stub)
	h.check(125, wire.Send(h.sock, wire.Message{Kind: wire.Capture}, fds...))
	for _, fd := range fds {
		unix.Close(fd)
	}
	c.listeners, c.stub = nil, -1
	h.captured = true
	h.mark("capture sent")
}

// transparentListener is a listening TCP socket on the loopback address
// of family at port, marked transparent so TPROXY may hand it
// connections made to any address.
func transparentListener(family int, port uint16) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("capture: socket: %w", err)
	}
	var sa unix.Sockaddr
	if family == unix.AF_INET {
		err = unix.SetsockoptInt(fd, unix.SOL_IP, unix.IP_TRANSPARENT, 1)
		sa = &unix.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}}
	} else {
		if err = unix.SetsockoptInt(fd, unix.SOL_IPV6, unix.IPV6_V6ONLY, 1); err == nil {
			err = unix.SetsockoptInt(fd, unix.SOL_IPV6, unix.IPV6_TRANSPARENT, 1)
		}
		sa = &unix.SockaddrInet6{Port: int(port), Addr: [16]byte{15: 1}}
	}
	if err == nil {
		err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	}
	if err == nil {
		err = unix.Bind(fd, sa)
	}
	if err == nil {
		err = unix.Listen(fd, 4096)
	}
	if err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("capture: listener on port %d: %w", port, err)
	}
	return fd, nil
}

// stubSocket is the stub resolver's socket, 127.0.0.1:53 (UDP).
func stubSocket() (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("capture: stub socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: stubPort, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("capture: stub bind 127.0.0.1:%d: %w", stubPort, err)
	}
	return fd, nil
}

// captureTable is the namespace's one nf_tables table.
const captureTable = "sandboxd"

// captureRules loads the table:
//
//	table inet sandboxd {
//	  chain capture { type filter hook prerouting priority mangle;
//	    iif lo meta nfproto ipv4 meta l4proto tcp ip daddr & 255.0.0.0 != 127.0.0.0 tproxy ip to 127.0.0.1:PORT
//	    iif lo meta nfproto ipv6 meta l4proto tcp ip6 daddr != ::1 tproxy ip6 to [::1]:PORT }
//	  chain udp { type filter hook output priority filter;
//	    meta nfproto ipv4 meta l4proto udp ip daddr 127.0.0.1 udp dport 53 accept
//	    meta nfproto ipv4 meta l4proto udp ip saddr 127.0.0.1 udp sport 53 accept
//	    meta l4proto udp drop }
//	}
func captureRules(port uint16, v6 bool) error {
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("capture: nf_tables: %w", err)
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: captureTable})
	accept := nftables.ChainPolicyAccept
	pre := c.AddChain(&nftables.Chain{Name: "capture", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityMangle, Policy: &accept})
	out := c.AddChain(&nftables.Chain{Name: "udp", Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	portBytes := binaryutil.BigEndian.PutUint16(port)
	c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: concat(
		iifLoopback(), nfproto(unix.NFPROTO_IPV4), l4proto(unix.IPPROTO_TCP),
		[]expr.Any{
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{255, 0, 0, 0}, Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{127, 0, 0, 0}},
			&expr.Immediate{Register: 1, Data: []byte{127, 0, 0, 1}},
			&expr.Immediate{Register: 2, Data: portBytes},
			&expr.TProxy{Family: byte(nftables.TableFamilyIPv4), TableFamily: byte(nftables.TableFamilyINet), RegAddr: 1, RegPort: 2},
		})})
	if v6 {
		lo6 := make([]byte, 16)
		lo6[15] = 1
		c.AddRule(&nftables.Rule{Table: t, Chain: pre, Exprs: concat(
			iifLoopback(), nfproto(unix.NFPROTO_IPV6), l4proto(unix.IPPROTO_TCP),
			[]expr.Any{
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 24, Len: 16},
				&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: lo6},
				&expr.Immediate{Register: 1, Data: lo6},
				&expr.Immediate{Register: 2, Data: portBytes},
				&expr.TProxy{Family: byte(nftables.TableFamilyIPv6), TableFamily: byte(nftables.TableFamilyINet), RegAddr: 1, RegPort: 2},
			})})
	}
	stub := binaryutil.BigEndian.PutUint16(stubPort)
	for _, dir := range []struct{ addrOff, portOff uint32 }{{16, 2}, {12, 0}} { // daddr+dport, saddr+sport
		c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: concat(
			nfproto(unix.NFPROTO_IPV4), l4proto(unix.IPPROTO_UDP),
			[]expr.Any{
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: dir.addrOff, Len: 4},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{127, 0, 0, 1}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: dir.portOff, Len: 2},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: stub},
				&expr.Verdict{Kind: expr.VerdictAccept},
			})})
	}
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: concat(
		l4proto(unix.IPPROTO_UDP), []expr.Any{&expr.Verdict{Kind: expr.VerdictDrop}})})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("capture: nf_tables rules: %w", err)
	}
	return nil
}

// removeCaptureRules deletes the table again (best effort).
func removeCaptureRules() {
	if c, err := nftables.New(); err == nil {
		c.DelTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: captureTable})
		_ = c.Flush()
	}
}

func concat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func iifLoopback() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIF, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(loIndex)},
	}
}

func nfproto(p byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

func l4proto(p byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

// addLocalRoute adds "local default dev lo" to table local for family,
// with rtnetlink.
func addLocalRoute(family int) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	const size = unix.SizeofNlMsghdr + unix.SizeofRtMsg + unix.SizeofRtAttr + 4
	b := make([]byte, 0, size)
	ne := binary.NativeEndian
	b = ne.AppendUint32(b, size)
	b = ne.AppendUint16(b, unix.RTM_NEWROUTE)
	b = ne.AppendUint16(b, unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL)
	b = ne.AppendUint32(b, 1) // seq
	b = ne.AppendUint32(b, 0) // pid: the kernel's
	// struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags
	b = append(b, byte(family), 0, 0, 0, unix.RT_TABLE_LOCAL, unix.RTPROT_STATIC, unix.RT_SCOPE_HOST, unix.RTN_LOCAL)
	b = ne.AppendUint32(b, 0)
	b = ne.AppendUint16(b, unix.SizeofRtAttr+4)
	b = ne.AppendUint16(b, unix.RTA_OIF)
	b = ne.AppendUint32(b, loIndex)
	if err := unix.Sendto(fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return err
	}
	// One answer: struct nlmsghdr, then (NLMSG_ERROR) the error number.
	if n < unix.SizeofNlMsghdr+4 || ne.Uint16(buf[4:6]) != unix.NLMSG_ERROR {
		return errors.New("no acknowledgement")
	}
	if e := int32(ne.Uint32(buf[unix.SizeofNlMsghdr:])); e != 0 {
		return unix.Errno(-e)
	}
	return nil
}
