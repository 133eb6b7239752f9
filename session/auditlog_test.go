package session

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/sandbox"
)

// auditSpy is an AuditRecorder that keeps what it is given and refuses
// the kinds it is told to.
type auditSpy struct {
	mu      sync.Mutex
	uid     int
	secrets []string
	kinds   []broker.AuditKind
	lost    int
	refuse  map[broker.AuditKind]bool
}

func (a *auditSpy) Record(_ context.Context, ev broker.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refuse[ev.Kind] {
		return errors.New("no space left on device")
	}
	a.kinds = append(a.kinds, ev.Kind)
	return nil
}

func (a *auditSpy) Lost(_ context.Context, _, _ string, n int) error {
	a.lost += n
	return nil
}

// A run's decisions reach the caller's audit log, named by the caller's
// uid; a record the log refuses turns the allow into a deny, which the
// run warns of and the report counts; the metrics never count it.
func TestRunAuditLog(t *testing.T) {
	for _, tc := range []struct {
		name     string
		refuse   broker.AuditKind
		want     string // the boundary
		failures int
	}{
		{"recorded", "", "1 make_reg new-file allow/policy consumed", 0},
		{"the decision refused", broker.AuditDecision, "1 make_reg new-file deny/error", 1},
		{"the grant refused", broker.AuditGrantIssued, "1 make_reg new-file deny/error", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.caller.Env = append(w.caller.Env, "GITHUB_TOKEN=ghp_0123456789abcdefghij")
			spy := &auditSpy{refuse: map[broker.AuditKind]bool{tc.refuse: true}}
			metrics := &auditSpy{}
			fake := &fakeSandbox{script: []attemptFunc{denies(1, fsDenial("make_reg", w.allowed)), denies(0)}}
			ev := &recorder{}
			rep, err := New(Config{Sandbox: fake, Auditor: metrics, AuditLog: func(uid int, secrets []string, _ policy.Audit) AuditRecorder {
				spy.uid, spy.secrets = uid, secrets
				return spy
			}}).Run(context.Background(), w.caller, job(1), ev)
			if err != nil {
				t.Fatal(err)
			}
			if got := boundaries(rep); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("boundaries %q, want %q", got, tc.want)
			}
			if spy.uid != w.caller.UID || !strings.Contains(strings.Join(spy.secrets, " "), "ghp_0123456789abcdefghij") {
				t.Fatalf("the log was opened for uid %d with secrets %q", spy.uid, spy.secrets)
			}
			if rep.AuditFailures != tc.failures {
				t.Fatalf("the report counts %d audit failures, want %d", rep.AuditFailures, tc.failures)
			}
			warned := false
			for _, e := range ev.events {
				warned = warned || e.Kind == KindWarning && strings.Contains(e.Reason, "audit log")
			}
			if warned != (tc.failures > 0) {
				t.Fatalf("warned %v of %d failures", warned, tc.failures)
			}
			if tc.refuse != broker.AuditDecision && (len(spy.kinds) == 0 || spy.kinds[0] != broker.AuditDecision) {
				t.Fatalf("the log got %v", spy.kinds)
			}
			if len(metrics.kinds) != len(spy.kinds) {
				t.Fatalf("the metrics counted %v, the log took %v", metrics.kinds, spy.kinds)
			}
		})
	}
}

// A run's lost detections are recorded.
func TestRunAuditLost(t *testing.T) {
	w := newWorld(t)
	spy := &auditSpy{}
	lossy := func(context.Context, sandbox.Spec, During) (sandbox.Result, error) {
		r, _ := denies(0)(nil, sandbox.Spec{}, nil)
		r.Detection.Lost, r.Detection.Why = 3, "the kernel dropped records"
		return r, nil
	}
	fake := &fakeSandbox{script: []attemptFunc{lossy}}
	if _, err := New(Config{Sandbox: fake, AuditLog: func(int, []string, policy.Audit) AuditRecorder { return spy }}).Run(context.Background(), w.caller, job(1), nil); err != nil {
		t.Fatal(err)
	}
	if spy.lost != 3 {
		t.Fatalf("recorded %d lost detections", spy.lost)
	}
}
