package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/sandboxd/sandboxd/grants"
)

// intent is the allow of req by one of its session's intents, when one
// covers it. The caller has already taken every step before the allow
// rules (deny rules, hard denies, what no grant can express) and checked
// that no ask rule names req and the session is not locked down: an
// intent is a person's allow rule for one session, no more. A production
// target is never covered (only a person with the break-glass phrase, or
// an exact allow rule of their own, allows it). Each scope is parsed
// again here, from the text whose hash the person approved: a text that
// no longer hashes to it, or no longer parses, covers nothing.
func (b *Broker) intent(ctx context.Context, req grants.Request) (Decision, bool) {
	if b.cfg.Intents == nil || req.Session == "" {
		return Decision{}, false
	}
	if _, prod := b.cfg.Production.match(req); prod {
		return Decision{}, false
	}
	ins, err := b.cfg.Intents.Intents(ctx, req.Session)
	if err != nil {
		b.cfg.Log.Debug("intents", "err", err)
		return Decision{}, false
	}
	now := time.Now()
	for _, in := range ins {
		if !now.Before(in.ExpiresAt) || !boundTo(in) {
			continue
		}
		r, err := ParseRule(in.Scope, b.cfg.Hard.Home)
		if err != nil || !r.Matches(req) {
			continue
		}
		return Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh, Source: SourceIntent, Intent: in.ID,
			Rationale: "a person approved this kind of request for the session (intent " + in.ID + ": " + in.Scope + ")"}, true
	}
	return Decision{}, false
}

// boundTo reports whether an intent's scope is the text its approval
// hashed.
func boundTo(in Intent) bool {
	sum := sha256.Sum256([]byte(in.Scope))
	return in.Scope != "" && in.Hash == hex.EncodeToString(sum[:])
}
