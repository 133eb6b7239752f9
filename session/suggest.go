package session

import (
	"path/filepath"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/suggest"
)

// PolicyFile is the caller's own policy file as a run loads it: the
// explicit one (--policy, made absolute against the caller's working
// directory) or policy.toml in sandboxd's configuration directory. Its
// allow rules are the ones that count: a workspace's .sandboxd.toml may
// not add any.
func (c Caller) PolicyFile(explicit string) string {
	switch {
	case explicit == "":
		return filepath.Join(c.ConfigDir(), "policy.toml")
	case filepath.IsAbs(explicit):
		return filepath.Clean(explicit)
	}
	return filepath.Join(c.Cwd, explicit)
}

// suggestRules gives each denial in the report its suggestion: the rule
// that would allow it next time, or why there is none.
func (st *run) suggestRules() {
	file := st.caller.PolicyFile(st.job.Policy)
	st.mu.Lock()
	defer st.mu.Unlock()
	for i := range st.rep.Boundaries {
		b := &st.rep.Boundaries[i]
		if b.Decision != broker.Deny {
			continue
		}
		s := suggest.For(b.suggestible(), st.caller.Home, file)
		b.Suggestion = &s
	}
}

// suggestible is b as the suggester reads it.
func (b Boundary) suggestible() suggest.Boundary {
	return suggest.Boundary{Surface: b.Surface, Operation: b.Operation, Path: b.Path, Destination: b.Destination,
		Decision: b.Decision, Source: b.Source, Rationale: b.Rationale}
}
