package session

import (
	"context"
	"errors"
	"slices"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/sandbox"
)

// allowed is a boundary whose grant the next attempt may consume.
type allowed struct {
	req   grants.Request
	grant *grants.Grant
	at    int // index in rep.Boundaries
}

// request is the boundary request a denial makes.
// The sandbox reports an observed destination as text (the kernel's
// record, the observer's sockaddr): it is read here, as it enters.
func (st *run) request(d sandbox.Denial) grants.Request {
	return grants.Request{
		Session: st.plan.session, Cwd: st.plan.cwd, Command: st.plan.command,
		Surface: d.Surface, Operation: d.Operation,
		Path: d.Path, ResolvedPath: d.Path, Ino: d.Ino, Born: d.Born,
		Programs: d.Programs, Agent: st.job.Agent, Intent: st.job.Intent, ToolCallID: st.job.ToolCallID, Attempt: st.attempt,
	}.WithDestinationText(d.Destination)
}

// decide asks the broker about one denial and records the boundary (or,
// for a quiet write, counts it). at is -1 for a quiet one.
func (st *run) decide(ctx context.Context, d sandbox.Denial, held bool) (broker.Result, int) {
	return st.record(d, st.ask(ctx, d), held)
}

// record adds a decided denial to the report (or counts a quiet one).
func (st *run) record(d sandbox.Denial, res broker.Result, held bool) (broker.Result, int) {
	if res.Decision.Source == broker.SourceQuiet {
		st.countQuiet(res.Decision.Rationale, d.Path)
		return res, -1
	}
	b := Boundary{Attempt: st.attempt, Surface: d.Surface, Operation: d.Operation,
		Path: d.Path, Destination: d.Destination, Decision: res.Decision.Outcome, Source: res.Decision.Source,
		Rationale: res.Decision.Rationale, Production: res.Decision.Production, Held: held}
	if res.Grant != nil {
		b.Grant = "issued"
	}
	st.mu.Lock()
	at := len(st.rep.Boundaries)
	st.rep.Boundaries = append(st.rep.Boundaries, b)
	st.mu.Unlock()
	st.ev.Event(Event{Kind: KindBoundary, Attempt: st.attempt, Boundary: &b})
	return res, at
}

// ask has the broker decide d.
func (st *run) ask(ctx context.Context, d sandbox.Denial) broker.Result {
	return st.askRequest(ctx, st.request(d))
}

// askRequest has the broker decide req; a boundary this run already had
// decided is not counted by the breaker again.
func (st *run) askRequest(ctx context.Context, req grants.Request) broker.Result {
	if st.seen(req) {
		return st.plan.broker.DecideAgain(ctx, req)
	}
	return st.plan.broker.Decide(ctx, req)
}

// seen reports whether this run already had req's boundary decided, and
// marks it decided.
func (st *run) seen(req grants.Request) bool {
	key := req.Key()
	st.mu.Lock()
	defer st.mu.Unlock()
	again := st.decided[key]
	if st.decided == nil {
		st.decided = map[boundary.Key]bool{}
	}
	st.decided[key] = true
	return again
}

// countQuiet adds a quiet denial to the report.
func (st *run) countQuiet(why, path string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i := range st.rep.Quiet {
		q := &st.rep.Quiet[i]
		if q.Why == why {
			q.Count++
			if len(q.Paths) < maxQuietPaths && !slices.Contains(q.Paths, path) {
				q.Paths = append(q.Paths, path)
			}
			return
		}
	}
	st.rep.Quiet = append(st.rep.Quiet, Quiet{Why: why, Count: 1, Paths: []string{path}})
}

// during decides a boundary while the attempt runs (see During).
func (st *run) during(ctx context.Context, d sandbox.Denial) broker.Result {
	res, _ := st.decide(ctx, d, true)
	return res
}

// review decides every boundary the attempt reported. A retry needs at
// least one, all allowed.
func (st *run) review(denials []sandbox.Denial) ([]allowed, bool) {
	var granted []allowed
	all, boundaries := true, 0
	results := st.askAll(denials)
	for i, d := range denials {
		req := st.request(d)
		res, at := st.record(d, results[i], false)
		if at < 0 {
			continue // quiet: neither triggers nor blocks a retry
		}
		boundaries++
		if res.Grant == nil {
			all = false
			continue
		}
		granted = append(granted, allowed{req: req, grant: res.Grant, at: at})
	}
	if boundaries > 0 {
		st.ev.Event(Event{Kind: KindReviewed, Attempt: st.attempt})
	}
	st.unused = st.unused[:0]
	for _, g := range granted {
		st.unused = append(st.unused, g.grant.Token)
	}
	return granted, all && boundaries > 0
}

