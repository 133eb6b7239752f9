package session

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/publicerr"
)

// A front end that drives the retry itself (Job.Hold: the daemon's
// retry "client") gets, when every boundary of an attempt was allowed,
// the allows' grant tokens in the report's Retry instead of a retry. The
// attempt's layer is held, uncommitted, with the run's plan. A later run
// that presents exactly those tokens (Job.Present) for the same caller
// and the same job continues the held run: the grants are consumed
// against the objects as they are then, the held layer is dropped, and
// the command runs again with exactly those exceptions, in the plan the
// grants were given in. A retry that is declined, that does not come
// before the grants expire, or that presents the tokens for anything
// else ends the hold: the grants are revoked and the held layer is
// committed, as when no retry follows.

// Retry is the report's "retry": the grants a held attempt waits on.
type Retry struct {
	// Grants are the allows' tokens, to present all together.
	Grants []string `json:"grants"`
	// ExpiresInMS is how long they stay usable.
	ExpiresInMS int64 `json:"expires_in_ms"`
}

// Bounds on what one caller's held attempts keep: how many, and how many
// bytes their layers hold together (each layer is a tmpfs: memory no
// process accounts for while it waits).
const (
	DefaultMaxHeld      = 16
	DefaultMaxHeldBytes = 1 << 30
)

// ErrNotHeld is a presentation of grants that no held attempt of this
// caller and job waits on.
var ErrNotHeld = errors.New("no held attempt for these grants")

// heldSet holds the parked runs, by each of their tokens.
type heldSet struct {
	mu      sync.Mutex
	byToken map[string]*heldRun
	perUID  map[int]int   // held runs, and slots reserved for them
	bytes   map[int]int64 // the bytes their layers hold
	max     int
	maxB    int64
}

// heldRun is one parked run.
type heldRun struct {
	st     *run
	tokens []string
	key    string
	bytes  int64
	timer  *time.Timer // set under the set's mu
}

// reserve takes a slot, and n bytes, for uid's next held run, if it has
// them left.
func (h *heldSet) reserve(uid int, n int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.perUID[uid] >= h.max || h.bytes[uid]+n > h.maxB {
		return false
	}
	if h.perUID == nil {
		h.perUID, h.bytes = map[int]int{}, map[int]int64{}
	}
	h.perUID[uid]++
	h.bytes[uid] += n
	return true
}

// unreserveLocked gives a slot and n bytes back.
func (h *heldSet) unreserveLocked(uid int, n int64) {
	if h.perUID[uid]--; h.perUID[uid] <= 0 {
		delete(h.perUID, uid)
	}
	if h.bytes[uid] -= n; h.bytes[uid] <= 0 {
		delete(h.bytes, uid)
	}
}

// add parks hr in its reserved slot until ttl, when expire runs (unless
// it was taken before). The timer starts under the lock: of the expiry
// and a presentation, whichever takes hr first finds it parked.
func (h *heldSet) add(hr *heldRun, ttl time.Duration, expire func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byToken == nil {
		h.byToken = map[string]*heldRun{}
	}
	for _, t := range hr.tokens {
		h.byToken[t] = hr
	}
	hr.timer = time.AfterFunc(ttl, expire)
}

// removeLocked unparks hr; it reports whether hr was parked (of an
// expiry and a presentation, exactly one takes it).
func (h *heldSet) removeLocked(hr *heldRun) bool {
	if h.byToken[hr.tokens[0]] != hr {
		return false
	}
	for _, t := range hr.tokens {
		delete(h.byToken, t)
	}
	h.unreserveLocked(hr.st.caller.UID, hr.bytes)
	hr.timer.Stop()
	return true
}

// remove unparks hr (see removeLocked).
func (h *heldSet) remove(hr *heldRun) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.removeLocked(hr)
}

// take unparks the run tokens were offered by, if uid and key are its
// and tokens are exactly its grants. Every other run a token names is
// unparked too and returned in ended: a token presented for anything
// else is spent, and its run must be ended.
func (h *heldSet) take(tokens []string, uid int, key string) (hr *heldRun, ended []*heldRun) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var found []*heldRun
	for _, t := range tokens {
		if r := h.byToken[t]; r != nil && !slices.Contains(found, r) {
			found = append(found, r)
		}
	}
	if len(found) == 1 && sameSet(found[0].tokens, tokens) && found[0].st.caller.UID == uid && found[0].key == key {
		h.removeLocked(found[0])
		return found[0], nil
	}
	for _, r := range found {
		h.removeLocked(r)
	}
	return nil, found
}

