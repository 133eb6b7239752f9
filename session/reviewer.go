package session

import (
	"context"
	"net"
	"net/url"
	"strings"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/evidence"
	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/reviewurl"
)

// Reviewer modes a job may ask for (`--reviewer`).
const (
	// ReviewOff: nobody reviews; what the rules leave open is denied.
	ReviewOff = "off"
	// ReviewAuto: the model when one is configured, else the person when
	// one is reachable, else off.
	ReviewAuto = "auto"
	// ReviewModel: the configured model (an error when none is).
	ReviewModel = "model"
	// ReviewHuman: the person only.
	ReviewHuman = "human"
)

// ModelConfig is what a model reviewer is built from: the policy's
// [review] with its environment fallbacks applied. It never holds the
// key itself in the policy; Key is read from the caller's environment.
type ModelConfig struct {
	BaseURL, Model, Key string
	Review              policy.Review
	// Secrets are values of the caller's environment the policy strips
	// as credentials: the reviewer redacts them from everything it sends.
	Secrets []string
	// Session is the scoped session; StateDir the caller's sandboxd
	// state directory (caps on calls and tokens live there).
	Session, StateDir string
	// Act runs the reviewer's uses of StateDir with the caller's
	// file-system identity (fsid.Do): never as the daemon's root.
	Act func(func() error) error
	// Denied are paths the reviewer never reads for evidence, nor asks
	// the view about: the policy's secrets and sandboxd's own
	// configuration and state.
	Denied []string
	// OpenView starts a reader of files with the command's own view and
	// identity, for one inspection: the only way the reviewer reads a
	// script. Nil when the command is not run here (ModelFor) or the
	// front end has no reader: then it reads none.
	OpenView func(ctx context.Context) (*evidence.Client, error)
	// Earlier, Recent and Stated are the job's evidence (see Job).
	Earlier, Recent []string
	Stated          string
	// Dial makes the model client's connections, to the endpoint or its
	// proxy: as the caller (fsid.Dialer), so a host firewall's owner
	// rules see the caller, and, in a run, never to sandboxd's own
	// listeners (Config.Reserved).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Proxy is the proxy the caller's environment names for a URL (nil:
	// none), by http.ProxyFromEnvironment's rules: the client must never
	// read the process's own, which in a daemon is root's.
	Proxy func(*url.URL) (*url.URL, error)
}

// ModelFactory builds the model reviewer (the front end supplies it: the
// session never imports the client).
type ModelFactory func(cfg ModelConfig) (broker.Reviewer, error)

