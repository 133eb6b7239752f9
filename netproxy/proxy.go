package netproxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Scope says how long a decision lasts.
type Scope string

// Scopes.
const (
	// ScopeRun keeps a destination's final verdict for the proxy's life
	// (one run): one Decide per destination, one Use per connection.
	ScopeRun Scope = "run"
	// ScopeConnection decides every connection on its own.
	ScopeConnection Scope = "connection"
)

// Resolver looks names up. *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer dials one address ("ip:port").
type Dialer func(ctx context.Context, network, addr string) (net.Conn, error)

// Limits bound what one client can hold. Zero fields take the defaults.
type Limits struct {
	HeaderTimeout  time.Duration // reading a request's headers (default 10s)
	MaxHeaderBytes int           // request line + headers (default 32 KiB)
	MaxConns       int           // client connections open at once for this proxy, every way in together (default 2048); beyond it a new connection is closed at once
	MaxDests       int           // distinct destinations one run may ask about (default 4096); beyond it a new one is refused undecided
	IdleTimeout    time.Duration // a kept-alive client connection between requests (default 60s)
	TunnelIdle     time.Duration // a tunnel with no bytes in either direction (default 10m)
	DialTimeout    time.Duration // upstream connect (default 15s)
	Hold           time.Duration // longest a connection waits for a decision (default 300s)
	EarlyBytes     int           // client bytes read while parked, a backstop: net/http reads only its 4 KiB buffer then (default 64 KiB; beyond it the connection is closed)
}

func (l Limits) withDefaults() Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	def(&l.HeaderTimeout, 10*time.Second)
	defInt(&l.MaxHeaderBytes, 32<<10)
	defInt(&l.MaxConns, 2048)
	defInt(&l.MaxDests, 4096)
	def(&l.IdleTimeout, 60*time.Second)
	def(&l.TunnelIdle, 10*time.Minute)
	def(&l.DialTimeout, 15*time.Second)
	def(&l.Hold, 300*time.Second)
	defInt(&l.EarlyBytes, 64<<10)
	return l
}

// Config is everything a Proxy depends on.
type Config struct {
	// Decider decides destinations (required).
	Decider Decider
	// Token is the run's credential (required). Clients authenticate
	// with Proxy-Authorization: Basic base64("sandboxd:"+Token).
	Token string
	// Resolver looks up allowed names; nil is the host's resolver
	// (/etc/hosts included): &net.Resolver{}, or, when Dial is set, Go's
	// own resolver whose queries Dial makes.
	Resolver Resolver
	// Dial makes every connection the proxy opens to the network: the
	// upstream dials (to one checked address, "tcp" and an IP:port) and
	// the default Resolver's queries. A daemon gives it the caller's
	// identity, so that a host firewall sees the caller's connections as
	// the caller's (fsid.Dialer). nil is a net.Dialer's.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Reserved reports sandboxd's own listeners: never dialled whatever
	// the decider says (403, source "hard-deny"). nil reserves nothing.
	Reserved func(netip.AddrPort) bool
	// Scope is how long a decision lasts; "" is ScopeRun.
	Scope Scope
	// Limits bound what clients can hold.
	Limits Limits
	// Log receives debug and warning records; nil discards.
	Log *slog.Logger
	// StubNames bounds the names the stub resolver gives an address
	// (ServeDNS); 0 is DefaultStubNames.
	StubNames int
}

// DefaultStubNames is how many names the stub resolver gives an address
// by default: far more than a build or test run asks for, and a bound
// on what a command can make the supervisor hold (a name takes up to
// about 300 bytes).
const DefaultStubNames = 16384

// ErrClosed is returned by Serve once the Proxy is closed.
var ErrClosed = errors.New("netproxy: proxy closed")

