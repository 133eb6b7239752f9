package grants

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
)

func baseRequest() Request {
	return Request{
		Session: "s1", Cwd: "/w", Command: "cp a /etc/x", Surface: boundary.Filesystem,
		Operation: "write_file", Path: "/etc/x", ResolvedPath: "/etc/x", Dev: 2049, Ino: 77,
		Agent: "pi", Intent: "install the config", ToolCallID: "call-1", Attempt: 1,
	}
}

func TestConsumeOnceExactly(t *testing.T) {
	s := NewStore()
	req := baseRequest()
	g, err := s.Issue(req, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The retry differs only in ids that are not hashed.
	retry := req
	retry.ToolCallID, retry.Attempt = "call-2", 2
	if err := s.Consume(g.Token, retry); err != nil {
		t.Fatalf("consume: %v", err)
	}
	if err := s.Consume(g.Token, retry); !errors.Is(err, ErrUnknown) {
		t.Fatalf("replay: %v, want ErrUnknown", err)
	}
	if s.Len() != 0 {
		t.Fatalf("%d grants left", s.Len())
	}
}

// Every bound field, changed alone, makes the grant not match, and burns it.
func TestEveryBoundFieldMatters(t *testing.T) {
	changes := map[string]func(*Request){
		"session":       func(r *Request) { r.Session = "s2" },
		"cwd":           func(r *Request) { r.Cwd = "/w2" },
		"command":       func(r *Request) { r.Command = "cp a /etc/y" },
		"surface":       func(r *Request) { r.Surface = boundary.Network },
		"operation":     func(r *Request) { r.Operation = "truncate" },
		"path":          func(r *Request) { r.Path = "/etc/./x" },
		"resolved_path": func(r *Request) { r.ResolvedPath = "/etc/y" },
		"dev":           func(r *Request) { r.Dev = 2050 },
		"ino":           func(r *Request) { r.Ino = 78 },
		"born":          func(r *Request) { r.Born = 12345 },
		"destination":   func(r *Request) { r.Destination = mustDest("example.org:443") },
		"malformed":     func(r *Request) { r.MalformedDestination = "Example.org:443" },
		"addresses":     func(r *Request) { r.Addresses = []netip.Addr{netip.MustParseAddr("127.0.0.1")} },
		"agent":         func(r *Request) { r.Agent = "claude" },
		"intent":        func(r *Request) { r.Intent = "something else" },
	}
	for name, change := range changes {
		t.Run(name, func(t *testing.T) {
			s := NewStore()
			req := baseRequest()
			g, _ := s.Issue(req, time.Minute)
			other := req
			change(&other)
			err := s.Consume(g.Token, other)
			want := ErrMismatch
			if name == "session" {
				want = ErrSession
			}
			if !errors.Is(err, want) {
				t.Fatalf("consume with %s changed: %v, want %v", name, err, want)
			}
			if err := s.Consume(g.Token, req); !errors.Is(err, ErrUnknown) {
				t.Fatalf("the grant survived a mismatched consume: %v", err)
			}
		})
	}
}

func TestExpiryOnInjectedClock(t *testing.T) {
	now := time.Now()
	s := NewStore(WithClock(func() time.Time { return now }))
	g, _ := s.Issue(baseRequest(), 30*time.Second)
	now = now.Add(30 * time.Second)
	if err := s.Consume(g.Token, baseRequest()); !errors.Is(err, ErrExpired) {
		t.Fatalf("at expiry: %v, want ErrExpired", err)
	}
	g, _ = s.Issue(baseRequest(), 30*time.Second)
	now = now.Add(29 * time.Second)
	if err := s.Consume(g.Token, baseRequest()); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	s.Issue(baseRequest(), time.Second)
	now = now.Add(time.Hour)
	if n := s.Prune(); n != 1 || s.Len() != 0 {
		t.Fatalf("prune removed %d, %d left", n, s.Len())
	}
}

func TestBadTokens(t *testing.T) {
	s := NewStore()
	g, _ := s.Issue(baseRequest(), time.Minute)
	forged := tokenPrefix + strings.Repeat("A", tokenLen-len(tokenPrefix))
	for name, tok := range map[string]string{
		"empty":      "",
		"truncated":  g.Token[:len(g.Token)-1],
		"oversized":  g.Token + "A",
		"no prefix":  strings.TrimPrefix(g.Token, tokenPrefix) + "xxxxx",
		"bad chars":  g.Token[:len(g.Token)-1] + "!",
		"huge":       strings.Repeat("x", 1<<20),
		"forged":     forged,
		"other case": strings.ToUpper(g.Token[:len(tokenPrefix)]) + g.Token[len(tokenPrefix):],
	} {
		err := s.Consume(tok, baseRequest())
		if err == nil {
			t.Errorf("%s token accepted", name)
		}
		if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknown) {
			t.Errorf("%s token: %v", name, err)
		}
	}
	// None of them burned the real grant.
	if err := s.Consume(g.Token, baseRequest()); err != nil {
		t.Fatalf("real token after bad ones: %v", err)
	}
}

