package record

import (
	"context"
	"encoding/hex"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
)

// Recorder records one caller's broker events to a log: every record
// names the caller's uid and has every text field passed through
// Redact (the model reviewer's redactor: no secret value, token or key
// reaches the log).
type Recorder struct {
	To     audit.Appender
	UID    int
	Redact func(string) string
}

// Record is broker.Auditor's: the event as a record, or the log's error
// (the broker then denies what it would have allowed).
func (r Recorder) Record(ctx context.Context, ev broker.AuditEvent) error {
	return r.To.Append(ctx, r.event(ev))
}

// Lost records that a run's detection lost n denials.
func (r Recorder) Lost(ctx context.Context, session, command string, n int) error {
	uid := r.UID
	return r.To.Append(ctx, audit.Event{Kind: audit.KindLostDetections, UID: &uid, Session: r.red(session), Command: r.red(command), Count: n})
}

func (r Recorder) red(s string) string {
	if r.Redact == nil || s == "" {
		return s
	}
	return r.Redact(s)
}

// event is ev as a record's event.
func (r Recorder) event(ev broker.AuditEvent) audit.Event {
	uid := r.UID
	req := ev.Request
	out := audit.Event{UID: &uid, Session: r.red(req.Session), Command: r.red(req.Command), Cwd: r.red(req.Cwd),
		Surface: string(req.Surface), Operation: string(req.Operation), Target: r.red(target(req))}
	if ev.RequestHash != ([32]byte{}) {
		out.RequestHash = hex.EncodeToString(ev.RequestHash[:])
	}
	switch ev.Kind {
	case broker.AuditDecision:
		out.Kind = audit.KindDecision
		r.decision(&out, ev)
	case broker.AuditGrantIssued:
		out.Kind = audit.KindGrantIssued
		if !ev.ExpiresAt.IsZero() {
			t := ev.ExpiresAt.UTC()
			out.ExpiresAt = &t
		}
	case broker.AuditGrantConsumed:
		out.Kind = audit.KindGrantConsumed
	case broker.AuditGrantRejected:
		out.Kind, out.Why = audit.KindGrantRejected, r.red(ev.Why)
		if ev.Expired {
			out.Kind = audit.KindGrantExpired
		}
	case broker.AuditReviewFault:
		out.Kind, out.Why = audit.KindReviewFault, r.red(ev.Fault)
	case broker.AuditOverrideUsed:
		out.Kind, out.Note = audit.KindOverride, "used"
	case broker.AuditBreakerTripped:
		out.Kind, out.Rationale = audit.KindBreakerTripped, r.red(ev.Decision.Rationale)
	default:
		out.Kind, out.Note = audit.KindDecision, "an event this build does not know: "+string(ev.Kind)
	}
	return out
}

// decision fills a decision's fields: who decided and why, the model's
// own verdict when a person decided after it, how long review took.
func (r Recorder) decision(out *audit.Event, ev broker.AuditEvent) {
	d := ev.Decision
	out.Outcome, out.Source = string(d.Outcome), string(d.Source)
	out.Risk, out.Authorization = string(d.RiskLevel), string(d.UserAuthorization)
	out.Rationale, out.Production = r.red(d.Rationale), d.Production
	out.ReviewMS = ev.Took.Milliseconds()
	if m := ev.Model; m != nil {
		out.ModelOutcome, out.ModelRisk = string(m.Outcome), string(m.RiskLevel)
	}
	switch d.Source {
	case broker.SourceHuman:
		out.AnswerSource = "person"
	case broker.SourceClient:
		out.AnswerSource = "client"
	}
	if ev.Override {
		out.Note = "a person's one-use override"
	}
}

// target is a request's path or destination.
func target(req grants.Request) string {
	switch req.Surface {
	case boundary.Network:
		return req.DestinationText()
	case boundary.Filesystem:
		// The name the command used, as the report shows it; a rule for
		// it matches its resolved path too (broker.Rule.MatchesEither).
		if req.Path != "" {
			return req.Path
		}
		return req.ResolvedPath
	}
	return ""
}
