package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/sandbox"
)

// heldWorld is a runner whose first attempt meets one boundary the
// policy allows, and whose later attempts check they got exactly its
// grant.
type heldWorld struct {
	w     world
	fake  *fakeSandbox
	store *grants.Store
	r     *Runner
}

func newHeldWorld(t *testing.T, clock func() time.Time) heldWorld {
	w := newWorld(t)
	retry := func(_ context.Context, spec sandbox.Spec, _ During) (sandbox.Result, error) {
		if len(spec.Exceptions) != 1 || spec.Exceptions[0].Path != w.allowed {
			return sandbox.Result{}, fmt.Errorf("retry got exceptions %+v", spec.Exceptions)
		}
		return denies(0)(nil, spec, nil)
	}
	fake := &fakeSandbox{script: []attemptFunc{denies(1, fsDenial("make_reg", w.allowed)), retry}}
	var opts []grants.Option
	if clock != nil {
		opts = append(opts, grants.WithClock(clock))
	}
	store := grants.NewStore(opts...)
	return heldWorld{w: w, fake: fake, store: store, r: New(Config{Sandbox: fake, Grants: store})}
}

func holdJob() Job {
	j := job(1)
	j.Hold = true
	return j
}

// hold runs the first attempt and returns its offered grants.
func (h heldWorld) hold(t *testing.T) []string {
	t.Helper()
	ev := &recorder{}
	rep, err := h.r.Run(context.Background(), h.w.caller, holdJob(), ev)
	if err != nil || rep.Retry == nil || len(rep.Retry.Grants) != 1 {
		t.Fatalf("first attempt: err %v, retry %+v", err, rep.Retry)
	}
	if rep.Attempts != 1 || rep.ExitCode != 1 || h.fake.calls() != 1 {
		t.Fatalf("attempts %d exit %d calls %d", rep.Attempts, rep.ExitCode, h.fake.calls())
	}
	if got := boundaries(rep); !slices.Equal(got, []string{"1 make_reg new-file allow/policy issued"}) {
		t.Fatalf("boundaries %q", got)
	}
	if !slices.Contains(ev.kinds(), KindHeld) || slices.Contains(ev.kinds(), KindRetrying) {
		t.Fatalf("events %q", ev.kinds())
	}
	if rep.Retry.ExpiresInMS <= 0 || rep.Retry.ExpiresInMS > broker.DefaultGrantTTL.Milliseconds() {
		t.Fatalf("expires in %d ms", rep.Retry.ExpiresInMS)
	}
	return rep.Retry.Grants
}

func (h heldWorld) present(c Caller, j Job, tokens []string) (*Report, error) {
	j.Present = tokens
	return h.r.Run(context.Background(), c, j, nil)
}

// The front end's retry, presenting the grants, runs the same command
// with exactly them; presenting them again runs nothing.
func TestHeldRetry(t *testing.T) {
	h := newHeldWorld(t, nil)
	tokens := h.hold(t)
	rep, err := h.present(h.w.caller, holdJob(), tokens)
	if err != nil || rep.Attempts != 2 || rep.ExitCode != 0 || rep.Retry != nil {
		t.Fatalf("retry: err %v attempts %d exit %d retry %+v", err, rep.Attempts, rep.ExitCode, rep.Retry)
	}
	if got := boundaries(rep); !slices.Equal(got, []string{"1 make_reg new-file allow/policy consumed"}) {
		t.Fatalf("boundaries %q", got)
	}
	if h.store.Len() != 0 {
		t.Fatalf("%d grants outstanding", h.store.Len())
	}
	rep, err = h.present(h.w.caller, holdJob(), tokens)
	if !errors.Is(err, ErrNotHeld) || rep.ExitCode != ExitSandboxd || h.fake.calls() != 2 {
		t.Fatalf("replay: err %v exit %d calls %d", err, rep.ExitCode, h.fake.calls())
	}
}

