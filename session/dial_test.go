package session

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/policy"
)

// TestOwnListener: a reserved listener is refused at every local
// spelling of its address and port, and nothing else is.
func TestOwnListener(t *testing.T) {
	own := ownListener([]netip.AddrPort{
		netip.MustParseAddrPort("127.0.0.1:9100"),
		netip.MustParseAddrPort("[::1]:9200"),
		netip.MustParseAddrPort("0.0.0.0:9300"),
	})
	cases := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:9100", true},
		{"127.0.0.2:9100", true},
		{"[::ffff:127.0.0.1]:9100", true},
		{"0.0.0.0:9100", true},
		{"[::]:9100", true},
		{"[::1]:9100", true},
		{"[::1]:9200", true},
		{"127.0.0.1:9300", true},
		{"127.0.0.1:9101", false},
		{"93.184.215.14:9100", false},
		{"[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:9300", false},
	}
	for _, a := range localAddrs() {
		if !a.IsLoopback() {
			cases = append(cases, struct {
				addr string
				want bool
			}{netip.AddrPortFrom(a, 9300).String(), true})
			break
		}
	}
	for _, c := range cases {
		if got := own(netip.MustParseAddrPort(c.addr)); got != c.want {
			t.Errorf("%s: own listener %v, want %v", c.addr, got, c.want)
		}
	}
	if ownListener(nil)(netip.MustParseAddrPort("127.0.0.1:9100")) {
		t.Error("nothing reserved refuses 127.0.0.1:9100")
	}
}

// TestCallerProxy: the model client's proxy is the caller's
// environment's, never the process's.
func TestCallerProxy(t *testing.T) {
	t.Setenv("HTTPS_PROXY", "http://process.test:1")
	t.Setenv("HTTP_PROXY", "http://process.test:1")
	c := Caller{Env: []string{"HTTPS_PROXY=http://caller.test:3128", "http_proxy=http://lower.test:8080", "NO_PROXY=internal.test"}}
	p := callerProxy(c)
	for _, tc := range []struct{ url, want string }{
		{"https://api.openai.com/v1", "http://caller.test:3128"},
		{"http://models.example/v1", "http://lower.test:8080"},
		{"https://internal.test/v1", ""},
	} {
		u, _ := url.Parse(tc.url)
		got, err := p(u)
		if err != nil {
			t.Fatal(err)
		}
		s := ""
		if got != nil {
			s = got.String()
		}
		if s != tc.want {
			t.Errorf("%s: proxy %v, want %q", tc.url, got, tc.want)
		}
	}
	if got, _ := callerProxy(Caller{})(&url.URL{Scheme: "https", Host: "api.openai.com"}); got != nil {
		t.Errorf("a caller with no proxy variables gets the process's: %v", got)
	}
}

// TestModelDial: the model reviewer a run builds dials as the caller and
// never reaches sandboxd's own listeners, however its base_url names
// them; other endpoints it reaches.
func TestModelDial(t *testing.T) {
	own, other := countingListener(t), countingListener(t)
	var cfg ModelConfig
	r := New(Config{Reserved: []netip.AddrPort{netip.MustParseAddrPort(own.Addr().String())},
		Models: func(c ModelConfig) (broker.Reviewer, error) { cfg = c; return nil, nil }})
	w := newWorld(t)
	p := &plan{policy: policy.Resolved{Review: policy.Review{Enabled: true, Model: "m", BaseURL: "http://" + own.Addr().String() + "/v1"}}}
	if _, _, _, err := r.reviewers(w.caller, Job{Reviewer: ReviewModel}, p); err != nil {
		t.Fatal(err)
	}
	if cfg.Dial == nil || cfg.Proxy == nil {
		t.Fatal("the model's config carries no dialer or proxy rule: it would dial as the process")
	}
	_, port, _ := net.SplitHostPort(own.Addr().String())
	for _, addr := range []string{own.Addr().String(), "localhost:" + port, "[::ffff:127.0.0.1]:" + port, "0.0.0.0:" + port} {
		if c, err := cfg.Dial(t.Context(), "tcp", addr); !errors.Is(err, errOwnListener) {
			if c != nil {
				c.Close()
			}
			t.Errorf("dial %s, the daemon's own listener: %v", addr, err)
		}
	}
	c, err := cfg.Dial(t.Context(), "tcp", other.Addr().String())
	if err != nil {
		t.Fatalf("dial another endpoint: %v", err)
	}
	c.Close()
	other.wait(t, 1)
	if n := own.hits.Load(); n != 0 {
		t.Errorf("sandboxd's own listener accepted %d connections", n)
	}
}

// TestDNSServerDials: the policy's resolver is asked through the dialer
// the run gives it (the caller's), at the address the policy names.
func TestDNSServerDials(t *testing.T) {
	var mu sync.Mutex
	var got []string
	res := dnsServer("192.0.2.53:53", func(_ context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		got = append(got, network+" "+addr)
		mu.Unlock()
		return nil, errors.New("refused by the test")
	})
	if _, err := res.LookupNetIP(t.Context(), "ip4", "example.test"); err == nil {
		t.Fatal("a lookup whose dials all fail answered")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || got[0] != "udp 192.0.2.53:53" {
		t.Errorf("the resolver dialled %q, want udp 192.0.2.53:53 through the run's dialer", got)
	}
}

type counted struct {
	net.Listener
	hits atomic.Int64
	got  chan struct{}
}

func countingListener(t *testing.T) *counted {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &counted{Listener: ln, got: make(chan struct{}, 16)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.hits.Add(1)
			c.got <- struct{}{}
			conn.Close()
		}
	}()
	return c
}

func (c *counted) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		<-c.got
	}
}
