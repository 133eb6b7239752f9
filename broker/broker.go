package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/grants"
)

// DefaultGrantTTL is how long an issued grant stays usable.
const DefaultGrantTTL = 5 * time.Minute

// Rules are the policy's boundary rules.
type Rules struct {
	Allow, Ask, Deny []Rule
}

// HardDenies are refused whatever the rules or a reviewer say.
type HardDenies struct {
	// Secrets are credential stores and other denied reads (absolute).
	Secrets []string
	// Own are sandboxd's own configuration and state directories.
	Own []string
	// Home is the user's home: removing it (or /) is refused.
	Home string
	// Workspace holds persistence paths: a refused write inside it is one
	// (see persistence).
	Workspace string
}

// Config is everything a Broker uses.
type Config struct {
	Rules Rules
	Hard  HardDenies
	// Model is the model reviewer's slot (nil: none configured).
	Model Reviewer
	// Person is the human reviewer's slot (nil: nobody to ask).
	Person Person
	// Auditor records every decision and grant event (nil: none).
	Auditor Auditor
	Grants  GrantStore // required
	Breaker *Breaker   // nil: no circuit breaker
	// GrantTTL is how long an issued grant stays usable.
	GrantTTL time.Duration
	Log      *slog.Logger
	// Grantable, if set, says whether the sandbox can grant a request
	// exactly; one it cannot is denied before any reviewer is asked.
	Grantable func(grants.Request) (bool, string)
}

// Broker decides boundary requests. It is safe for concurrent use: its
// configuration is read-only, the grant store and the breaker lock
// their own state.
type Broker struct {
	cfg Config
}