// askAll has the broker decide every denial as it would one after
// another (the circuit breaker counts each before the next), with the
// model's reviews of those that reach it taken a few at a time.
func (st *run) askAll(denials []sandbox.Denial) []broker.Result {
	reqs := make([]grants.Request, len(denials))
	again := make([]bool, len(denials))
	for i, d := range denials {
		reqs[i] = st.request(d)
		again[i] = st.seen(reqs[i])
	}
	return st.plan.broker.DecideEach(st.ctx, reqs, again)
}

// revokeUnused removes the grants of a review no retry followed: nothing
// issued for this run outlives it.
func (st *run) revokeUnused() {
	for _, tok := range st.unused {
		st.r.grants.Revoke(tok)
	}
	st.unused = nil
}

// consume uses each grant against the object as it is now and, when all
// still fit, sets the next attempt's exceptions to exactly them.
func (st *run) consume(granted []allowed) ([]int, bool) {
	var exceptions []sandbox.Exception
	var consumed []int
	var shown []string
	ok := true
	for _, g := range granted {
		now := currentRequest(g.req)
		err := st.plan.broker.Consume(st.ctx, g.grant.Token, now)
		st.mu.Lock()
		b := &st.rep.Boundaries[g.at]
		switch {
		case err == nil:
			b.Grant = "consumed"
			consumed = append(consumed, g.at)
			exceptions = append(exceptions, sandbox.Exception{Operation: now.Operation, Path: now.ResolvedPath, Ino: now.Ino, Born: now.Born})
			shown = append(shown, string(now.Operation)+" "+now.ResolvedPath)
		case errors.Is(err, grants.ErrExpired):
			b.Grant = "expired"
			ok = false
		default:
			b.Grant, b.Rationale = "rejected", "the grant no longer fits: "+grantMismatch(err)
			ok = false
		}
		st.mu.Unlock()
	}
	if !ok {
		st.ev.Event(Event{Kind: KindNotRetrying, Attempt: st.attempt,
			Reason: "a grant no longer fits what it was given for (the object changed, or it expired)"})
		return nil, false
	}
	st.unused = nil // consumed, each removed from the store
	st.ev.Event(Event{Kind: KindRetrying, Attempt: st.attempt, Exceptions: shown, Discarded: st.pending != nil})
	st.plan.spec.Exceptions = exceptions
	return consumed, true
}

// grantMismatch says, safely, why a grant did not fit.
func grantMismatch(err error) string {
	switch {
	case errors.Is(err, grants.ErrMismatch):
		return "the request changed since the review (another object is there now)"
	case errors.Is(err, grants.ErrSession):
		return "the grant is for another session"
	case errors.Is(err, grants.ErrUnknown), errors.Is(err, grants.ErrMalformed):
		return "the grant is unknown or already used"
	}
	return "its use could not be recorded"
}

// staleReason is why a granted object that changed is not retried.
const staleReason = "the granted object changed between the review and the retry, so the grant no longer applies"

// tooLargeReason is why a grant to write a file over 1 GiB is not
// applied: the command writes a copy, and the copy is bounded.
const tooLargeReason = "the file granted for writing is over 1 GiB; a granted file is written through a copy, which is bounded, so the grant does not apply"

// beyondCallerReason is why a grant the caller's own permissions refuse
// is not applied.
const beyondCallerReason = "the grant was allowed, but your own permissions do not let you do it (a file to create where you may not write): a grant never gives more than your own rights"

// staleGrants marks the consumed grants of a retry that could not start.
func (st *run) staleGrants(consumed []int, why string) {
	st.mu.Lock()
	for _, i := range consumed {
		st.rep.Boundaries[i].Grant = "rejected"
		st.rep.Boundaries[i].Rationale = why
	}
	st.mu.Unlock()
	st.ev.Event(Event{Kind: KindNotRetrying, Attempt: st.attempt, Reason: why})
}

// currentRequest is req with the object's identity as it is now, so a
// grant for a path that was replaced (a symlink swapped in, a file
// recreated, a file to create that appeared) no longer matches.
func currentRequest(req grants.Request) grants.Request {
	now := req
	now.ToolCallID, now.Attempt = "", req.Attempt+1
	if req.Surface != boundary.Filesystem {
		return now
	}
	now.Ino, now.Born = 0, 0
	if ino, born, _, ok := sandbox.Identity(req.ResolvedPath); ok {
		now.Ino, now.Born = ino, born
	}
	return now
}
