package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/netdest"
	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/publicerr"
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
	// Local reports the host's own interface addresses: like loopback, a
	// destination there is refused unless a rule names it (nil: none).
	Local func(netip.Addr) bool
	// Startup knows where, outside the workspace, the host runs or loads
	// something later without being asked (nil: nowhere). A write there
	// is refused unless an allow rule names that exact path.
	Startup StartupLocations
}

// StartupLocations is what the broker asks of the host's start-up
// locations: shell and session start-up files, user services, directories
// on PATH, other repositories' hooks.
type StartupLocations interface {
	// Startup says why a change at the absolute path p would be run or
	// loaded by the host later, or ok is false.
	Startup(p string) (why string, ok bool)
}

// QuietRule is one entry of the quiet list: writes below Pattern (a
// path glob as in Rule) are denied quietly, for Why.
type QuietRule struct {
	Pattern string
	Why     string
	// Tools are the programs whose own state Pattern is: an executable's
	// base name, or, holding a "/", a glob over the last elements of its
	// path ("pkg/tool/*_*/*": Go's toolchain programs in any GOROOT).
	// Creating a missing parent directory of Pattern is quiet too, but
	// only when these programs, and no other, tried it: the tool makes
	// its directories on the way to its state (a fresh home has no
	// ~/.config), while `mkdir -p ~/.config/systemd/user` is a boundary.
	Tools []string
}

// Config is everything a Broker uses.
type Config struct {
	Rules Rules
	Hard  HardDenies
	// Quiet lists tool state whose writes are denied without review.
	Quiet []QuietRule
	// Model is the model reviewer's slot (nil: none configured).
	Model Reviewer
	// Person is the human reviewer's slot (nil: nobody to ask).
	Person Person
	// Auditor records every decision and grant event (nil: none).
	Auditor Auditor
	// Overrides holds a person's exact overrides of model denials (nil:
	// none). They are consulted only where a reviewer would be asked:
	// after the deny rules, the hard denies and everything else that
	// denies without review.
	Overrides OverrideStore
	// Intents holds the people's intents of each session (nil: none).
	// They are consulted where the allow rules are: after the deny rules
	// and the hard denies, never for an ask rule's request, a locked-down
	// session or a production target.
	Intents IntentStore
	// ModelDenials records the model's own denials, for a person to
	// override (nil: not recorded).
	ModelDenials DenialRecorder
	Grants       GrantStore // required
	Breaker      *Breaker   // nil: no circuit breaker
	// Production names production targets: critical before the model
	// is asked, so only a person may allow them (zero: none).
	Production Production
	// GrantTTL is how long an issued grant stays usable.
	GrantTTL time.Duration
	Log      *slog.Logger
	// Grantable, if set, says whether the sandbox can grant a request
	// exactly; one it cannot is denied before any reviewer is asked.
	Grantable func(grants.Request) (bool, string)
	// NetworkUses is how many connections a network grant covers:
	// grants.Unlimited (0 means the same) for one decision per
	// destination for the rest of the run, 1 for a review per connection.
	NetworkUses int
	// NetworkTTL bounds a network grant's life (default a day); the run
	// revokes its grants when it ends.
	NetworkTTL time.Duration
}

// Broker decides boundary requests. It is safe for concurrent use: its
// configuration is read-only, the grant store and the breaker lock
// their own state.
type Broker struct {
	cfg Config
	// personMu serializes questions to the person: one question on the
	// terminal at a time, so an answer can only be to the question shown.
	personMu sync.Mutex
}