// ReviewerInfo is the report's "reviewer": who could review this run.
type ReviewerInfo struct {
	// Kind is "model", "human" or "off".
	Kind string `json:"kind"`
	// Model and Endpoint name the model reviewer (the endpoint's host).
	Model    string `json:"model,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	// Person reports whether a person may be asked (as a fallback of the
	// model, or the reviewer itself).
	Person bool `json:"person,omitempty"`
	// Reviews, Faults and the token counts are the model's in this run.
	Reviews   int64 `json:"reviews,omitempty"`
	Faults    int64 `json:"faults,omitempty"`
	TokensIn  int64 `json:"tokens_in,omitempty"`
	TokensOut int64 `json:"tokens_out,omitempty"`
}

// usageReporter is a reviewer that counts its own use (review.Model).
type usageReporter interface {
	Usage() (reviews, faults, tokensIn, tokensOut int64)
}

// noteReviewer copies the model's counts into the report.
func (st *run) noteReviewer() {
	if u, ok := st.plan.model.(usageReporter); ok && st.rep.Reviewer != nil {
		r := st.rep.Reviewer
		r.Reviews, r.Faults, r.TokensIn, r.TokensOut = u.Usage()
	}
}

// MachineModel is a model reviewer the machine's operator sets for a
// caller (the daemon's machine configuration): its model, endpoint and
// key replace the caller's [review] model, base_url and api_key_env and
// their environment fallbacks, so a caller can neither read the key nor
// send it to a server of its own. The caller's [review] still sets the
// rest (on or off, timeout, caps, what the model is shown), within the
// machine policy.
type MachineModel struct {
	Model, BaseURL string
	// Key is the endpoint's credential: never in a command's
	// environment, a report, a prompt or a log line.
	Key string `json:"-"`
	// MeterDir is where the caps on the operator's key are counted for
	// this caller: a directory only root may write (a caller's own state
	// directory is the caller's to reset, or to name anew per request).
	// Empty: the caller's state directory.
	MeterDir string
}

// modelConfig resolves the model reviewer's configuration for caller:
// ok is false when no model is named (an API key alone sends nothing).
// mm, when set, is the machine's reviewer for the caller.
func modelConfig(c Caller, rev policy.Review, envDeny, envAllow []string, mm *MachineModel) (ModelConfig, bool) {
	get := c.Getenv
	if mm != nil {
		return machineModelConfig(c, rev, envDeny, envAllow, *mm)
	}
	cfg := ModelConfig{BaseURL: rev.BaseURL, Model: rev.Model, Review: rev,
		Dial: dialer(c, nil).DialContext, Proxy: callerProxy(c)}
	if cfg.Model == "" {
		cfg.Model = get("SANDBOXD_MODEL")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = get("OPENAI_BASE_URL")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.openai.com/v1"
	}
	cfg.Key = get(reviewKeyEnv(rev))
	cfg.Secrets = envSecrets(c, rev, envDeny, envAllow)
	return cfg, rev.Enabled && cfg.Model != ""
}

// machineModelConfig is modelConfig with the machine's reviewer mm. The
// caller's proxy variables are followed only to an https endpoint,
// where the proxy sees the host it tunnels to and never the key (the
// daemon checks the endpoint's certificate with the machine's own
// roots); to an http endpoint the daemon connects itself.
func machineModelConfig(c Caller, rev policy.Review, envDeny, envAllow []string, mm MachineModel) (ModelConfig, bool) {
	cfg := ModelConfig{BaseURL: mm.BaseURL, Model: mm.Model, Key: mm.Key, Review: rev, Dial: dialer(c, nil).DialContext}
	if strings.HasPrefix(mm.BaseURL, "https://") {
		cfg.Proxy = callerProxy(c)
	}
	cfg.Secrets = envSecrets(c, rev, envDeny, envAllow)
	if len(mm.Key) >= 8 {
		cfg.Secrets = append(cfg.Secrets, mm.Key)
	}
	return cfg, rev.Enabled && cfg.Model != ""
}

// envSecrets are the values of the caller's environment the policy
// strips as credentials, and its reviewer key's: the reviewer redacts
// them from all it sends.
func envSecrets(c Caller, rev policy.Review, envDeny, envAllow []string) []string {
	var out []string
	_, dropped := policy.FilterEnv(c.Env, envAllow, envDeny)
	for _, k := range append(dropped, reviewKeyEnv(rev)) {
		if v := c.Getenv(k); len(v) >= 8 {
			out = append(out, v)
		}
	}
	return out
}

// machineModelFor is the machine's reviewer for c, or nil.
func (r *Runner) machineModelFor(c Caller) *MachineModel {
	if r.machineModel == nil {
		return nil
	}
	if mm, ok := r.machineModel(c.UID); ok {
		return &mm
	}
	return nil
}

// reviewers fills the broker's reviewer slots for the job's mode.
func (r *Runner) reviewers(c Caller, j Job, p *plan) (broker.Reviewer, broker.Person, ReviewerInfo, error) {
	person := j.Reviewers.Person
	model := j.Reviewers.Model
	info := ReviewerInfo{Kind: ReviewOff}
	if j.Reviewer == "" {
		// No mode: the slots as the front end filled them.
		switch {
		case model != nil:
			info.Kind = ReviewModel
		case person != nil:
			info.Kind = ReviewHuman
		}
		info.Person = person != nil
		return model, person, info, nil
	}
	mode := j.Reviewer
	cfg, configured := modelConfig(c, p.policy.Review, p.policy.EnvDeny, p.policy.EnvAllow, r.machineModelFor(c))
	switch mode {
	case ReviewOff:
		return nil, nil, info, nil
	case ReviewHuman:
		return nil, person, ReviewerInfo{Kind: ReviewHuman, Person: person != nil}, nil
	case ReviewModel:
		if !configured && model == nil {
			return nil, nil, info, publicerr.New("--reviewer model: no model is configured (set [review] model in your policy, or SANDBOXD_MODEL)")
		}
	case ReviewAuto:
		if !configured && model == nil {
			if person != nil {
				return nil, person, ReviewerInfo{Kind: ReviewHuman, Person: true}, nil
			}
			return nil, nil, info, nil
		}
	default:
		return nil, nil, info, publicerr.New("unknown reviewer mode " + mode)
	}
	info = ReviewerInfo{Kind: ReviewModel, Model: cfg.Model, Endpoint: reviewurl.Host(cfg.BaseURL), Person: person != nil}
	if model != nil {
		return model, person, info, nil
	}
	if r.models == nil {
		return nil, nil, info, publicerr.New("this front end cannot reach a model reviewer")
	}
	cfg.Session, cfg.StateDir = p.session, c.Layout().State
	cfg.Act = func(f func() error) error { return fsid.Do(c.ID(), f) }
	if mm := r.machineModelFor(c); mm != nil && mm.MeterDir != "" {
		cfg.StateDir, cfg.Act = mm.MeterDir, nil // root's, and root counts there
	}
	cfg.Denied = append(append([]string(nil), p.policy.Secrets...), c.Layout().Own()...)
	cfg.Earlier, cfg.Recent, cfg.Stated = j.Earlier, j.Recent, j.Stated
	cfg.OpenView = r.viewOpener(p.spec)
	cfg.Dial = dialer(c, r.reserved).DialContext
	m, err := r.models(cfg)
	if err != nil {
		return nil, nil, info, publicerr.Wrap(err, "the model reviewer could not be set up: "+publicerr.Message(err, "see -v"))
	}
	return m, person, info, nil
}
