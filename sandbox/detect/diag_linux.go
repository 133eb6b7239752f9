package detect

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// OpenDiag opens a NETLINK_SOCK_DIAG socket in the calling thread's
// network namespace; the namespace is the socket's for good, so the
// helper opens one inside and hands it over.
func OpenDiag() (int, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return -1, fmt.Errorf("detect: sock_diag: %w", err)
	}
	return fd, nil
}

// sockDiagByFamily is SOCK_DIAG_BY_FAMILY; tcpListen is TCP_LISTEN.
const (
	sockDiagByFamily = 20
	tcpListen        = 10
)

// ListensOn reports whether a TCP socket listens on port, on any local
// address, in the network namespace of the sock_diag socket fd. Asking
// only for listeners makes the kernel walk its listening hash alone,
// where reading /proc/<pid>/net/tcp walks every socket of the machine
// (milliseconds on a busy host, for every observed connect).
func ListensOn(fd int, port uint16) (bool, error) {
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		ok, err := listensOnFamily(fd, family, port)
		if ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

func listensOnFamily(fd int, family uint8, port uint16) (bool, error) {
	// nlmsghdr (16) + inet_diag_req_v2 (56).
	req := make([]byte, 16+56)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], sockDiagByFamily)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	req[16], req[17] = family, unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(req[20:], 1<<tcpListen)
	found := false
	err := dump(fd, req, func(data []byte) {
		// inet_diag_msg: family, state, timer, retrans, then the socket
		// id, whose first field is the source port (big endian).
		if len(data) >= 6 && binary.BigEndian.Uint16(data[4:6]) == port {
			found = true
		}
	})
	return found, err
}

// dump sends the sock_diag dump request req on fd and calls each with
// the payload of every answer until the dump is done.
func dump(fd int, req []byte, each func(data []byte)) error {
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("detect: sock_diag request: %w", err)
	}
	buf := make([]byte, 32<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("detect: sock_diag: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("detect: sock_diag: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case syscall.NLMSG_DONE:
				return nil
			case syscall.NLMSG_ERROR:
				return fmt.Errorf("detect: sock_diag: error reply")
			}
			each(m.Data)
		}
	}
}

// Diag is a sock_diag socket of one network namespace, shared by the
// goroutines that ask it: a netlink dump's replies go to whoever reads
// the socket next, so one question at a time.
type Diag struct {
	mu sync.Mutex
	fd int // -1: closed
}

// NewDiag takes over the sock_diag socket fd (nil for -1).
func NewDiag(fd int) *Diag {
	if fd < 0 {
		return nil
	}
	return &Diag{fd: fd}
}

// Close closes the socket; later questions fail.
func (d *Diag) Close() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd >= 0 {
		unix.Close(d.fd)
		d.fd = -1
	}
}

// ListensOn is ListensOn on d's namespace.
func (d *Diag) ListensOn(port uint16) (bool, error) {
	if d == nil {
		return false, errNoDiag
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return false, errNoDiag
	}
	return ListensOn(d.fd, port)
}

var errNoDiag = errors.New("detect: no sock_diag socket")

// UnixBound reports whether a unix socket of d's namespace is bound to
// the file whose device (the kernel's dev_t of its superblock, as
// mountinfo gives it) and inode are dev and ino (with anyDev, on any
// device). sock_diag names the file by the low 32 bits of its inode
// number only: for a larger ino, a socket found may be bound to another
// file whose number shares them.
func (d *Diag) UnixBound(major, minor uint32, ino uint64, anyDev bool) (bool, error) {
	if d == nil {
		return false, errNoDiag
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fd < 0 {
		return false, errNoDiag
	}
	// nlmsghdr (16) + unix_diag_req (24): every state, the file each is
	// bound to (UDIAG_SHOW_VFS).
	const udiagShowVFS, unixDiagVFS = 2, 1
	req := make([]byte, 16+24)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], sockDiagByFamily)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	req[16] = unix.AF_UNIX
	binary.NativeEndian.PutUint32(req[20:], 0xffffffff)
	binary.NativeEndian.PutUint32(req[28:], udiagShowVFS)
	binary.NativeEndian.PutUint64(req[32:], ^uint64(0)) // no cookie
	// The kernel's dev_t: major in the top 12 bits, minor in the low 20.
	want := major<<20 | minor&0xfffff
	found := false
	err := dump(d.fd, req, func(data []byte) {
		// unix_diag_msg (16 bytes), then attributes.
		for a := data[min(16, len(data)):]; len(a) >= 4; {
			l := int(binary.NativeEndian.Uint16(a[0:2]))
			if l < 4 || l > len(a) {
				break
			}
			if binary.NativeEndian.Uint16(a[2:4]) == unixDiagVFS && l >= 12 {
				vino, vdev := binary.NativeEndian.Uint32(a[4:8]), binary.NativeEndian.Uint32(a[8:12])
				if vino == uint32(ino) && (vdev == want || anyDev) {
					found = true
				}
			}
			a = a[min((l+3)&^3, len(a)):]
		}
	})
	return found, err
}
