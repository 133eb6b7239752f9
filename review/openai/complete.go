package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

const (
	// maxFailures bounds the retryable faults of one Complete, whatever
	// time the deadline would still allow (each attempt costs tokens).
	maxFailures = 4
	// defaultDeadline bounds a Complete whose ctx has no deadline.
	defaultDeadline = 60 * time.Second
	// jsonSentence is appended to a json_object request's system message
	// when it lacks the word: servers require "JSON" in the prompt.
	jsonSentence = "Answer with a single JSON object."
)

// Log attribute keys.
const (
	logKeyClass  = "class"
	logKeyStatus = "status"
	logKeyMode   = "mode"
)

// Result is the accepted answer of one Complete.
type Result struct {
	Content                        string // the assistant message's content, as validate accepted it
	PromptTokens, CompletionTokens int64  // summed over every attempt's usage (0 if absent)
	Mode                           string // "json_schema" or "json_object": what the last attempt used
	Attempts                       int    // requests sent, the json_object fallback included
}

// reply is one attempt's outcome: the content, or a fault with the wait
// the server asked for before another try.
type reply struct {
	content          string
	prompt, complete int64
	fault            *Fault
	retryAfter       time.Duration
	hasRetryAfter    bool
}

// Complete sends one chat completion (a system and a user message) and
// returns the assistant's content once validate accepts it (nil validate
// accepts any non-empty content). ctx's deadline bounds the whole review:
// every attempt and every wait fits in it, and a ctx without one gets 60 s.
//
// Retried while the deadline allows (at most 4 faults): connection errors,
// HTTP 429 and 5xx (after Retry-After, which fails at once if it would pass
// the deadline), and content validate rejects. Never retried: 401/403,
// other 4xx, refusal, truncated output, oversized or non-JSON bodies.
// Every error is a *Fault; the Result carries the attempts made either way.
func (c *Client) Complete(ctx context.Context, system, user string, validate func(content string) error) (Result, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultDeadline)
		defer cancel()
	}
	var res Result
	mode, fellBack, failures := c.startMode(), false, 0
	for {
		res.Mode = mode
		res.Attempts++
		r := c.send(ctx, mode, system, user)
		res.PromptTokens += r.prompt
		res.CompletionTokens += r.complete
		if r.fault == nil && fellBack {
			c.objectOnly.Store(true) // the endpoint answered json_object: keep it
			c.log.DebugContext(ctx, "openai: json_schema refused, using json_object", logKeyMode, ModeJSONObject)
		}
		if r.fault == nil && validate != nil {
			if err := validate(r.content); err != nil {
				r.fault = &Fault{Class: ClassMalformed, Err: fmt.Errorf("openai: validate: %w", err)}
			}
		}
		if r.fault == nil {
			res.Content = r.content
			return res, nil
		}
		c.log.DebugContext(ctx, "openai: attempt failed", logKeyClass, r.fault.Class, logKeyStatus, r.fault.Status)
		if c.shouldFallBack(mode, r.fault) {
			mode, fellBack = ModeJSONObject, true
			continue
		}
		failures++
		if !retryable(r.fault) || failures >= maxFailures {
			return res, r.fault
		}
		if err := waitRetry(ctx, r, failures); err != nil {
			return res, err
		}
	}
}

// startMode is the structured-output mode of a request's first attempt.
func (c *Client) startMode() string {
	switch {
	case c.mode == ModeJSONObject, c.mode == ModeAuto && (len(c.schema) == 0 || c.objectOnly.Load()):
		return ModeJSONObject
	default:
		return ModeJSONSchema
	}
}

// shouldFallBack reports whether "auto" should retry this request as
// json_object: the endpoint rejected a json_schema request as invalid.
// Any 400 (or 422, FastAPI-style) counts: servers word it differently.
func (c *Client) shouldFallBack(mode string, f *Fault) bool {
	return c.mode == ModeAuto && mode == ModeJSONSchema && f.Class == ClassHTTPStatus &&
		(f.Status == http.StatusBadRequest || f.Status == http.StatusUnprocessableEntity)
}

