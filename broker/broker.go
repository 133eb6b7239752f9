package broker

import (
	"context"
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
	Rules    Rules
	Hard     HardDenies
	Reviewer Reviewer   // nil: every open request is denied (no-reviewer)
	Grants   GrantStore // required
	Breaker  *Breaker   // nil: no circuit breaker
	GrantTTL time.Duration
	Log      *slog.Logger
	// Grantable, if set, says whether the sandbox can grant a request
	// exactly; one it cannot is denied before any reviewer is asked.
	Grantable func(grants.Request) (bool, string)
}

// Broker decides boundary requests.
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

// Decide runs the pipeline for one request. It never returns an allow
// without a grant.
func (b *Broker) Decide(ctx context.Context, req grants.Request) Result {
	d := b.decide(ctx, req)
	if b.cfg.Breaker != nil && req.Session != "" {
		if tripped, err := b.cfg.Breaker.Record(req.Session, d.Outcome != Allow); err != nil {
			b.cfg.Log.Warn("circuit breaker", "err", err)
		} else if tripped {
			b.cfg.Log.Warn("session locked down", "session", req.Session)
		}
	}
	if d.Outcome != Allow {
		return Result{Decision: d}
	}
	g, err := b.cfg.Grants.Issue(req, b.cfg.GrantTTL)
	if err != nil {
		return Result{Decision: deny(SourceError, "could not issue a grant: "+err.Error())}
	}
	return Result{Decision: d, Grant: &g}
}

func deny(src Source, why string) Decision {
	return Decision{Outcome: Deny, Rationale: why, Source: src}
}

func (b *Broker) decide(ctx context.Context, req grants.Request) Decision {
	if req.Surface != grants.Filesystem && req.Surface != grants.Network {
		return deny(SourceError, fmt.Sprintf("unknown surface %q", req.Surface))
	}
	if req.Operation == "" || (req.Surface == grants.Filesystem && req.ResolvedPath == "" && req.Path == "") ||
		(req.Surface == grants.Network && req.Destination == "") {
		return deny(SourceError, "incomplete request")
	}
	for _, r := range b.cfg.Rules.Deny {
		if r.MatchesEither(req) {
			return deny(SourcePolicy, "a policy deny rule matches")
		}
	}
	if hard, why := b.cfg.Hard.check(req); hard {
		return deny(SourceHardDeny, why)
	}
	if b.cfg.Grantable != nil {
		if ok, why := b.cfg.Grantable(req); !ok {
			return deny(SourceHardDeny, "not grantable: "+why)
		}
	}
	asked := false
	for _, r := range b.cfg.Rules.Ask {
		if r.MatchesEither(req) {
			asked = true
			break
		}
	}
	locked := false
	if b.cfg.Breaker != nil && req.Session != "" {
		l, why, err := b.cfg.Breaker.Locked(req.Session)
		if err != nil {
			return deny(SourceError, "circuit breaker state unavailable")
		}
		if l {
			locked = true
			if _, human := b.cfg.Reviewer.(Human); !human {
				return deny(SourceCircuitBreaker, "the session is locked down ("+why+"); only a human can review it")
			}
		}
	}
	if !asked && !locked {
		for _, r := range b.cfg.Rules.Allow {
			if r.Matches(req) {
				return Decision{Outcome: Allow, RiskLevel: RiskLow, Rationale: "a policy allow rule matches", Source: SourcePolicy}
			}
		}
	}
	if b.cfg.Reviewer == nil {
		return deny(SourceNoReviewer, "no reviewer is configured, so anything the policy does not allow is denied")
	}
	d, err := b.cfg.Reviewer.Review(ctx, req)
	if err != nil {
		return deny(SourceError, "the reviewer failed: "+err.Error())
	}
	if d.Source == "" {
		d.Source = SourceReviewer
	}
	if d.Outcome != Allow {
		d.Outcome = Deny
		return d
	}
	// The model never grants directly: an allow must be consistent.
	switch {
	case d.RiskLevel == RiskCritical:
		return deny(d.Source, "an allow at critical risk is refused")
	case d.RiskLevel == RiskHigh && d.UserAuthorization != AuthMedium && d.UserAuthorization != AuthHigh:
		return deny(d.Source, "a high-risk allow needs clear authorization from the user")
	case d.RiskLevel == "":
		if d.Source != SourceHuman {
			return deny(d.Source, "a reviewer allow without a risk level is refused")
		}
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
		if strings.HasPrefix(req.Operation, "remove") && (p == "/" || (h.Home != "" && p == filepath.Clean(h.Home))) {
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
func (h HardDenies) persistence(p, op string) bool {
	if op == "read_file" || op == "read_dir" || op == "execute" || h.Workspace == "" {
		return false
	}
	rel, err := filepath.Rel(h.Workspace, p)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return false
	}
	return true
}