// takeAll unparks every held run of uid (every one when uid < 0).
func (h *heldSet) takeAll(uid int) []*heldRun {
	h.mu.Lock()
	defer h.mu.Unlock()
	var all []*heldRun
	for _, r := range h.byToken {
		if (uid < 0 || r.st.caller.UID == uid) && !slices.Contains(all, r) {
			all = append(all, r)
		}
	}
	for _, r := range all {
		h.removeLocked(r)
	}
	return all
}

// count is how many runs of uid in session are parked.
func (h *heldSet) count(uid int, session string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	var seen []*heldRun
	for _, r := range h.byToken {
		if r.st.caller.UID == uid && r.st.plan.session == session && !slices.Contains(seen, r) {
			seen = append(seen, r)
		}
	}
	return len(seen)
}

// sameSet reports whether a and b hold the same tokens, each once.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y) && len(slices.Compact(y)) == len(b)
}

// offer holds the attempt for the front end's retry, if the caller has
// room for one more held attempt: the report carries the grants, and
// the run parks when Run returns (settle). Without room, it says so and
// the run ends as when no retry follows.
func (st *run) offer(granted []allowed) bool {
	tokens := make([]string, len(granted))
	ttl := time.Duration(-1)
	for i, g := range granted {
		tokens[i] = g.grant.Token
		if left := time.Until(g.grant.ExpiresAt); ttl < 0 || left < ttl {
			ttl = left
		}
	}
	if ttl <= 0 {
		// Expired already (the command ran past its grants' life): no
		// retry could use them.
		st.mu.Lock()
		for _, g := range granted {
			st.rep.Boundaries[g.at].Grant = "expired"
		}
		st.mu.Unlock()
		return false
	}
	used, err := st.pending.Used()
	if err != nil || !st.r.held.reserve(st.caller.UID, used) {
		st.warn("the retry is not held: your attempts waiting for their retry hold too many, or too large, changes; the grants are revoked and this attempt's changes are kept")
		return false
	}
	st.offered, st.heldBytes = granted, used
	st.unused = nil // the front end's now
	st.rep.Retry = &Retry{Grants: tokens, ExpiresInMS: ttl.Milliseconds()}
	st.ev.Event(Event{Kind: KindHeld, Attempt: st.attempt})
	return true
}

// settle parks a run that offered a retry and returns a copy of its
// report (the parked run goes on writing its own); any other run's
// report is returned as it is.
func (r *Runner) settle(st *run, rep *Report, err error) (*Report, error) {
	if st.offered == nil {
		return rep, err
	}
	shown := st.rep.snapshot()
	hr := &heldRun{st: st, tokens: st.rep.Retry.Grants, key: resumeKey(st.caller, st.job), bytes: st.heldBytes}
	st.ctx, st.ev = context.WithoutCancel(st.ctx), Discard{}
	r.held.add(hr, time.Duration(st.rep.Retry.ExpiresInMS)*time.Millisecond, func() {
		if r.held.remove(hr) {
			r.end(hr, "expired")
		}
	})
	r.log.Debug("attempt held for the client's retry", "uid", st.caller.UID, "grants", len(hr.tokens))
	return shown, nil
}

// end ends a held run no retry continues: its grants are revoked (each
// boundary says why: expired, declined or rejected) and its layer is
// committed, as the caller, as when no retry follows.
func (r *Runner) end(hr *heldRun, why string) (*Report, error) {
	st := hr.st
	st.mu.Lock()
	for _, g := range st.offered {
		st.rep.Boundaries[g.at].Grant = why
	}
	st.mu.Unlock()
	for _, g := range st.offered {
		// Recorded, as a grant that was not used and why.
		st.plan.broker.Withdraw(st.ctx, g.grant.Token, g.req, "the held retry was "+why, why == "expired")
	}
	st.offered, st.rep.Retry = nil, nil
	err := st.commit()
	st.closePending()
	if err != nil {
		r.log.Warn("a held attempt's layer could not be committed", "uid", st.caller.UID, "err", err)
		return st.failed(err)
	}
	return st.rep, nil
}

// resume continues the held run job.Present names (see above).
func (r *Runner) resume(ctx context.Context, c Caller, job Job, ev Events) (*Report, error) {
	hr, ended := r.held.take(job.Present, c.UID, resumeKey(c, job))
	for _, o := range ended {
		r.log.Warn("held grants presented for another job or caller; the hold ends", "uid", c.UID, "holder", o.st.caller.UID)
		r.end(o, "rejected")
	}
	if hr == nil {
		rep := &Report{ExitCode: ExitSandboxd, Boundaries: []Boundary{}, Session: job.Session, Command: job.Argv}
		err := publicerr.Wrap(ErrNotHeld, "the grants presented are not those of an attempt of yours waiting for this retry (another command, directory, session or caller, or used, declined or expired); nothing ran")
		if len(ended) > 0 {
			err = publicerr.Wrap(ErrNotHeld, "the grants presented were given for another command, directory, session or caller; they are revoked and nothing ran")
		}
		rep.Error = Public(err)
		return rep, err
	}
	st := hr.st
	st.ctx, st.ev = ctx, ev
	st.adopt(job)
	granted := st.offered
	st.offered, st.rep.Retry = nil, nil
	rep, err := func() (*Report, error) {
		defer st.closePending()
		return st.execute(func() error {
			consumed, ok := st.consume(granted)
			if !ok {
				return st.finish()
			}
			return st.attempts(consumed)
		})
	}()
	return r.settle(st, rep, err)
}