// New returns a Broker.
func New(cfg Config) *Broker {
	if cfg.GrantTTL <= 0 {
		cfg.GrantTTL = DefaultGrantTTL
	}
	if cfg.NetworkUses == 0 {
		cfg.NetworkUses = grants.Unlimited
	}
	if cfg.NetworkTTL <= 0 {
		cfg.NetworkTTL = 24 * time.Hour
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Broker{cfg: cfg}
}

// SetPerson fills the person slot anew (nil: nobody to ask): a run held
// for its front end's retry is continued by another request, whose
// person it is now. Call it only while no decision is in flight.
func (b *Broker) SetPerson(p Person) { b.cfg.Person = p }

// Decide decides one request: policy deny rules, hard denies, what the
// sandbox can grant, ask rules and the session's lockdown, policy allow
// rules, then a person's override of exactly this request (one use, see
// OverrideStore), then the reviewers in their order (the model; a person when the
// model is absent or failed, or the session is locked down, and a person
// is reachable; otherwise deny), then the consistency rules. A
// production target (Production) is critical before the model is asked:
// only an allow rule naming it exactly, a person's override or a
// person's answer to the break-glass question allows it, and the model
// is not asked (see reviewProduction). The decision
// is recorded before it takes effect, an allow gets its grant (except on
// the command surface, which is never granted), and the breaker counts
// the final outcome. It never returns an allow of a grantable surface
// without a grant.
func (b *Broker) Decide(ctx context.Context, req grants.Request) Result {
	return b.decideCounted(ctx, req, true)
}

// DecideAgain decides a request the caller already had decided in the
// same run (the same boundary, met again by a retry): the breaker counts
// one denial per distinct boundary per run, so this one is not counted.
func (b *Broker) DecideAgain(ctx context.Context, req grants.Request) Result {
	return b.decideCounted(ctx, req, false)
}

func (b *Broker) decideCounted(ctx context.Context, req grants.Request, count bool) Result {
	ctx, _ = withTrace(ctx)
	return b.count(ctx, req, b.settle(ctx, req, b.decide(ctx, req)), count)
}

// count has the breaker count a decision (unless count is false), and
// turns an allow it could not count into a deny.
func (b *Broker) count(ctx context.Context, req grants.Request, res Result, count bool) Result {
	if res.Decision.Source == SourceQuiet || res.Decision.Source == SourceCircuitBreaker {
		// Quiet writes are no boundary; a lockdown's own denials would
		// only keep it locked.
		count = false
	}
	if res.Decision.Outcome == Allow && req.Surface == boundary.Network && len(req.Addresses) == 0 && !isIPDest(req) {
		// A name allowed before its lookup is not final: Resolved
		// counts what its addresses come to.
		count = false
	}
	if count && b.cfg.Breaker != nil && req.Session != "" {
		tripped, err := b.cfg.Breaker.Record(req.Session, res.Decision.Outcome != Allow)
		switch {
		case err != nil && res.Decision.Outcome == Allow:
			// A decision the breaker could not count would let it fail
			// open (a full disk forgets the denials): nothing is allowed.
			b.cfg.Log.Debug("circuit breaker", "err", err)
			if res.Grant != nil {
				b.cfg.Grants.Revoke(res.Grant.Token)
			}
			res = Result{Decision: deny(SourceError, "the circuit breaker could not count the decision, so nothing is allowed")}
		case err != nil:
			b.cfg.Log.Debug("circuit breaker", "err", err)
		case tripped:
			b.cfg.Log.Debug("session locked down", "session", req.Session)
			// The lockdown holds whether or not it is recorded.
			b.record(ctx, AuditEvent{Kind: AuditBreakerTripped, Request: req, Decision: res.Decision})
		}
	}
	return res
}

// settle records the decision and, for an allow, issues and records its
// grant; a failure of either turns the allow into a deny.
func (b *Broker) settle(ctx context.Context, req grants.Request, d Decision) Result {
	if err := b.record(ctx, traceOf(ctx).fill(AuditEvent{Kind: AuditDecision, Request: req, Decision: d})); err != nil {
		if d.Outcome != Allow {
			return Result{Decision: d}
		}
		return Result{Decision: deny(SourceError, "the decision could not be recorded, so nothing is allowed")}
	}
	if d.Outcome != Allow || req.Surface == boundary.Command {
		return Result{Decision: d}
	}
	g, err := b.issue(req)
	if err != nil {
		b.cfg.Log.Debug("issue a grant", "err", err)
		return Result{Decision: deny(SourceError, "a grant could not be issued")}
	}
	if err := b.record(ctx, AuditEvent{Kind: AuditGrantIssued, Request: req, RequestHash: g.RequestHash, ExpiresAt: g.ExpiresAt}); err != nil {
		b.cfg.Grants.Revoke(g.Token)
		return Result{Decision: deny(SourceError, "the grant could not be recorded, so nothing is allowed")}
	}
	return Result{Decision: d, Grant: &g}
}

// issue issues req's grant: one use for a filesystem retry and for the
// lookup of an allowed name (Resolved exchanges it), the configured
// uses for a network destination whose addresses are known.
func (b *Broker) issue(req grants.Request) (grants.Grant, error) {
	if req.Surface != boundary.Network {
		return b.cfg.Grants.Issue(req, b.cfg.GrantTTL)
	}
	if len(req.Addresses) == 0 && !isIPDest(req) {
		return b.cfg.Grants.Issue(req, b.cfg.GrantTTL)
	}
	return b.cfg.Grants.IssueUses(req, b.cfg.NetworkTTL, b.cfg.NetworkUses)
}

// Resolved completes the allow of a network name: req carries the
// addresses it resolved to, token the name's grant (from Decide, on req
// without them). The addresses are checked against the deny rules and
// the hard denies, and an ask rule naming one of them sends the request
// (addresses and all) to the reviewers; if they pass, the name's grant
// is exchanged for one bound to the addresses too. The breaker counts a
// denial here like any other.
func (b *Broker) Resolved(ctx context.Context, token string, req grants.Request) Result {
	ctx, t := withTrace(ctx)
	byName := req
	byName.Addresses = nil
	d := b.checkResolved(req)
	if d.Outcome == Allow && b.asked(req) {
		locked, why, err := b.locked(req.Session)
		if err != nil {
			d = deny(SourceError, "the circuit breaker's state is unavailable")
		} else {
			d = b.review(ctx, req, locked, why)
		}
	}
	if d.Outcome != Allow {
		b.cfg.Grants.Revoke(token)
		b.record(ctx, t.fill(AuditEvent{Kind: AuditDecision, Request: req, Decision: d}))
		return b.count(ctx, req, Result{Decision: d}, true)
	}
	if err := b.Consume(ctx, token, byName); err != nil {
		return Result{Decision: deny(SourceError, "the destination's grant no longer applies")}
	}
	return b.count(ctx, req, b.settle(ctx, req, d), true)
}

// checkResolved decides a name's resolved addresses.
func (b *Broker) checkResolved(req grants.Request) Decision {
	if req.Surface != boundary.Network || len(req.Addresses) == 0 {
		return deny(SourceError, "incomplete request")
	}
	if why := malformed(req); why != "" {
		return deny(SourceError, why)
	}
	for _, r := range b.cfg.Rules.Deny {
		if r.MatchesEither(req) {
			return deny(SourcePolicy, "a policy deny rule matches an address it resolved to")
		}
	}
	if hard, why := b.checkNetwork(req); hard {
		return deny(SourceHardDeny, why)
	}
	return Decision{Outcome: Allow, RiskLevel: RiskLow, Rationale: "the addresses it resolved to may be reached", Source: SourceGrant}
}

// consumeWhy says why a grant did not apply, in the audit record's
// words: the store's errors carry its package's prefix.
func consumeWhy(err error) string {
	switch {
	case errors.Is(err, grants.ErrMalformed):
		return "the grant's token is malformed"
	case errors.Is(err, grants.ErrUnknown):
		return "the grant is unknown or already used"
	case errors.Is(err, grants.ErrExpired):
		return "the grant has expired"
	case errors.Is(err, grants.ErrSession):
		return "the grant is for another session"
	case errors.Is(err, grants.ErrMismatch):
		return "the grant is for another request"
	}
	return "the grant could not be used (" + publicerr.Reason(err) + ")"
}

// Consume uses a grant for req, the request as it is now (the retry's),
// and records the outcome. An error means the grant does not apply.
func (b *Broker) Consume(ctx context.Context, token string, req grants.Request) error {
	err := b.cfg.Grants.Consume(token, req)
	ev := AuditEvent{Kind: AuditGrantConsumed, Request: req, RequestHash: req.Hash()}
	if err != nil {
		ev.Kind, ev.Why, ev.Expired = AuditGrantRejected, consumeWhy(err), errors.Is(err, grants.ErrExpired)
	}
	if aerr := b.record(ctx, ev); aerr != nil && err == nil {
		return fmt.Errorf("broker: %w", errUnrecorded)
	}
	return err
}

// Withdraw revokes a grant nobody will use for req and records why: a
// held retry declined, expired, or whose grants were presented for
// something else.
func (b *Broker) Withdraw(ctx context.Context, token string, req grants.Request, why string, expired bool) {
	b.cfg.Grants.Revoke(token)
	b.record(ctx, AuditEvent{Kind: AuditGrantRejected, Request: req, RequestHash: req.Hash(), Why: why, Expired: expired})
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
		b.cfg.Log.Debug("auditor", "event", string(ev.Kind), "err", err)
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
	case req.Surface == boundary.Filesystem && (!cleanAbs(req.Path) || !cleanAbs(req.ResolvedPath)):
		return "a filesystem request needs absolute, clean paths"
	case req.Surface == boundary.Filesystem && req.ResolvedPath == "" && req.Path == "",
		req.Surface == boundary.Network && req.DestinationText() == "",
		req.Surface == boundary.Command && req.Command == "":
		return "incomplete request"
	case req.Surface == boundary.Network:
		return malformedNetwork(req)
	}
	return ""
}

