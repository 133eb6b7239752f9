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

// Authorization is how clearly the user's request asked for this.
type Authorization string

// Authorization levels.
const (
	AuthUnknown Authorization = "unknown"
	AuthLow     Authorization = "low"
	AuthMedium  Authorization = "medium"
	AuthHigh    Authorization = "high"
)

// Source says who decided (DESIGN.md §3.1).
type Source string

// Sources.
const (
	SourcePolicy         Source = "policy"
	SourceHardDeny       Source = "hard-deny"
	SourceReviewer       Source = "reviewer"
	SourceHuman          Source = "human"
	SourceGrant          Source = "grant"
	SourceCircuitBreaker Source = "circuit-breaker"
	SourceNoReviewer     Source = "no-reviewer"
	SourceError          Source = "error"
)

// Decision is the answer to one request (DESIGN.md §3.3).
type Decision struct {
	Outcome           Outcome       `json:"outcome"`
	RiskLevel         Risk          `json:"risk_level,omitempty"`
	UserAuthorization Authorization `json:"user_authorization,omitempty"`
	// Rationale is safe to show the agent and the user.
	Rationale string `json:"rationale"`
	Source    Source `json:"source"`
}

// Reviewer decides requests the rules leave open. A human reviewer
// returns Source human; a model reviewer Source reviewer. An error is a
// deny.
type Reviewer interface {
	Review(ctx context.Context, req grants.Request) (Decision, error)
}

// Human is a reviewer that is a person: during a lockdown only a Human may
// still allow, and only a Human lifts a lockdown.
type Human interface {
	Reviewer
	// IsHuman marks the implementation.
	IsHuman()
}

// GrantStore issues grants for allowed requests.
type GrantStore interface {
	Issue(req grants.Request, ttl time.Duration) (grants.Grant, error)
}

// Result is a decision and, for an allow, its grant.
type Result struct {
	Decision Decision
	Grant    *grants.Grant
}