// adopt takes from the presenting job what may differ from the held
// one: the streams, signals and timeout of this request, and its person
// (who can be asked is whoever is at the presenting request's end, not
// at the first's, which has gone).
func (st *run) adopt(job Job) {
	if st.job.Reviewer != ReviewOff {
		st.job.Reviewers.Person = job.Reviewers.Person
		st.plan.broker.SetPerson(job.Reviewers.Person)
		st.plan.reviewer.Person = job.Reviewers.Person != nil
	}
	st.job.Stdin, st.job.Stdout, st.job.Stderr, st.job.Pipes = job.Stdin, job.Stdout, job.Stderr, job.Pipes
	st.job.Signals, st.job.Timeout, st.job.Hold = job.Signals, job.Timeout, job.Hold
	s := &st.plan.spec
	s.Stdin, s.Stdout, s.Stderr, s.Pipes, s.Signals, s.Timeout = job.Stdin, job.Stdout, job.Stderr, job.Pipes, job.Signals, job.Timeout
}

// Decline ends uid's held attempt the tokens name without a retry: its
// grants are revoked and its layer committed. It returns the run's final
// report.
func (r *Runner) Decline(ctx context.Context, uid int, tokens []string) (*Report, error) {
	// No held run has an empty key: every run the tokens name is
	// unparked, and ended here as declined if it is exactly uid's.
	_, ended := r.held.take(tokens, uid, "")
	var mine *Report
	for _, o := range ended {
		why := "declined"
		if o.st.caller.UID != uid || !sameSet(o.tokens, tokens) {
			why = "rejected"
		}
		rep, _ := r.end(o, why)
		if why == "declined" {
			mine = rep
		}
	}
	if mine == nil {
		return nil, publicerr.Wrap(ErrNotHeld, "no attempt of yours waits on exactly these grants (used, declined or expired)")
	}
	return mine, nil
}

// Held counts the attempts held for every caller.
func (r *Runner) Held() int {
	r.held.mu.Lock()
	defer r.held.mu.Unlock()
	n := 0
	for _, c := range r.held.perUID {
		n += c
	}
	return n
}

// Release ends every held attempt as declined (a daemon that stops): no
// grant outlives it, and no attempt's changes are lost.
func (r *Runner) Release() {
	for _, hr := range r.held.takeAll(-1) {
		r.end(hr, "declined")
	}
}

// resumeKey is what a retry must share with the held attempt: the
// caller and every part of the job that shapes the plan or the grants.
// The streams, signals and timeout may differ.
func resumeKey(c Caller, j Job) string {
	b, _ := json.Marshal(struct {
		UID, GID                        int
		Groups                          []int
		Env                             []string
		Cwd                             string
		Umask                           uint32
		Argv                            []string
		Command, Workspace, Policy      string
		Above                           []string
		Session, Agent, Intent, Stated  string
		Reviewer                        string
		RequireCwd, NoTx, NoDetect, Iso bool
		Retries                         int
	}{c.UID, c.GID, c.Groups, c.Env, c.Cwd, c.Umask, j.Argv, j.commandString(), j.Workspace, j.Policy, j.Above,
		j.Session, j.Agent, j.Intent, j.Stated, j.Reviewer, j.RequireCwd, j.NoTransaction, j.NoDetect, j.RequireIsolation, j.Retries})
	return string(b)
}

// snapshot is a copy of the report that the run's later changes do not
// reach.
func (rep *Report) snapshot() *Report {
	c := *rep
	c.Boundaries = slices.Clone(rep.Boundaries)
	c.Persistence = slices.Clone(rep.Persistence)
	if rep.Transaction != nil {
		t := *rep.Transaction
		c.Transaction = &t
	}
	if rep.Retry != nil {
		r := *rep.Retry
		r.Grants = slices.Clone(r.Grants)
		c.Retry = &r
	}
	if rep.Reviewer != nil {
		v := *rep.Reviewer
		c.Reviewer = &v
	}
	return &c
}