// malformedNetwork checks that a network request's destination and
// addresses are in their one normal form: what was matched is what is
// dialled. Both arrive typed; a destination that came as text and was
// no normalised host:port arrives as MalformedDestination.
func malformedNetwork(req grants.Request) string {
	if req.MalformedDestination != "" || !req.Destination.Valid() {
		return "a network request needs a normalised host:port"
	}
	var prev netip.Addr
	for i, a := range req.Addresses {
		if !a.IsValid() || a.Zone() != "" || a.Is4In6() || (i > 0 && !prev.Less(a)) {
			return "a network request's addresses must be canonical, sorted and distinct"
		}
		prev = a
	}
	return ""
}

// isIPDest reports whether a network request names an address.
func isIPDest(req grants.Request) bool {
	d, ok := destOf(req)
	return ok && d.IsIP()
}

// cleanAbs reports whether p is empty or an absolute path in its clean
// form (no "..", no "//", no trailing "/").
func cleanAbs(p string) bool {
	return p == "" || (filepath.IsAbs(p) && filepath.Clean(p) == p)
}

func (b *Broker) decide(ctx context.Context, req grants.Request) Decision {
	d, done, locked, why := b.preReview(req)
	if done {
		return d
	}
	if !locked && !b.asked(req) {
		if d, ok := b.intent(ctx, req); ok {
			return d
		}
	}
	return b.review(ctx, req, locked, why)
}

