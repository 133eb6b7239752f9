package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"os"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/review/openai"
	"github.com/sandboxd/sandboxd/session"
)

// runOptions are the core's for a run it takes (runcmd.Command): the
// model's client in this process, and pipes to the command (Claude
// Code's shell prefix).
func runOptions(pipes []*os.File) runcmd.Options {
	return runcmd.Options{Models: func(log *slog.Logger) session.ModelFactory { return modelFactory(log, nil) },
		EvidenceReader: runcmd.EvidenceReader(), Pipes: pipes}
}

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
		return runcmd.ReviewModel(cfg, completer{c}, log, observe), nil
	}
}

// completeCall asks the model one prompt for sandboxd-run
// (runcmd.ModelArg), as the reviewer in this process would: the same
// client and configuration, validated with the verdict's parser, which
// is what review.Model validates with. It connects as this process,
// which sandboxd-run started as the caller; the proxy is the one the
// caller's environment names for the endpoint, as sandboxd-run read it.
func completeCall(ctx context.Context, call runcmd.ModelCall) (review.Completion, error) {
	var proxy func(*http.Request) (*url.URL, error)
	if call.Proxy != "" {
		u, err := url.Parse(call.Proxy)
		if err != nil {
			return review.Completion{}, publicerr.Wrap(err, "the proxy your environment names for the model reviewer is invalid (HTTPS_PROXY, HTTP_PROXY)")
		}
		proxy = http.ProxyURL(u)
	}
	c, err := openai.New(openai.Config{
		BaseURL: call.BaseURL, Model: call.Model, APIKey: call.Key,
		MaxOutputTokens: call.MaxOutputTokens, ReasoningEffort: call.ReasoningEffort,
		StructuredOutput: call.StructuredOutput, Schema: review.VerdictSchema(), Proxy: proxy,
	})
	if err != nil {
		return review.Completion{}, publicerr.Wrap(err, "the model reviewer's configuration is invalid (check [review] in your policy; run with -v to log why)")
	}
	return completer{c}.Complete(ctx, call.System, call.User, func(content string) error {
		_, err := review.ParseVerdict(content)
		return err
	})
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
