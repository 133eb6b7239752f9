package session

import (
	"context"
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
		return c.Layout().Policy()
	case filepath.IsAbs(explicit):
		return filepath.Clean(explicit)
	}
	return filepath.Join(c.Cwd, explicit)
}

// BeforeAllow is, for `sandboxd suggest`, what the broker of a run of c
// in workspace (the report's) denies before any allow rule, under the
// policy a run would load (policyFile: the explicit one, or ""). A
// report is only a file, and a command could have written it: its
// sources are never trusted. When the workspace is gone, the caller's
// own is used.
func (r *Runner) BeforeAllow(ctx context.Context, c Caller, policyFile, workspace string) (suggest.BeforeAllow, error) {
	j := Job{Argv: []string{"true"}, Policy: policyFile, Workspace: workspace}
	p, err := r.newPlan(ctx, c, j)
	if err != nil && workspace != "" {
		j.Workspace = ""
		p, err = r.newPlan(ctx, c, j)
	}
	if err != nil {
		return nil, err
	}
	return p.broker.BeforeAllow, nil
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
		s := suggest.For(b.suggestible(), st.caller.Home, file, st.plan.broker.BeforeAllow)
		b.Suggestion = &s
	}
}

// suggestible is b as the suggester reads it.
func (b Boundary) suggestible() suggest.Boundary {
	return suggest.Boundary{Surface: b.Surface, Operation: b.Operation, Path: b.Path, Destination: b.Destination,
		Decision: b.Decision, Source: b.Source, Rationale: b.Rationale}
}