// preReview takes every step before the reviewers: done reports that
// they decided req (d); otherwise locked and why are the session's
// lockdown for the review.
func (b *Broker) preReview(req grants.Request) (d Decision, done, locked bool, why string) {
	if why := malformed(req); why != "" {
		return deny(SourceError, why), true, false, ""
	}
	for _, r := range b.cfg.Rules.Deny {
		if r.MatchesEither(req) {
			return deny(SourcePolicy, "a policy deny rule matches"), true, false, ""
		}
	}
	if hard, why := b.cfg.Hard.check(req); hard {
		return deny(SourceHardDeny, why), true, false, ""
	}
	if why, hard := b.startup(req); hard {
		return deny(SourceHardDeny, why), true, false, ""
	}
	if hard, why := b.checkNetwork(req); hard {
		return deny(SourceHardDeny, why), true, false, ""
	}
	// After the hard denies: secrets, persistence paths and sandboxd's own
	// state are never quiet. Reads never are.
	if why, ok := b.quiet(req); ok {
		return deny(SourceQuiet, why), true, false, ""
	}
	if b.cfg.Grantable != nil && req.Surface != boundary.Command {
		if ok, why := b.cfg.Grantable(req); !ok {
			return deny(SourceHardDeny, "not grantable: "+why), true, false, ""
		}
	}
	locked, why, err := b.locked(req.Session)
	if err != nil {
		b.cfg.Log.Debug("circuit breaker state", "err", err)
		return deny(SourceError, "the circuit breaker's state is unavailable"), true, false, ""
	}
	if !locked && !b.asked(req) && b.allowRulesApply(req) {
		for _, r := range b.cfg.Rules.Allow {
			if r.Matches(req) {
				return Decision{Outcome: Allow, RiskLevel: RiskLow, Rationale: "a policy allow rule matches", Source: SourcePolicy}, true, false, ""
			}
		}
	}
	return Decision{}, false, locked, why
}

