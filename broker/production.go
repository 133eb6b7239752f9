package broker

import (
	"context"
	"path"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/pathtree"
)

// Production says which boundaries' targets are production targets
// (policy's [review] production): a name a marker matches makes the
// boundary critical before the model is asked, so only a person may
// allow it, with the break-glass phrase.
type Production struct {
	// Markers are globs over one name (path.Match), matched whatever
	// the case: "prod", "prd", "production" and what the policies add.
	Markers []string
	// Places are the caller's cloud and cluster configuration places
	// (credstore.ClusterConfigs, where the caller's environment puts
	// them): only below them does a path's name say where a command
	// acts.
	Places []ProductionPlace
}

// ProductionPlace is one cloud or cluster configuration place.
type ProductionPlace struct {
	// Path is absolute and clean: a directory, or the file a tool's
	// variable names.
	Path string
	// Tool names the program whose configuration it is.
	Tool string
}

// productionMatch is a target a marker names, and the sentence that
// says so.
type productionMatch struct {
	marker, why string
}

// match reports the first marker that names req's target: for a
// network destination its host, each label of it and each segment of a
// label (split at "-" and "_"); for a filesystem path at or below a
// configuration place, the place's own name, each component below it
// and each segment of one (split at "-", "_" and "."), as named and as
// resolved. An address names nothing, nor does a path elsewhere: the
// same name in a work tree says nothing about where a command acts.
func (p Production) match(req grants.Request) (productionMatch, bool) {
	if len(p.Markers) == 0 {
		return productionMatch{}, false
	}
	switch req.Surface {
	case boundary.Network:
		if d, ok := destOf(req); ok && !d.IsIP() {
			return p.matchHost(d.Host)
		}
	case boundary.Filesystem:
		for _, name := range []string{req.Path, req.ResolvedPath} {
			if m, ok := p.matchPath(name); ok {
				return m, true
			}
		}
	}
	return productionMatch{}, false
}

// matchHost matches a host name, then its labels and their segments.
func (p Production) matchHost(host string) (productionMatch, bool) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" {
		return productionMatch{}, false
	}
	if m, ok := p.marker(host); ok {
		return productionMatch{m, "the host " + host + " matches the production marker " + m}, true
	}
	for _, label := range strings.Split(host, ".") {
		for _, name := range namesOf(label, "-_") {
			if m, ok := p.marker(name); ok {
				return productionMatch{m, "the name " + name + " in the host " + host + " matches the production marker " + m}, true
			}
		}
	}
	return productionMatch{}, false
}

// matchPath matches the names of an absolute path at or below one of
// the places: the place's own name (a KUBECONFIG's file name), then
// each component below it, each whole and in segments.
func (p Production) matchPath(name string) (productionMatch, bool) {
	if name == "" || !filepath.IsAbs(name) {
		return productionMatch{}, false
	}
	name = filepath.Clean(name)
	for _, pl := range p.Places {
		rel, ok := pathtree.Rel(pl.Path, name)
		if !ok || pl.Path == "/" {
			continue
		}
		comps := []string{filepath.Base(pl.Path)}
		if rel != "" {
			comps = append(comps, strings.Split(rel, "/")...)
		}
		for _, c := range comps {
			for _, n := range namesOf(strings.ToLower(c), "-_.") {
				if m, ok := p.marker(n); ok {
					return productionMatch{m, "the name " + n + " in " + name + ", under " + pl.Tool + "'s configuration " + pl.Path +
						", matches the production marker " + m}, true
				}
			}
		}
	}
	return productionMatch{}, false
}

// namesOf is s whole, then its segments split at any of seps (none
// empty, none repeated as s itself).
func namesOf(s, seps string) []string {
	out := []string{s}
	segs := strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(seps, r) })
	if len(segs) == 1 && segs[0] == s {
		return out
	}
	return append(out, segs...)
}

// marker is the first marker that matches the lower-case name, case
// folded.
func (p Production) marker(name string) (string, bool) {
	if name == "" {
		return "", false
	}
	for _, m := range p.Markers {
		m = strings.ToLower(m)
		if ok, _ := path.Match(m, name); ok {
			return m, true
		}
	}
	return "", false
}

