package session

import (
	"github.com/sandboxd/sandboxd/policy"
)

// NoModelMessage is the sentence for a model review asked of a caller
// whose policy and environment name no model (`run --reviewer model`,
// `review eval`).
const NoModelMessage = "--reviewer model: no model is configured (set [review] model in your policy, or SANDBOXD_MODEL)"

// ModelFor resolves the model reviewer a run of caller would build, from
// the policy exactly as a run loads it: policyPath (empty: the caller's
// own policy.toml, if there is one), tightened by the .sandboxd.toml of
// the caller's working directory when that directory could be a
// workspace. ok is false when no model is configured; nothing is built
// and nothing is sent. The returned config's StateDir and Denied are
// set as a run sets them; Session is left to the caller (the meter
// counts by each request's session). OpenView is nil: no command runs,
// so there is no view of one to read its scripts with, and none is read.
func ModelFor(c Caller, policyPath string) (cfg ModelConfig, ok bool, err error) {
	userPolicy, explicit := policyPath, policyPath != ""
	if !explicit {
		userPolicy = c.Layout().Policy()
	}
	var wsPolicies []string
	if w, err := resolveWorkspace("", c); err == nil {
		wsPolicies = w.policies()
	}
	pol, err := policy.Load(userPolicy, explicit, wsPolicies...)
	if err != nil {
		return ModelConfig{}, false, policyUnusable(err)
	}
	res, err := pol.Resolve(policy.Dirs{Home: c.Home, ConfigDir: c.ConfigHome, StateDir: c.StateHome, Root: c.UID == 0, Getenv: c.Getenv})
	if err != nil {
		return ModelConfig{}, false, policyUnusable(err)
	}
	cfg, ok = modelConfig(c, res.Review, res.EnvDeny, res.EnvAllow, nil) // embedded: no machine reviewer
	if !ok {
		return ModelConfig{}, false, nil
	}
	cfg.StateDir = c.Layout().State
	cfg.Denied = append(append([]string(nil), res.Secrets...), c.Layout().Own()...)
	return cfg, true, nil
}
