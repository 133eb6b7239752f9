package netproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandboxd/sandboxd/netdest"
)

// copyBuf is the buffer for relays between connections that are not both TCP.
const copyBuf = 64 << 10

var errEarlyBytes = errors.New("netproxy: too many client bytes while waiting for a decision")

// serveState is one Serve call: its connections, so that all of them
// (hijacked tunnels and upstream connections too) close when it ends.
type serveState struct {
	p *Proxy
	// ctx ends with the Serve call: what a request's work (its decision,
	// its dial) stops on. A request's own context also ends when the
	// client half-closes, which must not refuse it.
	ctx      context.Context
	inside   Dialer
	selfPort uint16 // the listener's own port: never dialled inside (a loop into the proxy)

	mu     sync.Mutex // guards conns, closed
	conns  map[io.Closer]struct{}
	closed bool
}

func newServeState(ctx context.Context, p *Proxy, ln net.Listener, inside Dialer) *serveState {
	s := &serveState{p: p, ctx: ctx, inside: inside, conns: make(map[io.Closer]struct{})}
	if a, ok := ln.Addr().(*net.TCPAddr); ok && a.Port > 0 && a.Port < 1<<16 {
		s.selfPort = uint16(a.Port)
	}
	return s
}

// track registers c; once the Serve has ended it closes c instead.
func (s *serveState) track(c io.Closer) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = c.Close()
		return false
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	return true
}

func (s *serveState) untrack(c io.Closer) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

func (s *serveState) closeAll() {
	s.mu.Lock()
	s.closed = true
	all := make([]io.Closer, 0, len(s.conns))
	for c := range s.conns {
		all = append(all, c)
	}
	s.mu.Unlock()
	for _, c := range all {
		_ = c.Close()
	}
}

// limitListener enforces MaxConns and wraps every accepted connection.
type limitListener struct {
	net.Listener
	s *serveState
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.s.p.active.Add(1) > int64(l.s.p.lim.MaxConns) {
			l.s.p.active.Add(-1)
			_ = c.Close()
			l.s.p.stats.count("deny/limit")
			continue
		}
		cc := newClientConn(l.s, c)
		if !l.s.track(cc) {
			return nil, net.ErrClosed
		}
		return cc, nil
	}
}

// clientConn is a connection from the sandboxed command. It counts the
// bytes read while a decision is pending, feeds the Host tap, and,
// once it carries a tunnel, relays with relay.
type clientConn struct {
	conn   net.Conn
	tcp    *net.TCPConn // conn when it is TCP (a tunnel's relay), else nil
	s      *serveState
	tap    *hostTap
	parked atomic.Bool
	early  atomic.Int64
	tun    atomic.Pointer[tunnel]
	once   sync.Once
	// captured is where a captured connection was made (ServeCapture);
	// set before its requests are served.
	captured netdest.Dest
}

func newClientConn(s *serveState, c net.Conn) *clientConn {
	cc := &clientConn{conn: c, s: s}
	cc.tcp, _ = c.(*net.TCPConn)
	cc.tap = newHostTap(s.p.log, s.p.lim.MaxHeaderBytes)
	return cc
}

func (c *clientConn) Read(b []byte) (int, error) {
	n, err := c.conn.Read(b)
	if n > 0 {
		c.tap.write(b[:n])
		if c.parked.Load() && c.early.Add(int64(n)) > int64(c.s.p.lim.EarlyBytes) {
			c.s.p.stats.count("deny/early-bytes")
			_ = c.Close()
			return n, errEarlyBytes
		}
		if t := c.tun.Load(); t != nil {
			t.touch()
		}
	}
	return n, err
}

func (c *clientConn) Write(b []byte) (int, error) {
	n, err := c.conn.Write(b)
	if t := c.tun.Load(); t != nil && n > 0 {
		t.touch()
	}
	return n, err
}

