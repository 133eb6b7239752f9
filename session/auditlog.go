package session

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/policy"
)

// AuditFactory opens the audit log's recorder for one caller's run (the
// front end's: the caller's own log when embedded, the machine's in the
// daemon). Its records name uid and are redacted of secrets: the
// values of the caller's environment the policy strips as credentials.
// keep is the caller's policy's [audit] table, which the caller's own
// log follows (the daemon's is the operator's).
type AuditFactory func(uid int, secrets []string, keep policy.Audit) AuditRecorder

// AuditRecorder records one run's decisions and grant events (the
// broker's), and what else the run tells the log.
type AuditRecorder interface {
	broker.Auditor
	// Lost records that the run's detection lost n denials (n < 0: an
	// unknown number).
	Lost(ctx context.Context, session, command string, n int) error
}

// errAuditUnwritable is a record the audit log could not take.
var errAuditUnwritable = errors.New("session: the audit log could not be written")

// runAudit is one run's recorders: the caller's audit log first, then
// the Runner's own auditor (the daemon's metrics). A record the log
// could not take fails the event (the broker turns an allow into a
// deny) and is counted for the report; the metrics do not count an
// event the log did not take.
type runAudit struct {
	log    AuditRecorder // nil: none
	also   broker.Auditor
	failed atomic.Int64
}

func (a *runAudit) Record(ctx context.Context, ev broker.AuditEvent) error {
	if a.log != nil {
		if err := a.log.Record(ctx, ev); err != nil {
			a.failed.Add(1)
			return errors.Join(errAuditUnwritable, err)
		}
	}
	if a.also != nil {
		return a.also.Record(ctx, ev)
	}
	return nil
}

// lost records a run's lost detections; a failure is counted, and
// nothing else comes of it (the run is over).
func (a *runAudit) lost(ctx context.Context, session, command string, n int) {
	if a == nil || a.log == nil || n == 0 {
		return
	}
	if err := a.log.Lost(ctx, session, command, n); err != nil {
		a.failed.Add(1)
	}
}

// failures is how many records the log could not take.
func (a *runAudit) failures() int {
	if a == nil {
		return 0
	}
	return int(a.failed.Load())
}
