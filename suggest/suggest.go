package suggest

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/ruletext"
	"github.com/sandboxd/sandboxd/termfilter"
)

// Boundary is one boundary as the report records it (its JSON keys are
// the report's, so a report's boundaries decode into it).
type Boundary struct {
	Surface     boundary.Surface   `json:"surface"`
	Operation   boundary.Operation `json:"operation"`
	Path        string             `json:"path,omitempty"`
	Destination string             `json:"destination,omitempty"`
	Decision    broker.Outcome     `json:"decision"`
	Source      broker.Source      `json:"source"`
	Rationale   string             `json:"rationale,omitempty"`
}

// target is the boundary's path or destination.
func (b Boundary) target() string {
	if b.Surface == boundary.Network {
		return b.Destination
	}
	return b.Path
}

// BeforeAllow says why the broker of the caller's policy denies a
// request before any allow rule is consulted (broker.Broker.BeforeAllow).
// The suggester asks it whatever source a report claims: a report is a
// file a command could have written, and a rule offered for a start-up
// location or a secret would be a way around the hard denies.
type BeforeAllow func(grants.Request) (why string, denied bool)

// Suggestion is what a person may do about one denied boundary: add Rule
// to their policy file, or nothing, for the reason Why.
type Suggestion struct {
	// Rule is the [boundaries] allow rule that would allow exactly this
	// boundary next time, as the policy file holds it ("" when none is
	// offered).
	Rule string `json:"rule,omitempty"`
	// TOML is Rule as a TOML snippet, with a comment naming the policy
	// file it belongs in.
	TOML string `json:"toml,omitempty"`
	// Why says why no rule is offered.
	Why string `json:"why,omitempty"`
}

// For suggests the rule that would allow b next time: home is the home
// the policy file is read with ("~" in a rule), policyFile the caller's
// own policy file (--policy, or the default), the only one whose allow
// rules count (a workspace's .sandboxd.toml may not add one), and before
// the caller's broker's own denials before any allow rule (nil: none can
// be checked, so no rule is offered).
//
// Per source: a reviewer's (the model's) or a person's denial, or one
// nobody could review (no-reviewer), gets a rule, since allow rules are
// consulted before any reviewer. A hard deny comes before the allow
// rules and gets its rationale only (a start-up location, which your
// own policy may allow by its exact path, is offered no rule either: a
// person writes that one on purpose). A policy deny rule beats every
// allow rule; a lockdown skips them; an error is a failure, not a
// judgement (a rule would not make the decision recordable); a quiet
// write is denied on purpose. Any other source gets no rule.
func For(b Boundary, home, policyFile string, before BeforeAllow) Suggestion {
	if b.Decision != broker.Deny {
		return Suggestion{Why: "it was not denied"}
	}
	switch b.Source {
	case broker.SourceReviewer, broker.SourceHuman, broker.SourceClient, broker.SourcePage, broker.SourceNoReviewer:
	case broker.SourceHardDeny:
		return Suggestion{Why: joinWhy("a hard deny, decided before any allow rule", b.Rationale)}
	case broker.SourcePolicy:
		return Suggestion{Why: "a deny rule of the policy (yours, or the workspace's .sandboxd.toml) refuses it, and a deny rule beats every allow rule: narrow or remove the deny rule instead"}
	case broker.SourceCircuitBreaker:
		return Suggestion{Why: "the session was locked down, and no allow rule is consulted while it is (see sandboxd session status)"}
	case broker.SourceError:
		return Suggestion{Why: joinWhy("sandboxd could not decide; a failure is not a judgement a rule should answer", b.Rationale)}
	case broker.SourceQuiet:
		return Suggestion{Why: "a write to a tool's own state, denied quietly on purpose"}
	default:
		return Suggestion{Why: fmt.Sprintf("no rule is offered for a decision by %q", string(b.Source))}
	}
	return exact(b, home, policyFile, before)
}

// Allowed suggests the rule that would allow b, a boundary reviewers
// allowed again and again (the audit report's evidence), without asking
// them next time: the same exact rule For offers, under the same checks.
// Only an allow by a reviewer, a person or a client's answer gets one: a
// policy's allow is a rule already, a grant's the use of an allow, and a
// person's one-use override or break-glass was meant for once.
func Allowed(b Boundary, home, policyFile string, before BeforeAllow) Suggestion {
	if b.Decision != broker.Allow {
		return Suggestion{Why: "it was not allowed"}
	}
	switch b.Source {
	case broker.SourceReviewer, broker.SourceHuman, broker.SourceClient, broker.SourcePage:
	default:
		return Suggestion{Why: fmt.Sprintf("no rule is offered for an allow by %q", string(b.Source))}
	}
	return exact(b, home, policyFile, before)
}

// exact is the rule naming exactly b's boundary, unless a hard deny
// comes first or no rule can name it.
func exact(b Boundary, home, policyFile string, before BeforeAllow) Suggestion {
	t := b.target()
	switch {
	case !utf8.ValidString(t):
		return Suggestion{Why: "its name is not valid UTF-8, which a policy file (TOML) cannot hold"}
	case strings.ContainsRune(t, utf8.RuneError):
		// The report's JSON shows each invalid byte as U+FFFD: the name
		// it shows may not be the name that was denied.
		return Suggestion{Why: "its name holds U+FFFD, which may stand for bytes the report could not hold, so no exact rule can be written from it"}
	}
	if before == nil {
		return Suggestion{Why: "sandboxd could not check it against your policy's hard denies"}
	}
	// A network rule is consulted where the proxy decides a destination
	// while its connection waits (Held), which is what it would lift. A
	// report is text: its destination is read as it enters.
	req := grants.Request{Surface: b.Surface, Operation: b.Operation, Path: b.Path, ResolvedPath: b.Path,
		Held: b.Surface == boundary.Network}.WithDestinationText(b.Destination)
	if why, denied := before(req); denied {
		return Suggestion{Why: joinWhy("a hard deny, decided before any allow rule", why)}
	}
	rule, err := broker.ExactRule(b.Surface, b.Operation, t, home)
	if err != nil {
		return Suggestion{Why: "no rule names it exactly: " + err.Error()}
	}
	return Suggestion{Rule: rule, TOML: TOML(policyFile, []string{rule})}
}

// joinWhy is a reason and, if any, the decision's own rationale.
func joinWhy(why, rationale string) string {
	if rationale == "" {
		return why
	}
	return why + ": " + rationale
}

// TOML renders rules as the [boundaries] allow list of policyFile, one
// rule a line, after a comment that names the file. It is valid TOML,
// and every character that does not print is escaped, so it can be
// shown on a terminal as it is.
func TOML(policyFile string, rules []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Add to the allow list of [boundaries] in your policy file %s\n", termfilter.Escape(policyFile))
	b.WriteString("# (a deny or ask rule that matches the same boundary still wins):\n")
	b.WriteString("[boundaries]\nallow = [\n")
	for _, r := range rules {
		b.WriteString("  " + ruletext.TOMLString(r) + ",\n")
	}
	b.WriteString("]\n")
	return b.String()
}
