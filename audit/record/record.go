package record

import (
	"context"
	"encoding/hex"
	"unicode/utf8"

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
	return r.To.Append(ctx, audit.Event{Kind: audit.KindLostDetections, UID: &uid, Session: r.redCut(session, maxText),
		Command: r.redCut(command, maxCommand), Count: n})
}

// The longest a record's command and other text may be: every record
// of a run carries its command, and a command of megabytes met at
// thousands of boundaries would fill the machine's disk, which denies
// everything (a record the log refuses is a deny). A path keeps its
// whole length (PATH_MAX): a rule is suggested from it.
const (
	maxCommand = 2 << 10
	maxText    = 1 << 10
	maxPath    = 4 << 10
)

func (r Recorder) red(s string) string {
	if r.Redact == nil || s == "" {
		return s
	}
	return r.Redact(s)
}

// redCut is red(s), at most n bytes (whole characters) and the mark.
func (r Recorder) redCut(s string, n int) string {
	s = r.red(s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + audit.CutMark
}

// event is ev as a record's event.
func (r Recorder) event(ev broker.AuditEvent) audit.Event {
	uid := r.UID
	req := ev.Request
	out := audit.Event{UID: &uid, Session: r.redCut(req.Session, maxText), Command: r.redCut(req.Command, maxCommand),
		Cwd: r.redCut(req.Cwd, maxPath), Surface: string(req.Surface), Operation: string(req.Operation),
		Target: r.redCut(target(req), maxPath)}
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
		out.Kind, out.Why = audit.KindGrantRejected, r.redCut(ev.Why, maxText)
		if ev.Expired {
			out.Kind = audit.KindGrantExpired
		}
	case broker.AuditReviewFault:
		out.Kind, out.Why = audit.KindReviewFault, r.redCut(ev.Fault, maxText)
	case broker.AuditOverrideUsed:
		out.Kind, out.Note = audit.KindOverride, "used"
	case broker.AuditBreakerTripped:
		out.Kind, out.Rationale = audit.KindBreakerTripped, r.redCut(ev.Decision.Rationale, maxText)
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
	out.Rationale, out.Production = r.redCut(d.Rationale, maxText), d.Production
	out.Intent = d.Intent
	out.ReviewMS = ev.Took.Milliseconds()
	if m := ev.Model; m != nil {
		out.ModelOutcome, out.ModelRisk = string(m.Outcome), string(m.RiskLevel)
	}
	switch d.Source {
	case broker.SourceHuman:
		out.AnswerSource = "person"
	case broker.SourceClient:
		out.AnswerSource = "client"
	case broker.SourcePage:
		out.AnswerSource = "page"
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
