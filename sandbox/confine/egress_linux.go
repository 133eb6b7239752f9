package confine

import (
	"fmt"

	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// listenProxy makes the proxy's listening socket on the namespace's
// loopback and hands it to the supervisor, which accepts on it: the
// socket belongs to this network namespace whoever holds it, so no host
// port is opened and no other run can reach it.
func (h *helper) listenProxy(port uint16) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		h.fail(125, "sandbox: proxy socket: %v", err)
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	sa := &unix.SockaddrInet4{Port: int(port), Addr: [4]byte{127, 0, 0, 1}}
	if err := unix.Bind(fd, sa); err != nil {
		h.fail(125, "sandbox: proxy bind 127.0.0.1:%d: %v", port, err)
	}
	if err := unix.Listen(fd, 4096); err != nil {
		h.fail(125, "sandbox: proxy listen: %v", err)
	}
	h.check(125, wire.Send(h.sock, wire.Message{Kind: wire.Egress}, fd))
	unix.Close(fd)
	h.mark("proxy listening")
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