// Proxy is one run's egress proxy. Its methods may be called from many
// goroutines.
type Proxy struct {
	cfg      Config
	lim      Limits
	log      *slog.Logger
	resolver Resolver
	wantAuth []byte // "sandboxd:"+Token, compared in constant time
	tr       *http.Transport

	// base ends at Close; decisions and Serves derive from it.
	base   context.Context
	cancel context.CancelFunc

	mu sync.Mutex // guards cache, closed
	// cache holds ScopeRun decisions by Dest.String(), pending or done.
	cache  map[string]*entry
	closed bool

	serving sync.WaitGroup // running Serve calls, waited for by Close
	// deciding counts decisions in flight (they outlive the connection
	// that started them); Close cancels and waits for them, so no
	// decider call runs after it returns.
	deciding sync.WaitGroup
	stats    stats
	// stub is the names the stub resolver answered, shared by ServeDNS
	// and ServeCapture.
	stub *stubNames
	// active counts client connections open on every listener (the
	// proxy, SOCKS5, capture): MaxConns bounds them together.
	active atomic.Int64
	// dests are the destinations asked about (under mu), at most
	// MaxDestinations.
	dests map[string]struct{}
}

// stats are the counters behind Counters.
type stats struct {
	mu    sync.Mutex // guards conns and byVia
	conns map[string]int64
	byVia map[string]int64

	up, down  atomic.Int64
	waitNS    atomic.Int64
	decisions atomic.Int64
	dns       atomic.Int64
}

func (s *stats) count(key string) {
	s.mu.Lock()
	s.conns[key]++
	s.mu.Unlock()
}

// countVia counts one connection decided for its destination, by
// decision and the way it came in.
func (s *stats) countVia(decision string, via Via) {
	s.mu.Lock()
	if s.byVia == nil {
		s.byVia = map[string]int64{}
	}
	s.byVia[decision+"/"+string(via)]++
	s.mu.Unlock()
}

// Counters is a snapshot of what a Proxy did.
type Counters struct {
	Connections        map[string]int64 // by "decision/source", e.g. "allow/policy", "deny/hard-deny", "allow/inside", "deny/auth", "deny/malformed"
	ByVia              map[string]int64 // connections decided for a destination, by "decision/via", e.g. "allow/connect", "deny/capture"
	BytesUp, BytesDown int64            // client→origin, origin→client (tunnels and plain HTTP bodies)
	DecisionWait       time.Duration    // total time connections were parked waiting for Decide
	Decisions          int64            // Decide calls that were made (not cache hits), whoever decided
	DNSAnswers         int64            // queries the stub resolver answered
}

// New builds a Proxy. It opens nothing; Serve does.
func New(cfg Config) (*Proxy, error) {
	if cfg.Decider == nil {
		return nil, errors.New("netproxy: new: a Decider is required")
	}
	if cfg.Token == "" {
		return nil, errors.New("netproxy: new: a Token is required")
	}
	switch cfg.Scope {
	case "":
		cfg.Scope = ScopeRun
	case ScopeRun, ScopeConnection:
	default:
		return nil, fmt.Errorf("netproxy: new: unknown scope %q", cfg.Scope)
	}
	p := &Proxy{
		cfg:      cfg,
		lim:      cfg.Limits.withDefaults(),
		log:      cfg.Log,
		resolver: cfg.Resolver,
		wantAuth: []byte("sandboxd:" + cfg.Token),
		cache:    make(map[string]*entry),
		stats:    stats{conns: make(map[string]int64)},
		stub:     newStubNames(cfg.StubNames),
		dests:    make(map[string]struct{}),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.resolver == nil {
		// With Dial set, the lookups go through it too; the host's C
		// library resolver would ask with the process's identity.
		p.resolver = &net.Resolver{PreferGo: cfg.Dial != nil, Dial: cfg.Dial}
	}
	if p.cfg.Dial == nil {
		p.cfg.Dial = (&net.Dialer{}).DialContext
	}
	p.base, p.cancel = context.WithCancel(context.Background())
	p.tr = p.newTransport()
	return p, nil
}

// newTransport is the plain-HTTP upstream transport: no proxy from the
// environment, no TLS, no HTTP/2, no connection reuse (every request
// dials with its own permit), and a dialer that refuses without one.
func (p *Proxy) newTransport() *http.Transport {
	var protos http.Protocols
	protos.SetHTTP1(true)
	return &http.Transport{
		Proxy:       nil,
		DialContext: p.transportDial,
		DialTLSContext: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("netproxy: TLS upstream is never dialled by the transport")
		},
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
		Protocols:              &protos,
		ForceAttemptHTTP2:      false,
		DisableCompression:     true,
		DisableKeepAlives:      true,
		ResponseHeaderTimeout:  60 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		// Bodies stream through these: the 4 KiB defaults cost a
		// syscall per 4 KiB.
		ReadBufferSize:  64 << 10,
		WriteBufferSize: 64 << 10,
	}
}