// BeforeAllow says why the broker denies req before any allow rule is
// consulted, or denied is false: a malformed request, a policy deny
// rule, a hard deny (secrets, sandboxd's own state, removing / or the
// home, persistence paths, a cloud metadata endpoint: not an address
// that is merely not public, which a rule naming it opens), a start-up location
// (even one an exact allow of the user's own policy would lift: a
// person writes that rule on purpose, no tool offers it) and what no
// grant can express. The suggester asks it so that a report's claimed
// source is never trusted: an allow rule is offered only for what an
// allow rule may lift. A production target is refused here too, as a
// start-up location is: an exact allow rule of the person's own lifts
// it, and no tool offers one.
func (b *Broker) BeforeAllow(req grants.Request) (why string, denied bool) {
	if why, denied := b.beforeAllow(req, b.cfg.Hard, true); denied {
		return why, true
	}
	if m, ok := b.cfg.Production.match(req); ok {
		return "a production target: " + m.why + "; only a person allows it, at the question with the break-glass phrase, or by writing an exact allow rule on purpose", true
	}
	return "", false
}

// Unconfined says why the broker refuses req before any reviewer for a
// tool that acts outside every sandbox (an agent's own file tools), or
// denied is false: as BeforeAllow, except that a write in the workspace
// is not taken for a persistence path (inside the sandbox the only
// refused writes there are; outside, the caller asks persist by name),
// and nothing is said of what a grant can express (none is issued). A
// production target is refused: nothing outside the sandbox asks a
// person for the break-glass phrase.
func (b *Broker) Unconfined(req grants.Request) (why string, denied bool) {
	h := b.cfg.Hard
	h.Workspace = ""
	if why, denied := b.beforeAllow(req, h, false); denied {
		return why, true
	}
	if m, ok := b.cfg.Production.match(req); ok {
		// Nothing outside the sandbox asks a person for the phrase.
		return "a production target: " + m.why + "; a shell command, which runs in the sandbox, may be allowed by a person with the break-glass phrase", true
	}
	return "", false
}

// beforeAllow is BeforeAllow with the hard denies h, and the grantable
// check when grantable is set.
func (b *Broker) beforeAllow(req grants.Request, h HardDenies, grantable bool) (why string, denied bool) {
	if why := malformed(req); why != "" {
		return why, true
	}
	for _, r := range b.cfg.Rules.Deny {
		if r.MatchesEither(req) {
			return "a policy deny rule matches", true
		}
	}
	if hard, why := h.check(req); hard {
		return why, true
	}
	if req.Surface == boundary.Filesystem && !req.Operation.Reads() && h.Startup != nil {
		for _, p := range []string{req.Path, req.ResolvedPath} {
			if why, ok := h.Startup.Startup(p); p != "" && ok {
				return "a start-up location: " + why, true
			}
		}
	}
	if d, ok := destOf(req); ok && req.Surface == boundary.Network {
		if eps := netdest.Metadata(d); len(eps) > 0 {
			return metadataRefusal(d.String()+" is", eps), true
		}
	}
	if grantable && b.cfg.Grantable != nil && req.Surface != boundary.Command {
		if ok, why := b.cfg.Grantable(req); !ok {
			return "not grantable: " + why, true
		}
	}
	return "", false
}