// waitRetry sleeps before the next attempt: the server's Retry-After, or a
// backoff for connection and server faults (none after malformed content).
// A wait that would pass the deadline returns the fault at once.
func waitRetry(ctx context.Context, r reply, failures int) *Fault {
	var wait time.Duration
	switch {
	case r.hasRetryAfter:
		wait = r.retryAfter
	case r.fault.Class != ClassMalformed:
		wait = backoff(failures)
	}
	if deadline, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(deadline) {
		return r.fault
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return &Fault{Class: ClassTimeout, Err: fmt.Errorf("openai: waiting to retry: %w", ctx.Err())}
	case <-t.C:
		return nil
	}
}

// send makes one HTTP attempt and checks the answer's shape.
func (c *Client) send(ctx context.Context, mode, system, user string) reply {
	var raw *http.Response
	cc, err := c.chat.New(ctx, c.params(mode, system, user), option.WithResponseInto(&raw))
	if err != nil {
		return classify(ctx, err)
	}
	if raw != nil && raw.StatusCode/100 != 2 {
		// Only a redirect left unfollowed gets here.
		return reply{fault: &Fault{Class: ClassHTTPStatus, Status: raw.StatusCode,
			Err: fmt.Errorf("openai: unexpected HTTP %d", raw.StatusCode)}}
	}
	return answer(cc)
}

// classify turns the SDK's error into a reply with a fault.
func classify(ctx context.Context, err error) reply {
	var apiErr *openai.Error
	if ctx.Err() != nil || !errors.As(err, &apiErr) {
		return reply{fault: classifyTransport(ctx, fmt.Errorf("openai: chat completion: %w", err))}
	}
	r := reply{fault: classifyStatus(apiErr.StatusCode, fmt.Errorf("openai: chat completion: %w", err))}
	if apiErr.Response != nil {
		r.retryAfter, r.hasRetryAfter = retryAfter(apiErr.Response.Header, time.Now())
	}
	return r
}

// answer takes the first choice's content, refusing what is not a
// complete, willing answer.
func answer(cc *openai.ChatCompletion) reply {
	if cc == nil {
		return reply{fault: &Fault{Class: ClassEmpty, Err: errors.New("openai: no completion")}}
	}
	r := reply{prompt: cc.Usage.PromptTokens, complete: cc.Usage.CompletionTokens}
	if len(cc.Choices) == 0 {
		r.fault = &Fault{Class: ClassEmpty, Err: errors.New("openai: no choices")}
		return r
	}
	ch := cc.Choices[0]
	switch {
	case ch.Message.Refusal != "" || ch.FinishReason == "content_filter":
		r.fault = &Fault{Class: ClassRefusal, Err: fmt.Errorf("openai: refused (finish_reason %q)", ch.FinishReason)}
	case ch.FinishReason == "length":
		r.fault = &Fault{Class: ClassTruncated, Err: errors.New("openai: finish_reason length")}
	case strings.TrimSpace(ch.Message.Content) == "":
		r.fault = &Fault{Class: ClassEmpty, Err: errors.New("openai: empty content")}
	case !strings.HasPrefix(ch.Message.JSON.Content.Raw(), `"`):
		// The SDK coerces a number or object into text; a server that sent
		// one is not speaking the protocol.
		r.fault = &Fault{Class: ClassMalformed, Err: errors.New("openai: content is not a JSON string")}
	default:
		r.content = ch.Message.Content
	}
	return r
}

// params builds the request body for one attempt in mode.
func (c *Client) params(mode, system, user string) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{
		Model:               c.model,
		MaxCompletionTokens: openai.Int(c.maxTokens),
	}
	if c.effort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(c.effort)
	}
	switch mode {
	case ModeJSONSchema:
		p.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
				Name: schemaName, Strict: openai.Bool(true), Schema: c.schema,
			},
		}
	default:
		p.ResponseFormat.OfJSONObject = &shared.ResponseFormatJSONObjectParam{}
		if !strings.Contains(strings.ToLower(system), "json") {
			system = strings.TrimRight(system, "\n") + "\n\n" + jsonSentence
		}
	}
	p.Messages = []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(user)}
	return p
}
