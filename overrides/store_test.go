package overrides

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/grants"
)

// clock is a settable clock for the tests.
type clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newTestStore(t *testing.T, opts ...Option) (*Store, *clock) {
	t.Helper()
	c := &clock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)}
	return New(filepath.Join(t.TempDir(), "overrides"), append([]Option{WithClock(c.now)}, opts...)...), c
}

func req(path string) grants.Request {
	return grants.Request{Session: "uid 0: s", Cwd: "/w", Command: "echo x > " + path, Surface: boundary.Filesystem,
		Operation: boundary.OpWriteFile, Path: path, ResolvedPath: path, Agent: "cli", ToolCallID: "t1", Attempt: 1}
}

func record(t *testing.T, s *Store, r grants.Request, risk string) {
	t.Helper()
	if err := s.Record(context.Background(), r, risk, "because "+r.Path); err != nil {
		t.Fatal(err)
	}
}

func use(t *testing.T, s *Store, r grants.Request) bool {
	t.Helper()
	ok, err := s.Use(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestRecordOrderAndCap(t *testing.T) {
	s, c := newTestStore(t)
	for i := range MaxDenials + 5 {
		record(t, s, req(fmt.Sprintf("/opt/%d", i)), "medium")
		c.advance(time.Second)
	}
	ds, err := s.Denials("uid 0: s")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != MaxDenials {
		t.Fatalf("%d denials kept, want %d", len(ds), MaxDenials)
	}
	if ds[0].Path != fmt.Sprintf("/opt/%d", MaxDenials+4) || ds[len(ds)-1].Path != "/opt/5" {
		t.Fatalf("order: first %s, last %s", ds[0].Path, ds[len(ds)-1].Path)
	}
	if !ds[0].Time.After(ds[1].Time) || ds[0].Hash != req(ds[0].Path).HashHex() || ds[0].Risk != "medium" || ds[0].Command == "" {
		t.Fatalf("record %+v", ds[0])
	}
	// The same request again moves to the top, once.
	record(t, s, req("/opt/10"), "high")
	ds, _ = s.Denials("uid 0: s")
	if ds[0].Path != "/opt/10" || ds[0].Risk != "high" || len(ds) != MaxDenials {
		t.Fatalf("re-recorded: %+v (%d)", ds[0], len(ds))
	}
	if other, _ := s.Denials("uid 0: other"); len(other) != 0 {
		t.Fatalf("another session sees %d denials", len(other))
	}
}

func TestApproveUseOnce(t *testing.T) {
	s, _ := newTestStore(t)
	r := req("/opt/x")
	if use(t, s, r) {
		t.Fatal("used an override never issued")
	}
	record(t, s, r, "medium")
	if use(t, s, r) {
		t.Fatal("a recorded denial alone is no override")
	}
	o, err := s.Approve(r.Session, r.HashHex())
	if err != nil {
		t.Fatal(err)
	}
	if o.Hash != r.HashHex() || o.Used {
		t.Fatalf("override %+v", o)
	}
	// The retry differs in what is not hashed.
	retry := r
	retry.ToolCallID, retry.Attempt = "t2", 1
	if !use(t, s, retry) {
		t.Fatal("the approved request was not allowed")
	}
	if use(t, s, retry) {
		t.Fatal("the override was used twice")
	}
	if _, err := s.Approve(r.Session, r.HashHex()); !errors.Is(err, ErrReissue) {
		t.Fatalf("reissue: %v", err)
	}
	if _, err := s.Approve(r.Session, req("/opt/never").HashHex()); !errors.Is(err, ErrNoDenial) {
		t.Fatalf("unknown denial: %v", err)
	}
	if ds, err := s.Denials(r.Session); err != nil || len(ds) != 1 || !ds[0].Overridden {
		t.Fatalf("denials after an override: %+v %v", ds, err)
	}
}

func TestExpiry(t *testing.T) {
	s, c := newTestStore(t)
	r := req("/opt/x")
	record(t, s, r, "low")
	if _, err := s.Approve(r.Session, r.HashHex()); err != nil {
		t.Fatal(err)
	}
	c.advance(TTL)
	if use(t, s, r) {
		t.Fatal("an expired override was used")
	}
	// Expired unused is still never reissued.
	if _, err := s.Approve(r.Session, r.HashHex()); !errors.Is(err, ErrReissue) {
		t.Fatalf("reissue after expiry: %v", err)
	}
	r2 := req("/opt/y")
	record(t, s, r2, "low")
	s.Approve(r2.Session, r2.HashHex())
	c.advance(TTL - time.Millisecond)
	if !use(t, s, r2) {
		t.Fatal("an override just inside its minute was refused")
	}
}

func TestChangedRequestNoMatch(t *testing.T) {
	for name, change := range map[string]func(*grants.Request){
		"session":     func(r *grants.Request) { r.Session = "uid 0: other" },
		"cwd":         func(r *grants.Request) { r.Cwd = "/w2" },
		"command":     func(r *grants.Request) { r.Command += " " },
		"operation":   func(r *grants.Request) { r.Operation = boundary.OpTruncate },
		"path":        func(r *grants.Request) { r.Path = "/opt/y" },
		"resolved":    func(r *grants.Request) { r.ResolvedPath = "/opt/y" },
		"inode":       func(r *grants.Request) { r.Ino = 7 },
		"born":        func(r *grants.Request) { r.Born = 7 },
		"agent":       func(r *grants.Request) { r.Agent = "other" },
		"intent":      func(r *grants.Request) { r.Intent = "more" },
		"destination": func(r *grants.Request) { *r = r.WithDestinationText("a.example:443") },
	} {
		t.Run(name, func(t *testing.T) {
			s, _ := newTestStore(t)
			r := req("/opt/x")
			record(t, s, r, "medium")
			if _, err := s.Approve(r.Session, r.HashHex()); err != nil {
				t.Fatal(err)
			}
			changed := r
			change(&changed)
			if use(t, s, changed) {
				t.Fatal("a changed request used the override")
			}
			if !use(t, s, r) {
				t.Fatal("the exact request lost its override to a changed one")
			}
		})
	}
}

func TestRacingUse(t *testing.T) {
	s, _ := newTestStore(t)
	r := req("/opt/x")
	record(t, s, r, "medium")
	if _, err := s.Approve(r.Session, r.HashHex()); err != nil {
		t.Fatal(err)
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 20 {
		wg.Go(func() {
			<-start
			ok, err := s.Use(context.Background(), r)
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d racing uses won, want exactly 1", wins.Load())
	}
}

func TestBreakGlass(t *testing.T) {
	phrase := regexp.MustCompile(`^BREAK-GLASS [A-Z0-9]{8}$`)
	s, c := newTestStore(t, WithRandom(bytes.NewReader(bytes.Repeat([]byte{0, 1, 2, 35, 36, 255, 251, 252}, 8))))
	r := req("/etc/passwd")
	record(t, s, r, "critical")
	if _, err := s.Approve(r.Session, r.HashHex()); !errors.Is(err, ErrCritical) {
		t.Fatalf("approve of a critical denial: %v", err)
	}
	ch, err := s.Challenge(r.Session, r.HashHex())
	if err != nil {
		t.Fatal(err)
	}
	// 0 1 2 35 36 are A B C 9 A; 255 and 252 would bias the choice and are
	// skipped; 251 is 9 (251 mod 36 = 35); then the pattern again.
	if ch.Phrase != "BREAK-GLASS ABC9A9AB" || !phrase.MatchString(ch.Phrase) {
		t.Fatalf("phrase %q", ch.Phrase)
	}
	for _, wrong := range []string{"", "BREAK-GLASS", strings.ToLower(ch.Phrase), ch.Phrase + " ", " " + ch.Phrase, "BREAK-GLASS ABC9A99B"} {
		if _, err := s.BreakGlass(ch, wrong); !errors.Is(err, ErrPhrase) {
			t.Fatalf("phrase %q: %v", wrong, err)
		}
	}
	if use(t, s, r) {
		t.Fatal("a wrong phrase issued an override")
	}
	c.advance(PhraseTTL)
	if _, err := s.BreakGlass(ch, ch.Phrase); !errors.Is(err, ErrPhraseExpired) {
		t.Fatalf("late phrase: %v", err)
	}
	ch, _ = s.Challenge(r.Session, r.HashHex())
	c.advance(PhraseTTL - time.Second)
	if _, err := s.BreakGlass(ch, ch.Phrase); err != nil {
		t.Fatal(err)
	}
	if !use(t, s, r) || use(t, s, r) {
		t.Fatal("a break-glass override must allow exactly once")
	}
	if _, err := s.Challenge(r.Session, r.HashHex()); !errors.Is(err, ErrReissue) {
		t.Fatalf("a second break-glass: %v", err)
	}
}

func TestRealRandomPhrase(t *testing.T) {
	s := New(t.TempDir())
	r := req("/etc/x")
	record(t, s, r, "unknown")
	a, err := s.Challenge(r.Session, r.HashHex())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Challenge(r.Session, r.HashHex())
	if !regexp.MustCompile(`^BREAK-GLASS [A-Z0-9]{8}$`).MatchString(a.Phrase) || a.Phrase == b.Phrase {
		t.Fatalf("phrases %q %q", a.Phrase, b.Phrase)
	}
	if _, err := s.Approve(r.Session, r.HashHex()); !errors.Is(err, ErrCritical) {
		t.Fatalf("an unknown risk level must need break-glass: %v", err)
	}
}

func TestDamagedStateFailsClosed(t *testing.T) {
	s, _ := newTestStore(t)
	r := req("/opt/x")
	record(t, s, r, "medium")
	if _, err := s.Approve(r.Session, r.HashHex()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.File(r.Session), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Use(context.Background(), r); ok || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("use of damaged state: %v %v", ok, err)
	}
	if err := s.Record(context.Background(), r, "low", "x"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("record over damaged state: %v", err)
	}
	if b, _ := os.ReadFile(s.File(r.Session)); string(b) != "{not json" {
		t.Fatal("damaged state was overwritten (it would forget what was overridden)")
	}
}

func TestFiles(t *testing.T) {
	s, _ := newTestStore(t)
	if ok, err := s.Use(context.Background(), req("/opt/x")); ok || err != nil {
		t.Fatalf("use with no state: %v %v", ok, err)
	}
	if _, err := os.Stat(s.dir); err == nil {
		t.Fatal("a use with nothing recorded created the state directory")
	}
	record(t, s, req("/opt/x"), "low")
	st, err := os.Stat(s.dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("directory %v %v", st, err)
	}
	f, err := os.Stat(s.File("uid 0: s"))
	if err != nil || f.Mode().Perm()&0o077 != 0 {
		t.Fatalf("state file %v %v", f, err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}\.json$`).MatchString(filepath.Base(s.File("uid 0: s"))) {
		t.Fatalf("file name %s", s.File("uid 0: s"))
	}
}
