package intents

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"
	"time"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStore(t *testing.T) (*Store, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)}
	return New(t.TempDir(), WithClock(c.now)), c
}

const scope = "fs write /home/u/.config/app/settings.json"

func TestAddListExpire(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	in, err := s.Add(ctx, "uid 1: a", scope, ScopeHash(scope), 0, "terminal", nil)
	if err != nil {
		t.Fatal(err)
	}
	if in.ExpiresAt.Sub(in.Created) != DefaultTTL || in.ID == "" || in.Scope != scope {
		t.Fatalf("intent %+v", in)
	}
	got, err := s.List(ctx, "uid 1: a")
	if err != nil || len(got) != 1 || got[0].ID != in.ID {
		t.Fatalf("list %+v %v", got, err)
	}
	if other, _ := s.List(ctx, "uid 2: a"); len(other) != 0 {
		t.Fatalf("another session sees %+v", other)
	}
	c.add(DefaultTTL - time.Second)
	if got, _ := s.List(ctx, "uid 1: a"); len(got) != 1 {
		t.Fatalf("expired early: %+v", got)
	}
	c.add(time.Second)
	if got, _ := s.List(ctx, "uid 1: a"); len(got) != 0 {
		t.Fatalf("not expired: %+v", got)
	}
}

func TestAddRefuses(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	for _, tc := range []struct {
		name, scope, hash string
		ttl               time.Duration
		want              error
	}{
		{"another text", scope, ScopeHash(scope + " "), 0, ErrHash},
		{"empty", "", ScopeHash(""), 0, ErrHash},
		{"too long", scope, ScopeHash(scope), MaxTTL + time.Second, ErrTTL},
	} {
		if _, err := s.Add(ctx, "uid 1: a", tc.scope, tc.hash, tc.ttl, "", nil); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if got, _ := s.List(ctx, "uid 1: a"); len(got) != 0 {
		t.Fatalf("a refused intent was stored: %+v", got)
	}
	if _, err := s.Add(ctx, "uid 1: a", scope, ScopeHash(scope), MaxTTL, "", nil); err != nil {
		t.Fatalf("the longest intent: %v", err)
	}
	for range MaxPerSession - 1 {
		if _, err := s.Add(ctx, "uid 1: a", scope, ScopeHash(scope), 0, "", nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Add(ctx, "uid 1: a", scope, ScopeHash(scope), 0, "", nil); !errors.Is(err, ErrFull) {
		t.Fatalf("one too many: %v", err)
	}
}

func TestAddUnrecordedIsNotStored(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	boom := errors.New("log full")
	if _, err := s.Add(ctx, "uid 1: a", scope, ScopeHash(scope), 0, "", func(Intent) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("add: %v", err)
	}
	if got, _ := s.List(ctx, "uid 1: a"); len(got) != 0 {
		t.Fatalf("an unrecorded intent was stored: %+v", got)
	}
}

func TestRevoke(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	a, _ := s.Add(ctx, "uid 1: a", scope, ScopeHash(scope), 0, "", nil)
	b, _ := s.Add(ctx, "uid 1: a", scope, ScopeHash(scope), 0, "", nil)
	if _, err := s.Revoke(ctx, "uid 2: a", a.ID, nil); !errors.Is(err, ErrUnknown) {
		t.Fatalf("revoked from another session: %v", err)
	}
	var recorded Intent
	if _, err := s.Revoke(ctx, "uid 1: a", a.ID, func(in Intent) error { recorded = in; return errors.New("log full") }); err == nil || recorded.ID != a.ID {
		t.Fatalf("revoke: %v %+v", err, recorded)
	}
	got, _ := s.List(ctx, "uid 1: a")
	if len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("after revoke (its record failed, it stands): %+v", got)
	}
	if _, err := s.Revoke(ctx, "uid 1: a", a.ID, nil); !errors.Is(err, ErrUnknown) {
		t.Fatalf("revoked twice: %v", err)
	}
}

func TestTamperedAndCorrupt(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	in, _ := s.Add(ctx, "uid 1: a", scope, ScopeHash(scope), 0, "", nil)
	b, err := os.ReadFile(s.File("uid 1: a"))
	if err != nil {
		t.Fatal(err)
	}
	// A scope widened in the file no longer hashes to its approval.
	wide := []byte(string(b[:0]) + `{"session":"uid 1: a","intents":[{"id":"` + in.ID + `","scope":"fs write /**","hash":"` + in.Hash +
		`","created":"2025-01-01T09:00:00Z","expires_at":"2025-01-01T12:00:00Z"}]}`)
	if err := os.WriteFile(s.File("uid 1: a"), wide, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := s.List(ctx, "uid 1: a"); err != nil || len(got) != 0 {
		t.Fatalf("a widened scope is live: %+v %v", got, err)
	}
	if err := os.WriteFile(s.File("uid 1: a"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, "uid 1: a"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt: %v", err)
	}
	if _, err := s.Add(ctx, "uid 1: a", scope, ScopeHash(scope), 0, "", nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("added to a corrupt file: %v", err)
	}
	if err := os.WriteFile(s.File("uid 1: a"), []byte(`{"session":"uid 1: b","intents":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, "uid 1: a"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("another session's file: %v", err)
	}
}

func TestRacingAdds(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Add(ctx, "uid 1: a", scope, ScopeHash(scope), 0, "", nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got, _ := s.List(ctx, "uid 1: a"); len(got) != 8 {
		t.Fatalf("racing adds lost some: %d", len(got))
	}
}

// An intent written into the file by hand, with a life no Add gives (over
// MaxTTL, or made in the future), is not live: the file is the caller's,
// so any process of theirs could write one.
func TestListDropsForgedLife(t *testing.T) {
	ctx := context.Background()
	s, c := newStore(t)
	now := c.now()
	for name, in := range map[string]Intent{
		"decades":   {ID: "in-1", Scope: scope, Hash: ScopeHash(scope), Created: now.Add(-time.Hour), ExpiresAt: now.AddDate(70, 0, 0)},
		"from soon": {ID: "in-2", Scope: scope, Hash: ScopeHash(scope), Created: now.Add(time.Hour), ExpiresAt: now.Add(2 * time.Hour)},
	} {
		b, err := json.Marshal(state{Session: "uid 1: a", Intents: []Intent{in}})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(s.File("uid 1: a"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := s.List(ctx, "uid 1: a"); err != nil || len(got) != 0 {
			t.Errorf("%s: a forged intent is live: %+v %v", name, got, err)
		}
	}
}
