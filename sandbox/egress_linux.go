package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandboxd/sandboxd/sandbox/detect"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// egress serves one attempt's proxy listener and connects, for the
// proxy, to the namespace's own loopback through sockets the helper
// makes. Its goroutines (Serve) end when stop is called.
type egress struct {
	spec   *Egress
	sock   int // the helper's control socket
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	served sync.WaitGroup
	// mu serializes socket requests: one is outstanding at a time, so
	// an answer is matched to its request by seq alone.
	mu      sync.Mutex
	seq     uint64
	answers chan socketAnswer
	// diag is the namespace's sock_diag socket (nil: none; the helper's
	// to close), which says whether anything listens on a port before
	// the helper is asked for a socket to connect there.
	diag atomic.Pointer[detect.Diag]
	// captured is set once the helper's capture is served; captureWhy
	// is why there is none, when the helper said so.
	captured   atomic.Bool
	captureWhy atomic.Pointer[string]
}

type socketAnswer struct {
	seq uint64
	fd  int // -1 with err
	err error
}

func newEgress(spec *Egress, sock int, log *slog.Logger) *egress {
	ctx, cancel := context.WithCancel(context.Background())
	return &egress{spec: spec, sock: sock, log: log, ctx: ctx, cancel: cancel, answers: make(chan socketAnswer, 1)}
}

// listens reports whether something may listen on port inside: true
// when it cannot tell.
func (e *egress) listens(port uint16) bool {
	d := e.diag.Load()
	if d == nil {
		return true
	}
	ok, err := d.ListensOn(port)
	return ok || err != nil
}

// listen takes one of the helper's listening sockets and serves it with
// serve.
func (e *egress) listen(fd int, serve func(context.Context, net.Listener, Dialer) error, what string) {
	f := os.NewFile(uintptr(fd), what+"-listener")
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		// Nothing serves the port: every connection to it is refused,
		// and there is no other way out.
		e.log.Debug("egress listener", "what", what, "err", err)
		return
	}
	e.serve(what, func() error {
		defer ln.Close()
		return serve(e.ctx, ln, e.dialInside)
	})
}

// capture takes the helper's capture sockets and serves them: the TCP
// listeners with spec.Capture, the stub's UDP socket with spec.DNS. On
// the helper's error it records why there is no capture; direct connects
// then stay unroutable, as without it.
func (e *egress) capture(m wire.Message, fds []int) {
	if m.Error != "" || len(fds) == 0 || e.spec.Capture == nil || e.spec.DNS == nil {
		for _, fd := range fds {
			unix.Close(fd)
		}
		if m.Error != "" {
			e.log.Warn("capture", "err", m.Error)
		}
		why := m.Why
		if why == "" {
			why = "no capture sockets"
		}
		e.captureWhy.Store(&why)
		return
	}
	for _, fd := range fds {
		typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
		f := os.NewFile(uintptr(fd), "capture")
		if err != nil {
			f.Close()
			continue
		}
		if typ == unix.SOCK_DGRAM {
			pc, err := net.FilePacketConn(f)
			f.Close()
			if err != nil {
				e.log.Debug("stub resolver socket", "err", err)
				continue
			}
			e.serve("stub resolver", func() error { return e.spec.DNS(e.ctx, pc) })
			continue
		}
		ln, err := net.FileListener(f)
		f.Close()
		if err != nil {
			e.log.Debug("capture listener", "err", err)
			continue
		}
		e.serve("capture", func() error { return e.spec.Capture(e.ctx, ln, e.dialInside) })
	}
	e.captured.Store(true)
}

// serve runs one of the attempt's servers until stop.
func (e *egress) serve(what string, f func() error) {
	e.served.Add(1)
	go func() {
		defer e.served.Done()
		if err := f(); err != nil && e.ctx.Err() == nil {
			e.log.Debug("egress "+what+" stopped", "err", err)
		}
	}()
}

// captureState says whether direct connects were captured, and if not
// why ("" when capture was never asked for or no answer came).
func (e *egress) captureState() (bool, string) {
	if e == nil {
		return false, ""
	}
	if p := e.captureWhy.Load(); p != nil {
		return false, *p
	}
	return e.captured.Load(), ""
}

// answer delivers the helper's answer to a socket request; a late one
// (its request gave up) is dropped.
func (e *egress) answer(m wire.Message, fds []int) []int {
	a := socketAnswer{seq: m.Seq, fd: -1}
	if len(fds) == 1 && m.Error == "" {
		a.fd, fds = fds[0], fds[1:]
	} else {
		a.err = fmt.Errorf("sandbox: no socket from the helper: %s", m.Error)
	}
	select {
	case e.answers <- a:
	default:
		if a.fd >= 0 {
			unix.Close(a.fd)
		}
	}
	return fds
}

// stop ends the attempt's proxy and waits for it.
func (e *egress) stop() {
	e.cancel()
	e.served.Wait()
}

// dialInside connects to addr on the namespace's loopback.
func (e *egress) dialInside(ctx context.Context, network, addr string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().IsLoopback() {
		return nil, fmt.Errorf("sandbox: inside dial %q: only the namespace's loopback", addr)
	}
	var family int
	var sa unix.Sockaddr
	if a := ap.Addr(); a.Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}
	} else {
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
	}
	if !e.listens(ap.Port()) {
		return nil, fmt.Errorf("sandbox: inside dial %s: %w", addr, unix.ECONNREFUSED)
	}
	fd, err := e.socket(ctx, family)
	if err != nil {
		return nil, err
	}
	if err := connectFD(ctx, fd, sa); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sandbox: inside dial %s: %w", addr, err)
	}
	f := os.NewFile(uintptr(fd), "inside")
	defer f.Close()
	return net.FileConn(f)
}

// socket asks the helper for an unconnected TCP socket of the namespace.
func (e *egress) socket(ctx context.Context, family int) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	if err := wire.Send(e.sock, wire.Message{Kind: wire.Socket, Family: family, Seq: e.seq}); err != nil {
		return -1, fmt.Errorf("sandbox: socket request: %w", err)
	}
	for {
		select {
		case a := <-e.answers:
			if a.seq != e.seq {
				if a.fd >= 0 {
					unix.Close(a.fd)
				}
				continue
			}
			return a.fd, a.err
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-e.ctx.Done():
			return -1, errors.New("sandbox: the attempt ended")
		}
	}
}

// connectFD connects a socket without blocking past ctx: a loopback
// connect normally completes at once, but a full backlog would make a
// blocking one wait for SYN retries.
func connectFD(ctx context.Context, fd int, sa unix.Sockaddr) error {
	if err := unix.SetNonblock(fd, true); err != nil {
		return err
	}
	err := unix.Connect(fd, sa)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINPROGRESS) {
		return err
	}
	for {
		ms := 100
		if dl, ok := ctx.Deadline(); ok {
			ms = min(ms, max(int(time.Until(dl).Milliseconds()), 1))
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, perr := unix.Poll(fds, ms)
		if perr != nil && !errors.Is(perr, unix.EINTR) {
			return perr
		}
		if n > 0 {
			soErr, gerr := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
			if gerr != nil {
				return gerr
			}
			if soErr != 0 {
				return unix.Errno(soErr)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// LoopbackListens reports whether anything listens on a TCP port of the
// caller's own network namespace (the host's, for the supervisor); true
// when it cannot tell, so the caller decides rather than refusing.
func LoopbackListens(port uint16) bool {
	fd, err := detect.OpenDiag()
	if err != nil {
		return true
	}
	defer unix.Close(fd)
	ok, err := detect.ListensOn(fd, port)
	return ok || err != nil
}
