package runcmd

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"slices"
	"time"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/evidence"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/reviewurl"
	"github.com/sandboxd/sandboxd/session"
)

// ReviewModel is the model reviewer a run's policy configures (cfg),
// asking its prompts of client: the one home of what review.Model is
// given, whichever process holds the model's client (the core's own, or
// the core reached through a pipe: CoreModels). observe, if set, hears
// each review (the daemon's metrics).
func ReviewModel(cfg session.ModelConfig, client review.Completer, log *slog.Logger, observe func(review.Observation)) *review.Model {
	r := cfg.Review
	return &review.Model{
		Client: client, Timeout: time.Duration(r.Timeout), MaxInputTokens: int(r.MaxInputTokens),
		Redactor: review.NewRedactor(cfg.Secrets),
		Meter: &review.Meter{Dir: cfg.StateDir, Act: cfg.Act, Caps: review.Caps{
			CallsPerSession: r.MaxCallsPerSession, CallsPerHour: r.MaxCallsPerHour,
			TokensPerSession: r.MaxTokensPerSession, TokensPerHour: r.MaxTokensPerHour,
			UserCallsPerHour: r.MaxUserCallsPerHour, UserTokensPerHour: r.MaxUserTokensPerHour}},
		Denied:   func(p string) bool { return under(p, cfg.Denied) },
		OpenView: openView(cfg.OpenView),
		Earlier:  cfg.Earlier, Recent: cfg.Recent, Stated: cfg.Stated, Log: log, Observe: observe,
	}
}

// CoreModels builds the model reviewer of sandboxd-run, which links no
// model client: each prompt goes to a core beside it (ModelArg), one
// process per prompt, and anything short of the core's answer is the
// model reviewer's fault, which the broker takes as a deny (or a
// question to a person). The prompt is built, redacted, bounded and
// metered here, as in the core.
func CoreModels(log *slog.Logger) session.ModelFactory {
	return func(cfg session.ModelConfig) (broker.Reviewer, error) {
		// The policy's own fields were checked as it was read; the
		// endpoint may come from OPENAI_BASE_URL, which was not: one the
		// core's client would refuse fails the run here, by its rule
		// (credentials in the environment's URL are the caller's own).
		if why := reviewurl.Check(cfg.BaseURL); why != "" {
			return nil, publicerr.New("the model reviewer's configuration is invalid (check [review] in your policy; run with -v to log why)")
		}
		r := cfg.Review
		call := ModelCall{BaseURL: cfg.BaseURL, Model: cfg.Model, Key: cfg.Key,
			MaxOutputTokens: int(r.MaxOutputTokens), ReasoningEffort: r.ReasoningEffort, StructuredOutput: r.StructuredOutput}
		if cfg.Proxy != nil {
			// The client speaks to one endpoint: its proxy is the one the
			// caller's environment names for the base URL (by scheme and
			// host, as http.ProxyFromEnvironment decides).
			u, err := url.Parse(cfg.BaseURL)
			if err != nil {
				return nil, publicerr.Wrap(err, "the model reviewer's configuration is invalid (check [review] in your policy; run with -v to log why)")
			}
			p, err := cfg.Proxy(u)
			if err != nil {
				return nil, publicerr.Wrap(err, "the proxy your environment names for the model reviewer is invalid (HTTPS_PROXY, HTTP_PROXY)")
			}
			if p != nil {
				call.Proxy = p.String()
			}
		}
		return ReviewModel(cfg, &coreCompleter{call: call, log: log}, log, nil), nil
	}
}

// openView adapts the session's view opener to the reviewer's (nil
// stays nil: no script is read).
func openView(open func(context.Context) (*evidence.Client, error)) func(context.Context) (review.View, error) {
	if open == nil {
		return nil
	}
	return func(ctx context.Context) (review.View, error) {
		c, err := open(ctx)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// under reports whether p is one of dirs or below one, as a secrets
// entry covers it (the last element may be a glob).
func under(p string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return broker.Within(p, d) })
}

// classedFault is a fault the core's client reported: its public
// sentence and its class (review.FaultClass).
type classedFault struct{ class, sentence string }

func (f *classedFault) Error() string      { return f.sentence }
func (f *classedFault) FaultClass() string { return f.class }

// errNoCore is why a review went to no model: the core could not be
// asked, or its answer was not one.
var errNoCore = errors.New("runcmd: the model reviewer's process failed")

// EvidenceReader is the command that runs the reviewer's evidence
// reader inside a run's sandbox: the helper's executable, through its
// own executable link (a path of it may be masked inside), as the
// command's uid, which needs it to be executable by that uid, and under
// Landlock's read rules; where it is not, no script is read. (Without a
// separate helper the helper is the core itself, which is a reader too.)
func EvidenceReader() []string { return []string{"/proc/self/exe", evidence.ReaderArg} }
