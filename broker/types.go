package broker

import (
	"context"
	"time"

	"github.com/sandboxd/sandboxd/grants"
)

// Outcome is allow or deny.
type Outcome string

// Outcomes.
const (
	Allow Outcome = "allow"
	Deny  Outcome = "deny"
)

// Risk is a reviewer's judgement of what an allow could cost.
type Risk string

// Risk levels.
const (
	RiskLow      Risk = "low"
	RiskMedium   Risk = "medium"
	RiskHigh     Risk = "high"
	RiskCritical Risk = "critical"
)

// valid reports whether r is one of the levels (or unset).
func (r Risk) valid() bool {
	switch r {
	case "", RiskLow, RiskMedium, RiskHigh, RiskCritical:
		return true
	}
	return false
}

// Authorization is how clearly the user's request asked for this.
type Authorization string

// Authorization levels.
const (
	AuthUnknown Authorization = "unknown"
	AuthLow     Authorization = "low"
	AuthMedium  Authorization = "medium"
	AuthHigh    Authorization = "high"
)

// valid reports whether a is one of the levels (or unset).
func (a Authorization) valid() bool {
	switch a {
	case "", AuthUnknown, AuthLow, AuthMedium, AuthHigh:
		return true
	}
	return false
}

// Source says who decided (docs/ARCHITECTURE.md §3.6).
type Source string

// Sources.
const (
	SourcePolicy   Source = "policy"
	SourceHardDeny Source = "hard-deny"
	SourceReviewer Source = "reviewer"
	SourceHuman    Source = "human"
	// SourceClient: a person's answer relayed by an API client of the
	// daemon. Nothing shows who typed it, so it may allow only what a
	// reviewer may (the consistency rules, with the model's risk level),
	// never a critical boundary.
	SourceClient Source = "client"
	// SourcePage: a person's answer on the daemon's approvals page. The
	// page's user proved, with a one-time link printed only on their own
	// terminal, that they are the person at it: they may allow what a
	// person at the terminal may, a critical boundary only with the typed
	// break-glass phrase, which the page checks before it answers.
	SourcePage  Source = "page"
	SourceGrant Source = "grant"
	// SourceIntent: a person's intent for the session (sandboxd approve
	// --scope, or the approvals page) covers the request; the decision
	// names the intent.
	SourceIntent         Source = "intent"
	SourceCircuitBreaker Source = "circuit-breaker"
	SourceNoReviewer     Source = "no-reviewer"
	SourceError          Source = "error"
	// SourceQuiet: a write to a tool's own state on the quiet list,
	// denied without review; not a boundary, never counted.
	SourceQuiet Source = "quiet"
)

// Decision is the answer to one request (docs/ARCHITECTURE.md §3.6).
type Decision struct {
	Outcome           Outcome       `json:"outcome"`
	RiskLevel         Risk          `json:"risk_level,omitempty"`
	UserAuthorization Authorization `json:"user_authorization,omitempty"`
	// Rationale is safe to show the agent and the user.
	Rationale string `json:"rationale"`
	Source    Source `json:"source"`
	// Production is the production marker the boundary's target matches
	// (policy's [review] production), when it does: the decision was
	// critical before anyone was asked, and only a person may allow it.
	// Rationale says which name matched.
	Production string `json:"production,omitempty"`
	// Intent is the id of the person's intent that allowed the request
	// (source intent).
	Intent string `json:"intent,omitempty"`
}

// Intent is a person's approval, for one session, of every request one
// scope covers: a boundary rule in its normal form (ParseRule), bound
// to the hash of exactly that text, until it expires.
type Intent struct {
	ID    string
	Scope string
	// Hash is the hex SHA-256 of Scope: a scope whose text does not hash
	// to it is void.
	Hash      string
	ExpiresAt time.Time
}

// IntentStore holds the people's intents of each session.
type IntentStore interface {
	// Intents returns session's live intents. An error means none is
	// used: the request goes on to the reviewers.
	Intents(ctx context.Context, session string) ([]Intent, error)
}

// Reviewer decides requests the rules leave open. A model reviewer
// returns Source reviewer; a person Source human. An error is a deny (or,
// for the model, a question to a person when one is reachable).
type Reviewer interface {
	Review(ctx context.Context, req grants.Request) (Decision, error)
}

