package broker

import (
	"context"
	"time"
)

// trace is what one decision's review did, for its audit record: the
// model's own verdict, its failure, a person's override, how long the
// reviewers took. The decision alone says only who decided last.
type trace struct {
	// start is when a reviewer (the model or a person) was first asked;
	// zero when none was.
	start    time.Time
	model    *Decision
	fault    string
	override bool
	took     time.Duration
}

type traceKey struct{}

// withTrace is ctx carrying a fresh trace for one decision.
func withTrace(ctx context.Context) (context.Context, *trace) {
	t := &trace{}
	return context.WithValue(ctx, traceKey{}, t), t
}

// traceOf is ctx's trace, or one nobody reads.
func traceOf(ctx context.Context) *trace {
	if t, ok := ctx.Value(traceKey{}).(*trace); ok {
		return t
	}
	return &trace{}
}

// asking notes that a reviewer is asked now (the first time counts).
func (t *trace) asking() {
	if t.start.IsZero() {
		t.start = time.Now()
	}
}

// reviewed notes that the reviewers are done: Took is how long those
// asked took (none asked: zero).
func (t *trace) reviewed() {
	if !t.start.IsZero() {
		t.took = time.Since(t.start)
	}
}

// fill copies the trace into a decision's audit event.
func (t *trace) fill(ev AuditEvent) AuditEvent {
	ev.Model, ev.Fault, ev.Override, ev.Took = t.model, t.fault, t.override, t.took
	return ev
}
