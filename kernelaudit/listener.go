package kernelaudit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Listener reads the audit multicast group (every record the kernel logs,
// whoever else listens).
type Listener struct {
	// f is the socket in Go's poller, so Close wakes a blocked Next.
	f   *os.File
	buf []byte
	// pending holds records of the last datagram not yet returned.
	pending []record
}

type record struct {
	typ  int
	text string
}

// rcvBuf is the receive buffer: the kernel drops, rather than throttles,
// records that do not fit.
const rcvBuf = 32 << 20

// Listen joins the audit multicast group.
func Listen() (*Listener, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_AUDIT)
	if err != nil {
		return nil, fmt.Errorf("kernelaudit: socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvBuf); err != nil {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, rcvBuf)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1}); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EPERM) {
			return nil, ErrPermission
		}
		return nil, fmt.Errorf("kernelaudit: join multicast: %w", err)
	}
	return &Listener{f: os.NewFile(uintptr(fd), "audit-multicast"), buf: make([]byte, 1<<16)}, nil
}

// ErrClosed is returned by Next after Close.
var ErrClosed = errors.New("kernelaudit: listener closed")

// Next returns the next record's type and text. ENOBUFS from the kernel
// (records were dropped) is returned as ErrOverrun; reading can go on.
func (l *Listener) Next() (int, string, error) {
	for len(l.pending) == 0 {
		n, err := l.f.Read(l.buf)
		switch {
		case errors.Is(err, unix.ENOBUFS):
			return 0, "", ErrOverrun
		case errors.Is(err, os.ErrClosed):
			return 0, "", ErrClosed
		case err != nil:
			return 0, "", fmt.Errorf("kernelaudit: receive: %w", err)
		case n == 0:
			return 0, "", ErrClosed
		}
		l.pending = splitDatagram(l.buf[:n])
	}
	r := l.pending[0]
	l.pending = l.pending[1:]
	return r.typ, r.text, nil
}

// splitDatagram splits a datagram into audit records. Audit messages'
// lengths are not padded to the netlink alignment, which
// syscall.ParseNetlinkMessage rejects, so this reads the headers itself.
func splitDatagram(b []byte) []record {
	var out []record
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b[0:4]))
		typ := int(binary.NativeEndian.Uint16(b[4:6]))
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			l = len(b) // a truncated last record: take what there is
		}
		out = append(out, record{typ, string(trimNUL(b[unix.NLMSG_HDRLEN:l]))})
		next := (l + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if next >= len(b) {
			break
		}
		b = b[next:]
	}
	return out
}

// ErrOverrun means the socket's buffer overflowed and records were lost.
var ErrOverrun = errors.New("kernelaudit: records were lost (receive buffer overrun)")

// Close stops the listener; a blocked Next returns ErrClosed.
func (l *Listener) Close() error { return l.f.Close() }

func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}