func TestIssueRefusesNonsense(t *testing.T) {
	s := NewStore()
	if _, err := s.Issue(baseRequest(), 0); err == nil {
		t.Error("zero ttl accepted")
	}
	r := baseRequest()
	r.Session = ""
	if _, err := s.Issue(r, time.Minute); err == nil {
		t.Error("grant without a session issued")
	}
}

// 50 racing consumers, 100 times: exactly one wins each time.
func TestRacingConsumers(t *testing.T) {
	s := NewStore()
	for round := 0; round < 100; round++ {
		g, _ := s.Issue(baseRequest(), time.Minute)
		var wins atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if s.Consume(g.Token, baseRequest()) == nil {
					wins.Add(1)
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("round %d: %d consumers won", round, wins.Load())
		}
	}
}

func TestCanonicalNoDelimiterAmbiguity(t *testing.T) {
	a := Request{Command: "a|b", Cwd: "c"}
	b := Request{Command: "a", Cwd: "b|c"}
	if a.Hash() == b.Hash() {
		t.Fatal("command a|b + cwd c collides with command a + cwd b|c")
	}
	// Values that look like encoded fields do not collide either.
	c := Request{Command: "x\x03cwd\x01y"}
	d := Request{Command: "x", Cwd: "y"}
	if c.Hash() == d.Hash() {
		t.Fatal("an embedded encoding collides")
	}
	// Ids that differ between attempts do not change the hash.
	e, f := baseRequest(), baseRequest()
	f.ToolCallID, f.Attempt = "other", 9
	if e.Hash() != f.Hash() {
		t.Fatal("tool call id or attempt changed the hash")
	}
}

func TestCanonicalSortedAndSparse(t *testing.T) {
	pairs, err := decodeCanonical(baseRequest().Canonical())
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(pairs); i++ {
		if pairs[i-1][0] >= pairs[i][0] {
			t.Fatalf("keys out of order: %q", pairs)
		}
	}
	for _, p := range pairs {
		if p[1] == "" {
			t.Fatalf("empty field encoded: %q", pairs)
		}
	}
}

// The canonical encoding must be injective: decoding gives back exactly
// the fields, so two requests with different fields never share a hash
// short of a SHA-256 collision.
func FuzzCanonical(f *testing.F) {
	f.Add("a|b", "c", "write_file", "/etc/x", uint64(1), uint64(2), "")
	f.Add("a", "b|c", "read_file", "", uint64(0), uint64(0), "example.org:443")
	f.Add("\x00\x01", "\xff", "", "\x03cwd", uint64(1<<63), uint64(0), "")
	f.Fuzz(func(t *testing.T, command, cwd, op, path string, dev, ino uint64, dest string) {
		r := Request{Command: command, Cwd: cwd, Operation: boundary.Operation(op), Path: path, Dev: dev, Ino: ino, Session: "s"}.WithDestinationText(dest)
		got, err := decodeCanonical(r.Canonical())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r.fields()) {
			t.Fatalf("decoded %q, want %q", got, r.fields())
		}
	})
}

