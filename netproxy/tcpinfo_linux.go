package netproxy

import (
	"net"

	"golang.org/x/sys/unix"
)

// tcpActivity is the kernel's count of bytes received and acknowledged
// on c, which moves while a splice round is still in progress.
func tcpActivity(c *net.TCPConn) uint64 {
	if c == nil {
		return 0
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	var v uint64
	_ = raw.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err == nil {
			v = info.Bytes_received + info.Bytes_acked
		}
	})
	return v
}