// New returns a Broker.
func New(cfg Config) *Broker {
	if cfg.GrantTTL <= 0 {
		cfg.GrantTTL = DefaultGrantTTL
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Broker{cfg: cfg}
}

// Decide decides one request: policy deny rules, hard denies, what the
// sandbox can grant, ask rules and the session's lockdown, policy allow
// rules, then the reviewers in their order (the model; a person when the
// model is absent or failed, or the session is locked down, and a person
// is reachable; otherwise deny), then the consistency rules. The decision
// is recorded before it takes effect, an allow gets its grant (except on
// the command surface, which is never granted), and the breaker counts
// the final outcome. It never returns an allow of a grantable surface
// without a grant.
func (b *Broker) Decide(ctx context.Context, req grants.Request) Result {
	res := b.settle(ctx, req, b.decide(ctx, req))
	if b.cfg.Breaker != nil && req.Session != "" {
		if tripped, err := b.cfg.Breaker.Record(req.Session, res.Decision.Outcome != Allow); err != nil {
			b.cfg.Log.Warn("circuit breaker", "err", err)
		} else if tripped {
			b.cfg.Log.Warn("session locked down", "session", req.Session)
		}
	}
	return res
}

// settle records the decision and, for an allow, issues and records its
// grant; a failure of either turns the allow into a deny.
func (b *Broker) settle(ctx context.Context, req grants.Request, d Decision) Result {
	if err := b.record(ctx, AuditEvent{Kind: AuditDecision, Request: req, Decision: d}); err != nil {
		if d.Outcome != Allow {
			return Result{Decision: d}
		}
		return Result{Decision: deny(SourceError, "the decision could not be recorded, so nothing is allowed")}
	}
	if d.Outcome != Allow || req.Surface == grants.Command {
		return Result{Decision: d}
	}
	g, err := b.cfg.Grants.Issue(req, b.cfg.GrantTTL)
	if err != nil {
		b.cfg.Log.Error("issue a grant", "err", err)
		return Result{Decision: deny(SourceError, "a grant could not be issued")}
	}
	if err := b.record(ctx, AuditEvent{Kind: AuditGrantIssued, Request: req, RequestHash: g.RequestHash, ExpiresAt: g.ExpiresAt}); err != nil {
		b.cfg.Grants.Revoke(g.Token)
		return Result{Decision: deny(SourceError, "the grant could not be recorded, so nothing is allowed")}
	}
	return Result{Decision: d, Grant: &g}
}

// Consume uses a grant for req, the request as it is now (the retry's),
// and records the outcome. An error means the grant does not apply.
func (b *Broker) Consume(ctx context.Context, token string, req grants.Request) error {
	err := b.cfg.Grants.Consume(token, req)
	ev := AuditEvent{Kind: AuditGrantConsumed, Request: req, RequestHash: req.Hash()}
	if err != nil {
		ev.Kind, ev.Why = AuditGrantRejected, err.Error()
	}
	if aerr := b.record(ctx, ev); aerr != nil && err == nil {
		return fmt.Errorf("broker: %w", errUnrecorded)
	}
	return err
}

// errUnrecorded is a consumed grant the auditor could not record: it is
// gone, and nothing it allowed is used.
var errUnrecorded = errors.New("the grant's use could not be recorded")

// record calls the auditor, if any; its error is logged here and only
// its effect (a deny) reaches the caller.
func (b *Broker) record(ctx context.Context, ev AuditEvent) error {
	if b.cfg.Auditor == nil {
		return nil
	}
	err := b.cfg.Auditor.Record(ctx, ev)
	if err != nil {
		b.cfg.Log.Error("auditor", "event", string(ev.Kind), "err", err)
	}
	return err
}

func deny(src Source, why string) Decision {
	return Decision{Outcome: Deny, Rationale: why, Source: src}
}

// malformed says what is wrong with a request's shape, or "".
func malformed(req grants.Request) string {
	switch {
	case !req.Surface.Valid():
		return "unknown surface"
	case !req.Operation.Of(req.Surface):
		return "unknown operation for its surface"
	case req.Surface == grants.Filesystem && req.ResolvedPath == "" && req.Path == "",
		req.Surface == grants.Network && req.Destination == "",
		req.Surface == grants.Command && req.Command == "":
		return "incomplete request"
	}
	return ""
}

func (b *Broker) decide(ctx context.Context, req grants.Request) Decision {
	if why := malformed(req); why != "" {
		return deny(SourceError, why)
	}
	for _, r := range b.cfg.Rules.Deny {
		if r.MatchesEither(req) {
			return deny(SourcePolicy, "a policy deny rule matches")
		}
	}
	if hard, why := b.cfg.Hard.check(req); hard {
		return deny(SourceHardDeny, why)
	}
	if b.cfg.Grantable != nil && req.Surface != grants.Command {
		if ok, why := b.cfg.Grantable(req); !ok {
			return deny(SourceHardDeny, "not grantable: "+why)
		}
	}
	locked, why, err := b.locked(req.Session)
	if err != nil {
		b.cfg.Log.Error("circuit breaker state", "err", err)
		return deny(SourceError, "the circuit breaker's state is unavailable")
	}
	if !locked && !b.asked(req) {
		for _, r := range b.cfg.Rules.Allow {
			if r.Matches(req) {
				return Decision{Outcome: Allow, RiskLevel: RiskLow, Rationale: "a policy allow rule matches", Source: SourcePolicy}
			}
		}
	}
	return b.review(ctx, req, locked, why)
}

// locked reports whether the request's session is locked down.
func (b *Broker) locked(session string) (bool, string, error) {
	if b.cfg.Breaker == nil || session == "" {
		return false, "", nil
	}
	return b.cfg.Breaker.Locked(session)
}

// asked reports whether an ask rule sends req to a reviewer whatever the
// allow rules say.
func (b *Broker) asked(req grants.Request) bool {
	for _, r := range b.cfg.Rules.Ask {
		if r.MatchesEither(req) {
			return true
		}
	}
	return false
}

// review asks the reviewers in their order.
func (b *Broker) review(ctx context.Context, req grants.Request, locked bool, lockWhy string) Decision {
	person, away := false, ""
	if b.cfg.Person != nil {
		person, away = b.cfg.Person.Reachable()
	}
	fallback := deny(SourceNoReviewer, "no reviewer is configured, so anything the policy does not allow is denied")
	if b.cfg.Person != nil && !person {
		// The person chosen to review cannot be asked: theirs is the deny.
		fallback = deny(SourceHuman, away)
	}
	switch {
	case locked && !person:
		return deny(SourceCircuitBreaker, "the session is locked down ("+lockWhy+"); only a person can review it")
	case !locked && b.cfg.Model != nil:
		d, err := b.cfg.Model.Review(ctx, req)
		if err == nil {
			return consistent(d, SourceReviewer)
		}
		b.cfg.Log.Warn("model reviewer failed", "err", err)
		fallback = deny(SourceError, "the model reviewer failed")
	}
	if !person {
		return fallback
	}
	d, err := b.cfg.Person.Review(ctx, req)
	if err != nil {
		b.cfg.Log.Warn("human reviewer failed", "err", err)
		return deny(SourceError, "the person could not be asked")
	}
	return consistent(d, SourceHuman)
}

// consistent applies DESIGN.md §3.3 to a reviewer's answer: the model
// never grants directly, and an allow must be consistent.
func consistent(d Decision, src Source) Decision {
	if d.Source == "" {
		d.Source = src
	}
	if d.Outcome != Allow {
		d.Outcome = Deny
		return d
	}
	switch {
	case d.RiskLevel == RiskCritical:
		return deny(d.Source, "an allow at critical risk is refused")
	case d.RiskLevel == RiskHigh && d.UserAuthorization != AuthMedium && d.UserAuthorization != AuthHigh:
		return deny(d.Source, "a high-risk allow needs clear authorization from the user")
	case d.RiskLevel == "" && d.Source != SourceHuman:
		return deny(d.Source, "a reviewer allow without a risk level is refused")
	}
	return d
}

// metadataHosts are cloud instance metadata endpoints: credentials live
// there.
var metadataHosts = []string{"169.254.169.254", "metadata.google.internal", "[fd00:ec2::254]", "fd00:ec2::254", "100.100.100.200"}

func (h HardDenies) check(req grants.Request) (bool, string) {
	if req.Surface == grants.Network {
		host, _ := splitHostPort(req.Destination)
		for _, m := range metadataHosts {
			if strings.EqualFold(host, strings.Trim(m, "[]")) {
				return true, "cloud metadata endpoints hold credentials"
			}
		}
		return false, ""
	}
	for _, p := range []string{req.Path, req.ResolvedPath} {
		if p == "" {
			continue
		}
		p = filepath.Clean(p)
		for _, s := range h.Secrets {
			if within(p, s) {
				return true, "credential stores are never opened to a sandboxed command"
			}
		}
		for _, s := range h.Own {
			if within(p, s) {
				return true, "sandboxd's own configuration and state are never opened to a sandboxed command"
			}
		}
		if (req.Operation == grants.OpRemoveDir || req.Operation == grants.OpRemoveFile) && (p == "/" || (h.Home != "" && p == filepath.Clean(h.Home))) {
			return true, "removing / or the home directory is refused"
		}
		if h.persistence(p, req.Operation) {
			return true, "persistence paths (git hooks and config, editor tasks, agent settings, shell rc files) are never granted"
		}
	}
	return false, ""
}

// within reports whether p is dir or below it; the last element of dir
// may be a glob.
func within(p, dir string) bool {
	dir = filepath.Clean(dir)
	if p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/") {
		return true
	}
	if strings.ContainsAny(filepath.Base(dir), "*?[") {
		for d := p; d != "/" && d != "."; d = filepath.Dir(d) {
			if ok, _ := filepath.Match(dir, d); ok {
				return true
			}
		}
	}
	return false
}

// persistence reports whether a write-like operation touches a persistence
// path of the workspace. Landlock lets the command write the whole
// workspace; the only writes refused inside it are persistence paths
// bound read-only (and directories pinned on the way to them), and refusals
// at commit ("persist"), so any refused write there is one, under whatever
// name git or a tool uses it.
func (h HardDenies) persistence(p string, op grants.Operation) bool {
	if op.Reads() || h.Workspace == "" {
		return false
	}
	rel, err := filepath.Rel(h.Workspace, p)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return false
	}
	return true
}