// ReadFrom relays origin→client, counting each write.
func (c *clientConn) ReadFrom(r io.Reader) (int64, error) {
	if u, ok := r.(*upstreamConn); ok && u.tcp != nil && c.tcp != nil {
		return relay(c.tcp, u.tcp, &c.s.p.stats.down, c.tun.Load())
	}
	return io.CopyBuffer(writerOnly{c}, r, make([]byte, copyBuf))
}

func (c *clientConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		c.tap.close()
		if t := c.tun.Load(); t != nil {
			t.stop()
		}
		c.s.untrack(c)
		c.s.p.active.Add(-1)
		err = c.conn.Close()
	})
	return err
}

func (c *clientConn) CloseRead() error  { return closeRead(c.conn) }
func (c *clientConn) CloseWrite() error { return closeWrite(c.conn, c) }

func (c *clientConn) LocalAddr() net.Addr                { return c.conn.LocalAddr() }
func (c *clientConn) RemoteAddr() net.Addr               { return c.conn.RemoteAddr() }
func (c *clientConn) SetDeadline(t time.Time) error      { return c.conn.SetDeadline(t) }
func (c *clientConn) SetReadDeadline(t time.Time) error  { return c.conn.SetReadDeadline(t) }
func (c *clientConn) SetWriteDeadline(t time.Time) error { return c.conn.SetWriteDeadline(t) }

// upstreamConn is a connection the permit dialer made. In a tunnel it
// counts bytes (plain HTTP counts bodies instead).
type upstreamConn struct {
	conn   net.Conn
	tcp    *net.TCPConn
	s      *serveState
	tun    atomic.Pointer[tunnel] // nil for plain HTTP (until an upgrade)
	once   sync.Once
	closed atomic.Bool
}

func newUpstreamConn(s *serveState, c net.Conn) *upstreamConn {
	u := &upstreamConn{conn: c, s: s}
	u.tcp, _ = c.(*net.TCPConn)
	return u
}

func (u *upstreamConn) Read(b []byte) (int, error) {
	n, err := u.conn.Read(b)
	if t := u.tun.Load(); t != nil && n > 0 {
		u.s.p.stats.down.Add(int64(n))
		t.touch()
	}
	return n, err
}

// Write counts only what was written as a tunnel: the tunnel is looked
// up before the write, so a request head whose write returns after the
// origin has already switched protocols is not counted as tunnel bytes.
func (u *upstreamConn) Write(b []byte) (int, error) {
	t := u.tun.Load()
	n, err := u.conn.Write(b)
	if t != nil && n > 0 {
		u.s.p.stats.up.Add(int64(n))
		t.touch()
	}
	return n, err
}

// ReadFrom relays client→origin, counting each write.
func (u *upstreamConn) ReadFrom(r io.Reader) (int64, error) {
	if c, ok := r.(*clientConn); ok && c.tcp != nil && u.tcp != nil && u.tun.Load() != nil {
		return relay(u.tcp, c.tcp, &u.s.p.stats.up, u.tun.Load())
	}
	return io.CopyBuffer(writerOnly{u}, r, make([]byte, copyBuf))
}

func (u *upstreamConn) Close() error {
	err := net.ErrClosed
	u.once.Do(func() {
		u.closed.Store(true)
		if t := u.tun.Load(); t != nil {
			t.stop()
		}
		u.s.untrack(u)
		err = u.conn.Close()
	})
	return err
}

func (u *upstreamConn) CloseRead() error  { return closeRead(u.conn) }
func (u *upstreamConn) CloseWrite() error { return closeWrite(u.conn, u) }

func (u *upstreamConn) LocalAddr() net.Addr                { return u.conn.LocalAddr() }
func (u *upstreamConn) RemoteAddr() net.Addr               { return u.conn.RemoteAddr() }
func (u *upstreamConn) SetDeadline(t time.Time) error      { return u.conn.SetDeadline(t) }
func (u *upstreamConn) SetReadDeadline(t time.Time) error  { return u.conn.SetReadDeadline(t) }
func (u *upstreamConn) SetWriteDeadline(t time.Time) error { return u.conn.SetWriteDeadline(t) }