func BenchmarkIssueConsume(b *testing.B) {
	s := NewStore()
	req := baseRequest()
	b.ReportAllocs()
	for b.Loop() {
		g, err := s.Issue(req, time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Consume(g.Token, req); err != nil {
			b.Fatal(err)
		}
	}
}

// A run-scoped grant serves every use until it is revoked; a counted one
// exactly its uses; a mismatch burns either.
func TestIssueUses(t *testing.T) {
	s := NewStore()
	req := Request{Session: "s1", Command: "npm install", Surface: boundary.Network, Operation: boundary.OpConnect,
		Destination: mustDest("registry.npmjs.org:443"), Addresses: []netip.Addr{netip.MustParseAddr("104.16.1.34")}}
	g, err := s.IssueUses(req, time.Hour, Unlimited)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := s.Consume(g.Token, req); err != nil {
			t.Fatalf("use %d: %v", i, err)
		}
	}
	s.Revoke(g.Token)
	if err := s.Consume(g.Token, req); !errors.Is(err, ErrUnknown) {
		t.Fatalf("after revoke: %v, want ErrUnknown", err)
	}
	two, _ := s.IssueUses(req, time.Hour, 2)
	for i := range 2 {
		if err := s.Consume(two.Token, req); err != nil {
			t.Fatalf("use %d: %v", i, err)
		}
	}
	if err := s.Consume(two.Token, req); !errors.Is(err, ErrUnknown) {
		t.Fatalf("third use: %v, want ErrUnknown", err)
	}
	other := req
	other.Addresses = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	g, _ = s.IssueUses(req, time.Hour, Unlimited)
	if err := s.Consume(g.Token, other); !errors.Is(err, ErrMismatch) {
		t.Fatalf("other addresses: %v, want ErrMismatch", err)
	}
	if err := s.Consume(g.Token, req); !errors.Is(err, ErrUnknown) {
		t.Fatalf("after a mismatch: %v, want ErrUnknown", err)
	}
	if _, err := s.IssueUses(req, time.Hour, 0); err == nil {
		t.Fatal("zero uses issued")
	}
}

// A long-lived store stays bounded: Issue removes expired grants as the
// store grows, never a live one, so the store holds at most about twice
// the grants still live whatever was issued before.
func TestIssuePrunesExpired(t *testing.T) {
	// step issues n grants with ttl, then moves the clock on.
	type step struct {
		n            int
		ttl, advance time.Duration
	}
	rounds := func(k int, st step) []step {
		out := make([]step, k)
		for i := range out {
			out[i] = st
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		steps []step
		// maxLen bounds the store at every point; live is how many
		// grants are unexpired after the last step, all of which must
		// still be usable; left, if set, is the store's size then.
		maxLen, live, left int
	}{
		{name: "expired grants go as new ones come",
			steps:  []step{{1000, time.Second, 2 * time.Second}, {1000, time.Second, 2 * time.Second}, {10, time.Hour, 0}},
			maxLen: 2 * 1000, live: 10},
		// A minute's grants, issued every ten seconds: six rounds live
		// while one is issued, five once the clock has moved on.
		{name: "many small rounds", steps: rounds(500, step{20, time.Minute, 10 * time.Second}),
			maxLen: 2 * 6 * 20, live: 5 * 20},
		{name: "live grants are never pruned", steps: []step{{3000, time.Hour, time.Minute}},
			maxLen: 3000, live: 3000},
		// The 129th grant finds the store at its pruning size, the clock
		// exactly at the others' expiry.
		{name: "at ExpiresAt a grant is expired", steps: []step{{128, time.Minute, time.Minute}, {1, time.Hour, 0}},
			maxLen: 128, live: 1, left: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			s := NewStore(WithClock(func() time.Time { return now }))
			var issued []Grant
			peak := 0
			for _, st := range tc.steps {
				for range st.n {
					g, err := s.Issue(baseRequest(), st.ttl)
					if err != nil {
						t.Fatal(err)
					}
					issued = append(issued, g)
					peak = max(peak, s.Len())
				}
				now = now.Add(st.advance)
			}
			if peak > tc.maxLen {
				t.Errorf("store reached %d grants, want at most %d", peak, tc.maxLen)
			}
			if tc.left != 0 && s.Len() != tc.left {
				t.Errorf("%d grants in the store, want %d", s.Len(), tc.left)
			}
			live := 0
			for _, g := range issued {
				if now.Before(g.ExpiresAt) {
					live++
					if err := s.Consume(g.Token, baseRequest()); err != nil {
						t.Fatalf("a live grant was lost: %v", err)
					}
				}
			}
			if live != tc.live {
				t.Errorf("%d live grants, want %d", live, tc.live)
			}
			s.Prune()
			if s.Len() != 0 {
				t.Errorf("%d grants left after consuming the live ones and pruning", s.Len())
			}
		})
	}
}
