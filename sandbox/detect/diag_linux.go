package detect

import (
	"encoding/binary"
	"fmt"
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
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return false, fmt.Errorf("detect: sock_diag request: %w", err)
	}
	found := false
	buf := make([]byte, 32<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return false, fmt.Errorf("detect: sock_diag: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return false, fmt.Errorf("detect: sock_diag: %w", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case syscall.NLMSG_DONE:
				return found, nil
			case syscall.NLMSG_ERROR:
				return false, fmt.Errorf("detect: sock_diag: error reply")
			}
			// inet_diag_msg: family, state, timer, retrans, then the
			// socket id, whose first field is the source port (big endian).
			if len(m.Data) >= 6 && binary.BigEndian.Uint16(m.Data[4:6]) == port {
				found = true
			}
		}
	}
}
