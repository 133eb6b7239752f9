package confine

import (
	"fmt"

	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// listenProxy makes the proxy's listening socket on the namespace's
// loopback (and, with socks, the SOCKS5 endpoint's at port+2) and hands
// them to the supervisor, which accepts on them: a socket belongs to this
// network namespace whoever holds it, so no host port is opened and no
// other run can reach it.
func (h *helper) listenProxy(port uint16, socks bool) {
	fds := []int{h.listenLoopback(port, "proxy")}
	if socks {
		fds = append(fds, h.listenLoopback(port+2, "socks"))
	}
	h.check(125, wire.Send(h.sock, wire.Message{Kind: wire.Egress}, fds...))
	for _, fd := range fds {
		unix.Close(fd)
	}
	h.mark("proxy listening")
}

// listenLoopback is a listening TCP socket on 127.0.0.1:port.
func (h *helper) listenLoopback(port uint16, what string) int {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		h.fail(125, "sandbox: %s socket: %v", what, err)
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	sa := &unix.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Bind(fd, sa); err != nil {
		h.fail(125, "sandbox: %s bind 127.0.0.1:%d: %v", what, port, err)
	}
	if err := unix.Listen(fd, 4096); err != nil {
		h.fail(125, "sandbox: %s listen: %v", what, err)
	}
	return fd
}

// answerSocket answers a Socket request with a fresh, unconnected TCP
// socket of this namespace (made by the helper, so it is the
// namespace's), or says why not.
func (h *helper) answerSocket(m wire.Message) {
	if m.Family != unix.AF_INET && m.Family != unix.AF_INET6 {
		wire.Send(h.sock, wire.Message{Kind: wire.Socket, Seq: m.Seq, Error: "unknown family"})
		return
	}
	fd, err := unix.Socket(m.Family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		wire.Send(h.sock, wire.Message{Kind: wire.Socket, Seq: m.Seq, Error: fmt.Sprint(err)})
		return
	}
	wire.Send(h.sock, wire.Message{Kind: wire.Socket, Seq: m.Seq, Family: m.Family}, fd)
	unix.Close(fd)
}
