package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/evidence"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/review/openai"
	"github.com/sandboxd/sandboxd/session"
)

// modelFactory builds the model reviewer a run's policy configures: the
// openai-go client behind review.Model. observe, if set, hears each
// review (the daemon's metrics).
func modelFactory(log *slog.Logger, observe func(review.Observation)) session.ModelFactory {
	return func(cfg session.ModelConfig) (broker.Reviewer, error) {
		r := cfg.Review
		c, err := openai.New(openai.Config{
			BaseURL: cfg.BaseURL, Model: cfg.Model, APIKey: cfg.Key,
			MaxOutputTokens: int(r.MaxOutputTokens), ReasoningEffort: r.ReasoningEffort,
			StructuredOutput: r.StructuredOutput, Schema: review.VerdictSchema(), Logger: log,
			Dial: cfg.Dial, Proxy: requestProxy(cfg.Proxy),
		})
		if err != nil {
			return nil, publicerr.Wrap(err, "the model reviewer's configuration is invalid (check [review] in your policy; run with -v to log why)")
		}
		return &review.Model{
			Client: completer{c}, Timeout: time.Duration(r.Timeout), MaxInputTokens: int(r.MaxInputTokens),
			Redactor: review.NewRedactor(cfg.Secrets),
			Meter: &review.Meter{Dir: cfg.StateDir, Act: cfg.Act, Caps: review.Caps{
				CallsPerSession: r.MaxCallsPerSession, CallsPerHour: r.MaxCallsPerHour,
				TokensPerSession: r.MaxTokensPerSession, TokensPerHour: r.MaxTokensPerHour,
				UserCallsPerHour: r.MaxUserCallsPerHour, UserTokensPerHour: r.MaxUserTokensPerHour}},
			Denied:   func(p string) bool { return under(p, cfg.Denied) },
			OpenView: openView(cfg.OpenView),
			Earlier:  cfg.Earlier, Recent: cfg.Recent, Stated: cfg.Stated, Log: log, Observe: observe,
		}, nil
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

// requestProxy adapts the caller's proxy rule to net/http's (nil stays
// nil: no proxy).
func requestProxy(proxy func(*url.URL) (*url.URL, error)) func(*http.Request) (*url.URL, error) {
	if proxy == nil {
		return nil
	}
	return func(r *http.Request) (*url.URL, error) { return proxy(r.URL) }
}

// completer adapts the client to review.Completer; its faults carry
// their own safe sentence.
type completer struct{ c *openai.Client }

func (a completer) Complete(ctx context.Context, system, user string, validate func(string) error) (review.Completion, error) {
	res, err := a.c.Complete(ctx, system, user, validate)
	out := review.Completion{Content: res.Content, PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens}
	var f *openai.Fault
	if errors.As(err, &f) {
		return out, publicerr.Wrap(err, f.Error())
	}
	return out, err
}

// under reports whether p is one of dirs or below one, as a secrets
// entry covers it (the last element may be a glob).
func under(p string, dirs []string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return broker.Within(p, d) })
}

// evidenceReader is the command that runs the reviewer's evidence
// reader inside a run's sandbox: this very binary, through the helper's
// own executable link (a path of it may be masked inside), as the
// command's uid, which needs it to be executable by that uid, and under
// Landlock's read rules; where it is not, no script is read.
func evidenceReader() []string { return []string{"/proc/self/exe", evidence.ReaderArg} }
