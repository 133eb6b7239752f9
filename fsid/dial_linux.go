package fsid

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Dialer opens connections for a caller as that caller: each socket is
// created on a thread with the caller's file-system identity, so the
// kernel records the caller as its owner (sk_uid, which nftables' meta
// skuid and /proc/net/tcp show, and the socket file's credentials,
// which iptables' owner match reads). A host firewall's owner rules
// then treat the connection as the caller's, not root's. Only the
// socket(2) runs with those ids; connect and everything after it may
// run on any thread, since they never look at the thread's ids again.
//
// The zero Dialer is usable once ID is set.
type Dialer struct {
	// ID is the caller the connections belong to.
	ID ID
	// Timeout bounds one DialContext, lookups included (0: the context's
	// deadline only).
	Timeout time.Duration
	// Check, if set, is asked about every address before a socket is
	// made for it; an error refuses that address (DialContext returns it
	// if no other address is left).
	Check func(netip.AddrPort) error
	// Resolver looks names up (nil: Go's own resolver, whose queries are
	// dialled by this Dialer too, so they also leave as the caller).
	Resolver *net.Resolver
}

// DialContext connects to address on network ("tcp", "tcp4", "tcp6",
// "udp", "udp4" or "udp6") as the caller, trying the addresses a name
// resolves to in order, and returns a *net.TCPConn or *net.UDPConn.
func (d Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	sotype, family, err := socketKind(network)
	if err != nil {
		return nil, err
	}
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	addrs, err := d.resolve(ctx, family, address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	var last error
	for i, ap := range addrs {
		if err := ctx.Err(); err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		if d.Check != nil {
			if last = d.Check(ap); last != nil {
				continue
			}
		}
		actx, cancel := partialDeadline(ctx, len(addrs)-i)
		c, err := dialOne(actx, d.ID, sotype, ap)
		cancel()
		if err == nil {
			return c, nil
		}
		last = &net.OpError{Op: "dial", Net: network, Addr: net.TCPAddrFromAddrPort(ap), Err: err}
	}
	return nil, last
}

// socketKind maps a network name to a socket type and an address family
// ("ip", "ip4" or "ip6", as Resolver.LookupNetIP takes it).
func socketKind(network string) (sotype int, family string, err error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
		sotype = unix.SOCK_STREAM
	case "udp", "udp4", "udp6":
		sotype = unix.SOCK_DGRAM
	default:
		return 0, "", fmt.Errorf("fsid: dial: network %q: %w", network, net.UnknownNetworkError(network))
	}
	return sotype, "ip" + network[3:], nil
}

// resolve turns address into the addresses to try, of family's kind.
func (d Dialer) resolve(ctx context.Context, family, address string) ([]netip.AddrPort, error) {
	host, service, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	r := d.Resolver
	if r == nil {
		// The resolver's own dials name servers by address, so this
		// Dialer never resolves for itself.
		r = &net.Resolver{PreferGo: true, Dial: Dialer{ID: d.ID, Check: d.Check}.DialContext}
	}
	port, err := strconv.ParseUint(service, 10, 16)
	if err != nil {
		p, lerr := r.LookupPort(ctx, "tcp", service)
		if lerr != nil {
			return nil, lerr
		}
		port = uint64(p)
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if ips, err = r.LookupNetIP(ctx, family, host); err != nil {
		return nil, err
	}
	var out []netip.AddrPort
	for _, ip := range ips {
		ip = ip.Unmap()
		if (family == "ip4" && !ip.Is4()) || (family == "ip6" && !ip.Is6()) {
			continue
		}
		out = append(out, netip.AddrPortFrom(ip, uint16(port)))
	}
	if len(out) == 0 {
		return nil, &net.AddrError{Err: "no suitable address", Addr: host}
	}
	return out, nil
}

// partialDeadline gives one of left addresses its share of the time
// ctx has (at least two seconds), as net.Dialer does, so that one
// address that never answers leaves time for the next.
func partialDeadline(ctx context.Context, left int) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok || left <= 1 {
		return context.WithCancel(ctx)
	}
	share := time.Until(dl) / time.Duration(left)
	if share < 2*time.Second {
		share = 2 * time.Second
	}
	return context.WithTimeout(ctx, share)
}

// dialOne makes one socket as id and connects it to ap.
func dialOne(ctx context.Context, id ID, sotype int, ap netip.AddrPort) (net.Conn, error) {
	domain, sa := sockaddr(ap)
	var fd int
	// The ids without the umask: a socket is no file on disk, and a
	// file-system context of the thread's own (unshare) is not free.
	err := onThread(func() error {
		if err := become(id, false); err != nil {
			return err
		}
		var err error
		fd, err = unix.Socket(domain, sotype|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("fsid: socket: %w", os.NewSyscallError("socket", err))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = unix.Connect(fd, sa)
	if err != nil && !errors.Is(err, unix.EINPROGRESS) && !errors.Is(err, unix.EINTR) {
		unix.Close(fd)
		return nil, os.NewSyscallError("connect", err)
	}
	// A non-blocking descriptor gives a File the runtime's poller
	// watches: waiting for the connect parks the goroutine, not a thread.
	f := os.NewFile(uintptr(fd), "fsid-dial")
	defer f.Close() // net.FileConn holds a duplicate
	if err != nil {
		if err := waitConnected(ctx, f); err != nil {
			return nil, err
		}
	}
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetKeepAlive(true) // as net.Dialer's default: a dead peer is found
	}
	return c, nil
}

// sockaddr is ap as the socket calls take it, and its family.
func sockaddr(ap netip.AddrPort) (int, unix.Sockaddr) {
	a := ap.Addr()
	if a.Is4() {
		return unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}
	}
	sa := &unix.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
	if z := a.Zone(); z != "" {
		if ifi, err := net.InterfaceByName(z); err == nil {
			sa.ZoneId = uint32(ifi.Index)
		} else if n, err := strconv.ParseUint(z, 10, 32); err == nil {
			sa.ZoneId = uint32(n)
		}
	}
	return unix.AF_INET6, sa
}

// waitConnected waits, through the runtime's poller, until f's connect
// in progress ends, ctx is done or its deadline passes.
func waitConnected(ctx context.Context, f *os.File) error {
	if dl, ok := ctx.Deadline(); ok {
		f.SetWriteDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { f.SetWriteDeadline(time.Unix(1, 0)) })
	defer stop()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var cerr error
	werr := rc.Write(func(fd uintptr) bool {
		n, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		switch {
		case err != nil:
			cerr = os.NewSyscallError("getsockopt", err)
		case n != 0:
			if e := unix.Errno(n); e == unix.EINPROGRESS || e == unix.EALREADY || e == unix.EINTR {
				return false
			}
			cerr = os.NewSyscallError("connect", unix.Errno(n))
		default:
			// No error yet: connected once the peer has a name.
			if _, err := unix.Getpeername(int(fd)); err != nil {
				return false
			}
		}
		return true
	})
	if werr != nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		if errors.Is(werr, os.ErrDeadlineExceeded) {
			return context.DeadlineExceeded
		}
		return werr
	}
	return cerr
}