// Grants presented for anything but the held job, or by another caller,
// run nothing and end the hold: the grants are revoked, the attempt's
// changes committed, and the right presentation after it runs nothing.
func TestHeldRetryRefusesAnotherJob(t *testing.T) {
	other := func(f func(*Caller, *Job)) func(Caller) (Caller, Job) {
		return func(c Caller) (Caller, Job) {
			j := holdJob()
			f(&c, &j)
			return c, j
		}
	}
	for name, change := range map[string]func(Caller) (Caller, Job){
		"command": other(func(_ *Caller, j *Job) { j.Command = "touch y" }),
		"argv":    other(func(_ *Caller, j *Job) { j.Argv = []string{"bash", "-c", "touch y"} }),
		"cwd":     other(func(c *Caller, _ *Job) { c.Cwd += "/sub" }),
		"session": other(func(_ *Caller, j *Job) { j.Session = "another" }),
		"caller":  other(func(c *Caller, _ *Job) { c.UID++ }),
		"env":     other(func(c *Caller, _ *Job) { c.Env = append(c.Env, "LD_PRELOAD=/x.so") }),
		"intent":  other(func(_ *Caller, j *Job) { j.Intent = "something else" }),
		"policy":  other(func(_ *Caller, j *Job) { j.Policy = "/elsewhere.toml" }),
	} {
		t.Run(name, func(t *testing.T) {
			h := newHeldWorld(t, nil)
			tokens := h.hold(t)
			c, j := change(h.w.caller)
			if _, err := h.present(c, j, tokens); !errors.Is(err, ErrNotHeld) {
				t.Fatalf("presented for another %s: %v", name, err)
			}
			if h.fake.calls() != 1 || h.store.Len() != 0 {
				t.Fatalf("calls %d, %d grants outstanding", h.fake.calls(), h.store.Len())
			}
			if _, err := h.present(h.w.caller, holdJob(), tokens); !errors.Is(err, ErrNotHeld) || h.fake.calls() != 1 {
				t.Fatalf("the right presentation after a wrong one: %v, calls %d", err, h.fake.calls())
			}
		})
	}
}

// A declined retry commits the attempt; an unknown token declines
// nothing; another caller cannot decline (and spends) it.
func TestHeldDecline(t *testing.T) {
	h := newHeldWorld(t, nil)
	tokens := h.hold(t)
	if _, err := h.r.Decline(context.Background(), h.w.caller.UID, []string{"nope"}); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("unknown token: %v", err)
	}
	rep, err := h.r.Decline(context.Background(), h.w.caller.UID, tokens)
	if err != nil || rep.Attempts != 1 || rep.Retry != nil {
		t.Fatalf("decline: %v %+v", err, rep)
	}
	if got := boundaries(rep); !slices.Equal(got, []string{"1 make_reg new-file allow/policy declined"}) {
		t.Fatalf("boundaries %q", got)
	}
	if _, err := h.r.Decline(context.Background(), h.w.caller.UID, tokens); !errors.Is(err, ErrNotHeld) || h.store.Len() != 0 {
		t.Fatalf("second decline: %v, %d grants", err, h.store.Len())
	}

	h = newHeldWorld(t, nil)
	tokens = h.hold(t)
	if _, err := h.r.Decline(context.Background(), h.w.caller.UID+1, tokens); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("another caller's decline: %v", err)
	}
	if _, err := h.present(h.w.caller, holdJob(), tokens); !errors.Is(err, ErrNotHeld) || h.store.Len() != 0 {
		t.Fatalf("after another caller presented the tokens: %v", err)
	}
}

// A retry that does not come before the grants expire ends the hold.
func TestHeldExpires(t *testing.T) {
	// The store's clock is the grant's: it expires 300 ms from now.
	offset := -broker.DefaultGrantTTL + 300*time.Millisecond
	h := newHeldWorld(t, func() time.Time { return time.Now().Add(offset) })
	tokens := h.hold(t)
	deadline := time.Now().Add(5 * time.Second)
	for h.store.Len() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := h.present(h.w.caller, holdJob(), tokens); !errors.Is(err, ErrNotHeld) || h.fake.calls() != 1 {
		t.Fatalf("after expiry: %v, calls %d", err, h.fake.calls())
	}
}