// closeRead half-closes when the connection can; otherwise there is
// nothing to stop reading (the full close comes after both copies).
func closeRead(c net.Conn) error {
	if h, ok := c.(interface{ CloseRead() error }); ok {
		return h.CloseRead()
	}
	return nil
}

// closeWrite half-closes when it can, else closes whole, so that the
// peer always sees the end of the stream.
func closeWrite(c net.Conn, whole io.Closer) error {
	if h, ok := c.(interface{ CloseWrite() error }); ok {
		return h.CloseWrite()
	}
	return whole.Close()
}

// writerOnly hides ReadFrom so io.CopyBuffer does not recurse into it.
type writerOnly struct{ io.Writer }

// Relay buffers: a quiet tunnel reads into a small buffer of its own; one
// that fills it is streaming, and borrows a large pooled buffer until its
// reads come back small again. A thousand idle tunnels hold 16 KiB each,
// a streaming one 1 MiB while it streams, and big reads keep the syscall
// count per byte low. Measured here it relays faster than splice(2)
// through Go's 64 KiB pipes (see docs/BENCHMARKS.md).
const (
	smallRelay = 16 << 10
	bigRelay   = 1 << 20
)

var bigRelays = sync.Pool{New: func() any { b := make([]byte, bigRelay); return &b }}

// relay copies src to dst until src's EOF, counting each write and
// touching the idle watch.
func relay(dst io.Writer, src io.Reader, n *atomic.Int64, t *tunnel) (int64, error) {
	small := make([]byte, smallRelay)
	var big *[]byte
	defer func() {
		if big != nil {
			bigRelays.Put(big)
		}
	}()
	var total int64
	for {
		buf := small
		if big != nil {
			buf = *big
		}
		m, rerr := src.Read(buf)
		if m > 0 {
			w, werr := dst.Write(buf[:m])
			total += int64(w)
			n.Add(int64(w))
			if t != nil {
				t.touch()
			}
			if werr != nil {
				return total, werr
			}
		}
		switch {
		case big == nil && m == len(small):
			big = bigRelays.Get().(*[]byte)
		case big != nil && m < bigRelay/16:
			bigRelays.Put(big)
			big = nil
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
	}
}

// tunnel watches a CONNECT tunnel for idleness: bytes in either
// direction keep both sides alive (each relayed read touches it).
type tunnel struct {
	c    *clientConn
	u    *upstreamConn
	idle time.Duration
	act  atomic.Int64

	mu         sync.Mutex // guards timer, last, lastChange, done
	timer      *time.Timer
	last       uint64
	lastChange time.Time
	done       bool
}

func startTunnel(c *clientConn, u *upstreamConn, idle time.Duration) *tunnel {
	t := &tunnel{c: c, u: u, idle: idle, lastChange: time.Now()}
	t.mu.Lock()
	t.timer = time.AfterFunc(t.interval(), t.check)
	t.mu.Unlock()
	return t
}

func (t *tunnel) interval() time.Duration {
	return max(t.idle/4, 10*time.Millisecond)
}

func (t *tunnel) touch() { t.act.Add(1) }

func (t *tunnel) check() {
	defer func() {
		if r := recover(); r != nil {
			t.c.s.p.log.Warn("netproxy: idle watch panicked", "panic", r)
			_ = t.c.Close()
			_ = t.u.Close()
		}
	}()
	a := uint64(t.act.Load())
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return
	}
	now := time.Now()
	if a != t.last {
		t.last, t.lastChange = a, now
	}
	idle := now.Sub(t.lastChange) >= t.idle
	if !idle {
		t.timer.Reset(t.interval())
	}
	t.mu.Unlock()
	if idle {
		t.c.s.p.log.Debug("netproxy: closing an idle tunnel", "idle", t.idle)
		_ = t.c.Close()
		_ = t.u.Close()
	}
}

func (t *tunnel) stop() {
	t.mu.Lock()
	t.done = true
	if t.timer != nil {
		t.timer.Stop()
	}
	t.mu.Unlock()
}
