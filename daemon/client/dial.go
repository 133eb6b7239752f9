package client

import (
	"context"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// dial connects to socket and checks, by the kernel's word on the peer
// (SO_PEERCRED), that root listens there: whatever the path's checks
// found, nothing of this user's goes to a listener of another user's.
func dial(ctx context.Context, socket string) (*net.UnixConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, err
	}
	uc := conn.(*net.UnixConn)
	raw, err := uc.SyscallConn()
	var cred *unix.Ucred
	if err == nil {
		raw.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	}
	if err != nil || cred.Uid != 0 {
		uc.Close()
		return nil, untrusted("the daemon's socket", socket, "the process listening on it is not root's")
	}
	return uc, nil
}

// PassingConn is a connection that passes fd with its first write (the
// request's head), so the daemon has it before its handler runs.
type PassingConn struct {
	*net.UnixConn
	mu   sync.Mutex
	fd   *os.File
	sent bool
}

// NewPassingConn passes fd with conn's first write.
func NewPassingConn(conn *net.UnixConn, fd *os.File) *PassingConn {
	return &PassingConn{UnixConn: conn, fd: fd}
}

func (c *PassingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.sent {
		c.mu.Unlock()
		return c.UnixConn.Write(p)
	}
	c.sent = true
	c.mu.Unlock()
	n, _, err := c.WriteMsgUnix(p, unix.UnixRights(int(c.fd.Fd())), nil)
	if err == nil && n < len(p) {
		m, err := c.UnixConn.Write(p[n:])
		return n + m, err
	}
	return n, err
}

// Dial connects to socket, checked as dial checks it, and passes tty
// (nil: none) with the first write: package daemon's HTTP client dials
// with it.
func Dial(ctx context.Context, socket string, tty *os.File) (net.Conn, error) {
	conn, err := dial(ctx, socket)
	if err != nil || tty == nil {
		return conn, err
	}
	return NewPassingConn(conn, tty), nil
}
