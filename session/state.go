package session

import (
	"context"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/intents"
	"github.com/sandboxd/sandboxd/overrides"
	"github.com/sandboxd/sandboxd/publicerr"
)

// maxRecentDenials bounds the denials SessionState lists.
const maxRecentDenials = 20

// SessionState is what one of a caller's named sessions holds: its
// circuit breaker, the model's recent denials in it, and the attempts
// held for its retries.
type SessionState struct {
	Name   string `json:"name"`
	Locked bool   `json:"locked"`
	Reason string `json:"reason,omitempty"`
	// Headroom is how many denials in a row it can still take before it
	// locks down (0 when locked).
	Headroom int `json:"headroom"`
	// Denials are the model's recent denials in it, most recent first
	// (at most 20): what `sandboxd approve` offers to override.
	Denials []overrides.Denial `json:"recent_denials"`
	// Held counts its attempts held for a front end's retry.
	Held int `json:"held_retries"`
	// Intents are a person's live intents for it, oldest first.
	Intents []intents.Intent `json:"intents"`
}

// SessionState reads c's session name as c (a session is scoped by the
// caller's uid: no caller names another's). It reads, and never
// changes, the breaker's state.
func (r *Runner) SessionState(c Caller, name string) (SessionState, error) {
	out := SessionState{Name: name, Denials: []overrides.Denial{}, Intents: []intents.Intent{}}
	if name == "" {
		return out, publicerr.New("name a session")
	}
	id := Scoped(c, name)
	act := func(f func() error) error { return fsid.Do(c.ID(), f) }
	br := broker.NewBreaker(c.Layout().Breaker()).WithActor(act)
	var err error
	if out.Locked, out.Reason, err = br.Locked(id); err != nil {
		return out, publicerr.Wrap(err, "the session's state cannot be read")
	}
	if out.Headroom, err = br.Headroom(id); err != nil {
		return out, publicerr.Wrap(err, "the session's state cannot be read")
	}
	ds, err := overrides.New(c.Layout().Overrides(), overrides.WithActor(act)).Denials(id)
	if err != nil {
		return out, publicerr.Wrap(err, "the session's recent denials cannot be read")
	}
	out.Denials = append(out.Denials, ds[:min(len(ds), maxRecentDenials)]...)
	if out.Intents, err = intentStore(c).List(context.Background(), id); err != nil {
		return out, intentErr(err)
	}
	out.Held = r.held.count(c.UID, id)
	return out, nil
}