// startup refuses a change at a start-up location outside the
// workspace, whatever a reviewer would say, unless an allow rule names
// that very path (no glob) for the operation: the policy's allow rules
// are the user's own (a workspace policy may only narrow them).
func (b *Broker) startup(req grants.Request) (string, bool) {
	if req.Surface != boundary.Filesystem || req.Operation.Reads() || b.cfg.Hard.Startup == nil {
		return "", false
	}
	for _, p := range []string{req.Path, req.ResolvedPath} {
		if p == "" {
			continue
		}
		p = filepath.Clean(p)
		why, ok := b.cfg.Hard.Startup.Startup(p)
		if !ok || b.namedByAllow(req, p) {
			continue
		}
		return "a start-up location: " + why + "; it is never granted unless your own policy allows this exact path", true
	}
	return "", false
}

// namedByAllow reports whether an allow rule names exactly p (no
// wildcard; escapes spell the name) for req's operation.
func (b *Broker) namedByAllow(req grants.Request, p string) bool {
	for _, r := range b.cfg.Rules.Allow {
		if lit, ok := r.literal(); ok && r.matchOperation(req.Operation) && lit == p {
			return true
		}
	}
	return false
}

// quiet reports whether req writes tool state on the quiet list.
func (b *Broker) quiet(req grants.Request) (string, bool) {
	if req.Surface != boundary.Filesystem || req.Operation.Reads() {
		return "", false
	}
	for _, q := range b.cfg.Quiet {
		r := Rule{Surface: boundary.Filesystem, Operation: "*", Target: q.Pattern}
		if r.Matches(req) {
			return q.Why, true
		}
		if q.parentByTool(req, b.cfg.Hard.Home) {
			return q.Why + ": a missing parent directory, created on the way by the tool itself", true
		}
	}
	return "", false
}

// parentByTool reports whether req creates a directory above q's
// pattern (an ancestor of its literal part, below home) and every
// program that tried is one of q's tools. Unknown programs are never
// quiet.
func (q QuietRule) parentByTool(req grants.Request, home string) bool {
	if req.Operation != boundary.OpMakeDir || len(q.Tools) == 0 || len(req.Programs) == 0 || home == "" || home == "/" {
		return false
	}
	fixed := literalPrefix(q.Pattern)
	for _, p := range []string{req.Path, req.ResolvedPath} {
		if _, below := pathtree.Below(home, p); !below {
			return false
		}
		if _, above := pathtree.Below(p, fixed); !above {
			return false
		}
	}
	for _, exe := range req.Programs {
		if !q.isTool(exe) {
			return false
		}
	}
	return true
}

// isTool reports whether the executable exe is one of q's tools.
func (q QuietRule) isTool(exe string) bool {
	for _, t := range q.Tools {
		n := strings.Count(t, "/") + 1
		els := strings.Split(exe, "/")
		if len(els) < n {
			continue
		}
		if ok, _ := path.Match(t, strings.Join(els[len(els)-n:], "/")); ok {
			return true
		}
	}
	return false
}