// Counters returns a snapshot.
func (p *Proxy) Counters() Counters {
	p.stats.mu.Lock()
	conns, byVia := maps.Clone(p.stats.conns), maps.Clone(p.stats.byVia)
	p.stats.mu.Unlock()
	return Counters{
		Connections:  conns,
		ByVia:        byVia,
		BytesUp:      p.stats.up.Load(),
		BytesDown:    p.stats.down.Load(),
		DecisionWait: time.Duration(p.stats.waitNS.Load()),
		Decisions:    p.stats.decisions.Load(),
		DNSAnswers:   p.stats.dns.Load(),
	}
}

// Close ends every Serve (closing their connections and tunnels),
// cancels pending decisions and closes idle upstream connections.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.serving.Wait()
	p.deciding.Wait()
	p.tr.CloseIdleConnections()
	return nil
}

// Serve serves one attempt's listener until ctx is done or ln fails;
// it takes ownership of ln. When it returns, every connection it
// accepted (and every tunnel) is closed. inside dials the run's own
// loopback (nil: none). Several Serve calls may run over a Proxy's life
// (one per attempt), sharing its decisions.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener, inside Dialer) error {
	ctx, release, err := p.startServing(ctx, ln)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	s := newServeState(ctx, p, ln, inside)
	srv := p.newServer(ctx)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(&limitListener{Listener: ln, s: s}) }()

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	_ = srv.Close()
	s.closeAll()
	if err == nil {
		err = <-errc
	}
	if errors.Is(err, http.ErrServerClosed) || ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("netproxy: serve: %w", err)
}

// startServing registers one Serve-like call: it fails (closing ln)
// once the Proxy is closed, and its context ends with ctx or Close. The
// call ends with release, which Close waits for.
func (p *Proxy) startServing(ctx context.Context, ln io.Closer) (context.Context, context.CancelFunc, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = ln.Close()
		return nil, nil, ErrClosed
	}
	p.serving.Add(1)
	p.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.base, cancel)
	return ctx, func() {
		stop()
		cancel()
		p.serving.Done()
	}, nil
}

// newServer is the client-facing HTTP/1.1 server: the proxy behind
// net/http's limits; handlers' contexts end with Serve's.
func (p *Proxy) newServer(ctx context.Context) *http.Server {
	var protos http.Protocols
	protos.SetHTTP1(true)
	return &http.Server{
		Handler: p,
		// "OPTIONS *" must reach the handler (and be refused there)
		// so the Host tap stays in step.
		DisableGeneralOptionsHandler: true,
		ReadHeaderTimeout:            p.lim.HeaderTimeout,
		MaxHeaderBytes:               p.lim.MaxHeaderBytes,
		IdleTimeout:                  p.lim.IdleTimeout,
		ErrorLog:                     slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		Protocols:                    &protos,
		TLSNextProto:                 map[string]func(*http.Server, *tls.Conn, http.Handler){},
		BaseContext:                  func(net.Listener) context.Context { return ctx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
}

// connKey carries the *clientConn in a request's context.
type connKey struct{}

func clientOf(ctx context.Context) *clientConn {
	c, _ := ctx.Value(connKey{}).(*clientConn)
	return c
}