// productionWhy ends the sentence of a production match in every
// decision about it.
const productionWhy = "; a production target is critical: only a person may allow it, with the break-glass phrase"

// productionDecision is the decision on a production target before any
// person answered: critical, denied, and why.
func productionDecision(m productionMatch) Decision {
	return Decision{Outcome: Deny, RiskLevel: RiskCritical, Rationale: m.why + productionWhy,
		Source: SourceNoReviewer, Production: m.marker}
}

// exactAllow reports whether a policy allow rule names req's target
// exactly, no wildcard, for its operation: the person's own rule, which
// lifts a production target as it would any other. A pattern that only
// happens to cover the target ("*.example.com:443", "~/.kube/**") does
// not: nobody chose that target when writing it.
func (b *Broker) exactAllow(req grants.Request) bool {
	switch req.Surface {
	case boundary.Network:
		d, ok := destOf(req)
		if !ok {
			return false
		}
		for _, r := range b.cfg.Rules.Allow {
			if r.Surface == boundary.Network && r.matchOperation(req.Operation) && r.Target == d.String() && r.dest.Match(d) {
				return true
			}
		}
		return false
	case boundary.Filesystem:
		for _, p := range []string{req.Path, req.ResolvedPath} {
			if p != "" && !b.namedByAllow(req, filepath.Clean(p)) {
				return false
			}
		}
		return req.Path != "" || req.ResolvedPath != ""
	}
	return false
}

// reviewProduction decides a production target: a person's override of
// exactly this request (given with `sandboxd break-glass`, since the
// denial it overrides is critical) or, when a person can be asked, their
// answer to a question that demands the break-glass phrase (a client's
// relayed answer carries the critical risk, which no client may allow);
// otherwise a deny that says why. The model is never asked: it could
// not allow a critical boundary, and the target is not sent out to be
// judged.
func (b *Broker) reviewProduction(ctx context.Context, req grants.Request, m productionMatch) Decision {
	if b.overridden(ctx, req) {
		traceOf(ctx).override = true
		b.record(ctx, AuditEvent{Kind: AuditOverrideUsed, Request: req, RequestHash: req.Hash()})
		d := overrideDecision()
		d.Rationale, d.Production = "approved once by a person with sandboxd break-glass: "+m.why, m.marker
		return d
	}
	pd := productionDecision(m)
	person, away := false, ""
	if b.cfg.Person != nil {
		person, away = b.cfg.Person.Reachable()
	}
	if !person {
		pd.Rationale += ", and nobody can be asked"
		if away != "" {
			pd.Rationale += " (" + away + ")"
		}
		b.recordProduction(ctx, req, pd)
		return pd
	}
	d, err := b.askPerson(WithDeferred(ctx, pd), req, pd)
	if err != nil {
		pd.Rationale += ", and the person could not be asked"
		pd.Source = SourceError
		return pd
	}
	if d.Source == SourceNoReviewer {
		// Nobody answered: the production deny stands, saying why no one did.
		pd.Rationale += ", and nobody answered (" + d.Rationale + ")"
		b.recordProduction(ctx, req, pd)
		return pd
	}
	d.Production = m.marker
	if d.Outcome == Deny {
		d.RiskLevel = RiskCritical
	}
	d.Rationale += ": " + m.why
	return d
}

// recordProduction records a production deny nobody answered as the
// model's denials are recorded, at critical risk: a person may then
// allow it once with `sandboxd break-glass`, never `sandboxd approve`.
func (b *Broker) recordProduction(ctx context.Context, req grants.Request, d Decision) {
	if b.cfg.ModelDenials == nil {
		return
	}
	if err := b.cfg.ModelDenials.Record(ctx, req, d); err != nil {
		b.cfg.Log.Debug("record a production denial", "err", err)
	}
}

// allowRulesApply reports whether the policy's allow rules are consulted
// for req: for a production target, only when one names it exactly.
func (b *Broker) allowRulesApply(req grants.Request) bool {
	if _, ok := b.cfg.Production.match(req); ok {
		return b.exactAllow(req)
	}
	return true
}