// literalPrefix is the part of an absolute path pattern before its first
// element holding a glob character.
func literalPrefix(pattern string) string {
	out := ""
	for _, el := range strings.Split(strings.Trim(pattern, "/"), "/") {
		if strings.ContainsAny(el, "*?[\\") {
			break
		}
		out += "/" + el
	}
	return out
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

// overrideDecision is the allow of a request a person overrode.
func overrideDecision() Decision {
	return Decision{Outcome: Allow, RiskLevel: RiskMedium, UserAuthorization: AuthHigh,
		Rationale: "approved once by a person with sandboxd approve", Source: SourceHuman}
}

// overridden consumes a person's override for req, if there is one. A
// store that fails is no override: the request goes to the reviewers.
func (b *Broker) overridden(ctx context.Context, req grants.Request) bool {
	if b.cfg.Overrides == nil {
		return false
	}
	ok, err := b.cfg.Overrides.Use(ctx, req)
	if err != nil {
		b.cfg.Log.Debug("overrides", "err", err)
		return false
	}
	return ok
}

// recordDenial records a deny the model itself gave (not a failure, not
// a person's), so a person may override it later.
func (b *Broker) recordDenial(ctx context.Context, req grants.Request, d Decision) {
	if b.cfg.ModelDenials == nil || d.Outcome != Deny || d.Source != SourceReviewer {
		return
	}
	if err := b.cfg.ModelDenials.Record(ctx, req, d); err != nil {
		b.cfg.Log.Debug("record a model denial", "err", err)
	}
}

// review asks the reviewers in their order. A person's override of the
// exact request comes first (it is that person's answer, given ahead),
// even in a lockdown; a model's own deny is recorded for one.
func (b *Broker) review(ctx context.Context, req grants.Request, locked bool, lockWhy string) Decision {
	t := traceOf(ctx)
	defer t.reviewed()
	if m, ok := b.cfg.Production.match(req); ok {
		return b.reviewProduction(ctx, req, m)
	}
	if b.overridden(ctx, req) {
		t.override = true
		b.record(ctx, AuditEvent{Kind: AuditOverrideUsed, Request: req, RequestHash: req.Hash()})
		return overrideDecision()
	}
	person, away := false, ""
	if b.cfg.Person != nil {
		person, away = b.cfg.Person.Reachable()
	}
	fallback := deny(SourceNoReviewer, "no reviewer is configured, so anything the policy does not allow is denied")
	if b.cfg.Person != nil && !person {
		// The person chosen to review cannot be asked: nobody decided,
		// and the rationale says why.
		fallback = deny(SourceNoReviewer, away)
	}
	switch {
	case locked && !person:
		return deny(SourceCircuitBreaker, "the session is locked down ("+lockWhy+"); only a person can review it, or lift the lockdown with `sandboxd session reset` and the session's name at their terminal")
	case !locked && b.cfg.Model != nil:
		t.asking()
		d, err := b.modelReview(ctx, req)
		if err == nil {
			d = consistent(d, SourceReviewer)
			model := d
			t.model = &model
			if d.Outcome == Deny && person && takesDenials(b.cfg.Person) {
				d = b.deferToPerson(ctx, req, d)
			}
			b.recordDenial(ctx, req, d)
			return d
		}
		b.cfg.Log.Debug("model reviewer failed", "err", err)
		fallback = deny(SourceError, "the model reviewer failed")
		if why := publicerr.Message(err, ""); why != "" {
			// Who failed, not who denied: the agent must not read a
			// fault as a judgement.
			fallback.Rationale += ": " + why
		}
		t.fault = fallback.Rationale
		b.record(ctx, AuditEvent{Kind: AuditReviewFault, Request: req, Fault: t.fault})
	}
	if !person {
		return fallback
	}
	d, err := b.askPerson(ctx, req, Decision{})
	if err != nil {
		return deny(SourceError, "the person could not be asked")
	}
	return d
}

// takesDenials reports whether the person also reviews the model's
// denials.
func takesDenials(p Person) bool {
	d, ok := p.(Deferrer)
	return ok && d.TakesDenials()
}

// deferToPerson asks the person about the model's deny: a person's
// answer replaces it; no answer (or a failure) leaves the model's.
func (b *Broker) deferToPerson(ctx context.Context, req grants.Request, model Decision) Decision {
	d, err := b.askPerson(WithDeferred(ctx, model), req, model)
	if err != nil || d.Source == SourceNoReviewer {
		return model
	}
	return d
}

// askPerson asks the person slot, one question at a time. A person's
// answer is SourceHuman (SourcePage on the approvals page, a person's
// too); one relayed by an API client stays
// SourceClient, whatever else it claims, and carries the model's risk
// and authorization (none when the model did not judge): a client
// cannot state its own, and without the model's it can allow nothing.
func (b *Broker) askPerson(ctx context.Context, req grants.Request, model Decision) (Decision, error) {
	traceOf(ctx).asking()
	b.personMu.Lock()
	d, err := b.cfg.Person.Review(ctx, req)
	b.personMu.Unlock()
	if err != nil {
		b.cfg.Log.Debug("human reviewer failed", "err", err)
		return Decision{}, err
	}
	if d.Source == SourceClient {
		d.RiskLevel, d.UserAuthorization = model.RiskLevel, model.UserAuthorization
		return consistent(d, SourceClient), nil
	}
	if d.Source == SourcePage {
		return consistent(d, SourcePage), nil
	}
	return consistent(d, SourceHuman), nil
}

// consistent applies the consistency rules (docs/ARCHITECTURE.md §3.6)
// to a reviewer's answer: the model never grants directly, and an allow
// must be consistent.
func consistent(d Decision, src Source) Decision {
	// Who decided is the slot that was asked, whatever the answer says:
	// a model cannot pass for a person. Only a deny may say that nobody
	// decided (a question no person answered).
	if d.Outcome == Allow || d.Source != SourceNoReviewer {
		d.Source = src
	}
	if d.Outcome != Allow {
		d.Outcome = Deny
		return d
	}
	if !d.RiskLevel.valid() || !d.UserAuthorization.valid() {
		return deny(src, "a reviewer allow with an unknown risk level or authorization is refused")
	}
	switch {
	case d.RiskLevel == RiskCritical:
		return deny(d.Source, "an allow at critical risk is refused")
	case d.RiskLevel == RiskHigh && d.UserAuthorization != AuthMedium && d.UserAuthorization != AuthHigh:
		return deny(d.Source, "a high-risk allow needs clear authorization from the user")
	case d.RiskLevel == "" && d.Source != SourceHuman && d.Source != SourcePage:
		return deny(d.Source, "a reviewer allow without a risk level is refused")
	}
	return d
}

func (h HardDenies) check(req grants.Request) (bool, string) {
	if req.Surface == boundary.Network {
		return false, "" // Broker.checkNetwork: it needs the rules
	}
	if req.Operation == boundary.OpResolveUnix {
		return true, "host unix sockets (ssh-agent, gpg-agent, docker, D-Bus, editors' and sandboxd's own) are never reachable from inside; only sockets the command creates in its run are"
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
		if (req.Operation == boundary.OpRemoveDir || req.Operation == boundary.OpRemoveFile) && (p == "/" || (h.Home != "" && p == filepath.Clean(h.Home))) {
			return true, "removing / or the home directory is refused"
		}
		if h.persistence(p, req.Operation) {
			return true, "persistence paths (git hooks and config, editor tasks, agent settings, shell rc files) are never granted"
		}
	}
	return false, ""
}

// Within reports whether p is dir or below it, the last element of dir
// possibly a glob: how a secrets entry covers a path (the reviewer's
// evidence reader uses it too).
func Within(p, dir string) bool { return within(filepath.Clean(p), dir) }

// within reports whether p is dir or below it; the last element of dir
// may be a glob.
func within(p, dir string) bool {
	dir = filepath.Clean(dir)
	if pathtree.Within(dir, p) {
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
func (h HardDenies) persistence(p string, op boundary.Operation) bool {
	if op.Reads() || h.Workspace == "" {
		return false
	}
	_, below := pathtree.Below(h.Workspace, p)
	return below
}