// Person is the human reviewer's slot: a person may still allow during a
// lockdown, and is asked only when reachable (a terminal, an approvals
// page someone watches).
type Person interface {
	Reviewer
	// Reachable reports whether a person can be asked now and, when not,
	// why (a sentence safe to show).
	Reachable() (bool, string)
}

// Deferrer is a Person that also takes the model's denials: the model's
// deny goes to the person, who may overturn it (a daemon's question
// queue, which an API client relays). The person reads the model's
// decision with Deferred. A person that is no Deferrer is asked only
// when the model is absent or failed, or in a lockdown.
type Deferrer interface {
	TakesDenials() bool
}

type deferredKey struct{}

// WithDeferred is ctx carrying the model's decision a person is asked
// to review (the broker sets it; tests of a person use it).
func WithDeferred(ctx context.Context, model Decision) context.Context {
	return context.WithValue(ctx, deferredKey{}, model)
}

// Deferred is the model's decision a person is asked to review, when
// the model denied and deferred to the person.
func Deferred(ctx context.Context) (Decision, bool) {
	d, ok := ctx.Value(deferredKey{}).(Decision)
	return d, ok
}

// GrantStore issues and consumes grants.
type GrantStore interface {
	Issue(req grants.Request, ttl time.Duration) (grants.Grant, error)
	// IssueUses issues a grant with uses uses (or grants.Unlimited).
	IssueUses(req grants.Request, ttl time.Duration, uses int) (grants.Grant, error)
	Consume(token string, req grants.Request) error
	Revoke(token string)
}

// OverrideStore holds a person's exact overrides of model denials
// (`sandboxd approve`): one use, for one request hash, in one session.
type OverrideStore interface {
	// Use consumes a valid, unexpired, unused override for req.Hash() in
	// req.Session and reports whether there was one. Of two racing uses
	// of one override exactly one reports true.
	Use(ctx context.Context, req grants.Request) (bool, error)
}

// DenialRecorder records the model reviewer's denials, so a person may
// later turn one into an override.
type DenialRecorder interface {
	Record(ctx context.Context, req grants.Request, d Decision) error
}

// Auditor records every decision and grant event before it takes
// effect. An error makes an allow a deny (source error): nothing is
// allowed that was not recorded.
type Auditor interface {
	Record(ctx context.Context, ev AuditEvent) error
}

// AuditKind names an audit event.
type AuditKind string

// Audit events.
const (
	AuditDecision      AuditKind = "decision"
	AuditGrantIssued   AuditKind = "grant_issued"
	AuditGrantConsumed AuditKind = "grant_consumed"
	AuditGrantRejected AuditKind = "grant_rejected"
	// AuditReviewFault: the model reviewer failed (Fault says how); the
	// decision that followed is recorded on its own.
	AuditReviewFault AuditKind = "review_fault"
	// AuditOverrideUsed: a person's one-use override (sandboxd approve
	// or break-glass) decided this request.
	AuditOverrideUsed AuditKind = "override_used"
	// AuditBreakerTripped: this decision locked its session down.
	AuditBreakerTripped AuditKind = "breaker_tripped"
)

// AuditEvent is one thing the broker did.
type AuditEvent struct {
	Kind    AuditKind
	Request grants.Request
	// Decision is set for AuditDecision.
	Decision Decision
	// RequestHash and ExpiresAt identify a grant (never its token).
	RequestHash [32]byte
	ExpiresAt   time.Time
	// Why says why a grant was rejected (expired, mismatched, ...);
	// Expired, that it had expired.
	Why     string
	Expired bool
	// Model is the model reviewer's own verdict on this request, set
	// on a decision the model judged (a person may have decided after
	// it); Fault says why the model reviewer failed; Override, that a
	// person's override decided; Took, how long the reviewers took
	// (zero when none was asked).
	Model    *Decision
	Fault    string
	Override bool
	Took     time.Duration
}

// Result is a decision and, for an allow of a grantable surface, its
// grant.
type Result struct {
	Decision Decision
	Grant    *grants.Grant
}