// Of many presentations of one held attempt's grants, exactly one runs.
func TestHeldRetryRace(t *testing.T) {
	h := newHeldWorld(t, nil)
	tokens := h.hold(t)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.present(h.w.caller, holdJob(), tokens); err == nil {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || h.fake.calls() != 2 {
		t.Fatalf("%d presentations won, %d attempts ran", wins.Load(), h.fake.calls())
	}
}

// A caller has a bounded number of held attempts; beyond it, the run
// ends as without a retry.
func TestHeldBound(t *testing.T) {
	h := newHeldWorld(t, nil)
	h.r.held.max = 1
	h.hold(t)
	h.fake.script[1] = denies(1, fsDenial("make_reg", h.w.allowed))
	rep, err := h.r.Run(context.Background(), h.w.caller, holdJob(), nil)
	if err != nil || rep.Retry != nil || h.store.Len() != 1 {
		t.Fatalf("over the bound: err %v retry %+v, %d grants (the first hold's only)", err, rep.Retry, h.store.Len())
	}
	h.r.Release()
	if h.store.Len() != 0 {
		t.Fatalf("release left %d grants", h.store.Len())
	}
}

// A caller's held attempts are bounded in number and in the bytes their
// layers hold together; another caller has its own room.
func TestHeldRoom(t *testing.T) {
	h := heldSet{max: 3, maxB: 100}
	if !h.reserve(1, 60) || h.reserve(1, 50) || !h.reserve(2, 50) || !h.reserve(1, 40) {
		t.Fatal("bytes are not bounded per caller")
	}
	if h.reserve(1, 0) == false {
		t.Fatal("a third empty hold found no room")
	}
	if h.reserve(1, 0) {
		t.Fatal("a fourth hold found room")
	}
	h.mu.Lock()
	h.unreserveLocked(1, 60)
	h.mu.Unlock()
	if !h.reserve(1, 60) {
		t.Fatal("the room given back was not taken again")
	}
}

// Grants that expired before they could be offered hold nothing: the
// run ends as without a retry, the grants marked expired.
func TestHeldNotWhenExpired(t *testing.T) {
	offset := -broker.DefaultGrantTTL - time.Second
	h := newHeldWorld(t, func() time.Time { return time.Now().Add(offset) })
	rep, err := h.r.Run(context.Background(), h.w.caller, holdJob(), nil)
	if err != nil || rep.Retry != nil || h.store.Len() != 0 || h.r.Held() != 0 {
		t.Fatalf("err %v retry %+v, %d grants, %d held", err, rep.Retry, h.store.Len(), h.r.Held())
	}
	if got := boundaries(rep); !slices.Equal(got, []string{"1 make_reg new-file allow/policy expired"}) {
		t.Fatalf("boundaries %q", got)
	}
}

// auditLog keeps the broker's audit events.
type auditLog struct {
	mu     sync.Mutex
	events []broker.AuditEvent
}

func (a *auditLog) Record(_ context.Context, ev broker.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, ev)
	return nil
}

// A hold that ends without its retry is recorded: each grant withdrawn,
// and why.
func TestHeldEndIsRecorded(t *testing.T) {
	h := newHeldWorld(t, nil)
	log := &auditLog{}
	h.r = New(Config{Sandbox: h.fake, Grants: h.store, Auditor: log})
	tokens := h.hold(t)
	other := holdJob()
	other.Command = "touch y"
	if _, err := h.present(h.w.caller, other, tokens); !errors.Is(err, ErrNotHeld) {
		t.Fatal(err)
	}
	var why []string
	for _, ev := range log.events {
		if ev.Kind == broker.AuditGrantRejected {
			why = append(why, ev.Why)
		}
	}
	if !slices.Equal(why, []string{"the held retry was rejected"}) {
		t.Fatalf("recorded rejections: %q", why)
	}
}

// askedPerson is a person who denies and counts the questions.
type askedPerson struct{ asked atomic.Int32 }

func (p *askedPerson) Reachable() (bool, string) { return true, "" }
func (p *askedPerson) Review(context.Context, grants.Request) (broker.Decision, error) {
	p.asked.Add(1)
	return broker.Decision{Outcome: broker.Deny, Source: broker.SourceHuman, Rationale: "no"}, nil
}

// The retry's questions go to the person of the request that presents
// the grants: the first request, and its person, have gone.
func TestHeldRetryAsksItsOwnPerson(t *testing.T) {
	h := newHeldWorld(t, nil)
	h.fake.script[1] = denies(1, fsDenial("make_reg", h.w.denied))
	first, second := &askedPerson{}, &askedPerson{}
	j := holdJob()
	j.Reviewers.Person = first
	rep, err := h.r.Run(context.Background(), h.w.caller, j, nil)
	if err != nil || rep.Retry == nil {
		t.Fatalf("hold: %v %+v", err, rep.Retry)
	}
	j.Reviewers.Person, j.Present = second, rep.Retry.Grants
	rep, err = h.r.Run(context.Background(), h.w.caller, j, nil)
	if err != nil || rep.Attempts != 2 {
		t.Fatalf("retry: %v, %d attempts", err, rep.Attempts)
	}
	if first.asked.Load() != 0 || second.asked.Load() != 1 {
		t.Fatalf("asked: the first request's person %d times, the retry's %d", first.asked.Load(), second.asked.Load())
	}
}
