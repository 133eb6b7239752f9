package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	allowJSON = `{"outcome":"allow","rationale":"the user asked for it"}`
	sysPrompt = "You review one sandbox boundary. Reply with the verdict."
	userMsg   = "command: curl example.org"
)

func deadline(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestAllowContentReturned(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t, answerWith(allowJSON))
	c := newTestClient(t, f.url(), Config{})
	res, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	want := Result{Content: allowJSON, PromptTokens: 120, CompletionTokens: 30, Mode: ModeJSONSchema, Attempts: 1}
	if res != want {
		t.Fatalf("result = %+v, want %+v", res, want)
	}
}

func TestRequestBody(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t, answerWith(allowJSON))
	c := newTestClient(t, f.url(), Config{ReasoningEffort: "low", MaxOutputTokens: 300})
	if _, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	b := f.body(0)
	if b["model"] != "test-model" || b["reasoning_effort"] != "low" || b["max_completion_tokens"] != 300.0 {
		t.Errorf("model, reasoning_effort, max_completion_tokens = %v, %v, %v", b["model"], b["reasoning_effort"], b["max_completion_tokens"])
	}
	if got := systemMessage(t, b); got != sysPrompt {
		t.Errorf("system message changed under json_schema: %q", got)
	}
	rf := dig(b, "response_format")
	if dig(b, "response_format", "type") != "json_schema" || dig(b, "response_format", "json_schema", "strict") != true ||
		dig(b, "response_format", "json_schema", "name") != "verdict" {
		t.Fatalf("response_format = %v", rf)
	}
	if got := dig(b, "response_format", "json_schema", "schema"); !reflect.DeepEqual(got, testSchema()) {
		t.Errorf("schema sent = %v, want %v", got, testSchema())
	}
}

func TestDefaultsSendNoReasoningEffort(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t, answerWith(allowJSON))
	c := newTestClient(t, f.url(), Config{})
	if _, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	b := f.body(0)
	if _, ok := b["reasoning_effort"]; ok {
		t.Errorf("reasoning_effort sent: %v", b["reasoning_effort"])
	}
	if b["max_completion_tokens"] != 512.0 {
		t.Errorf("max_completion_tokens = %v, want 512", b["max_completion_tokens"])
	}
}

func TestAutoFallsBackToJSONObjectOnce(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t,
		failWith(400, "response_format json_schema is not supported by this model"),
		answerWith(allowJSON))
	c := newTestClient(t, f.url(), Config{})
	ctx := deadline(t, 5*time.Second)
	res, err := c.Complete(ctx, sysPrompt, userMsg, nil)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if res.Mode != ModeJSONObject || res.Attempts != 2 || res.Content != allowJSON {
		t.Fatalf("result = %+v, want json_object after 2 attempts", res)
	}
	if dig(f.body(0), "response_format", "type") != "json_schema" || dig(f.body(1), "response_format", "type") != "json_object" {
		t.Fatalf("formats sent: %v then %v", dig(f.body(0), "response_format"), dig(f.body(1), "response_format"))
	}
	if sys := systemMessage(t, f.body(1)); !strings.HasPrefix(sys, sysPrompt) || !strings.Contains(sys, "JSON") {
		t.Errorf("json_object system message lacks JSON: %q", sys)
	}
	res, err = c.Complete(ctx, sysPrompt, userMsg, nil)
	if err != nil || res.Mode != ModeJSONObject || res.Attempts != 1 {
		t.Fatalf("second Complete = %+v, %v; want json_object at once", res, err)
	}
	if got := dig(f.body(2), "response_format", "type"); got != "json_object" {
		t.Errorf("second review sent %v, want json_object", got)
	}
}

func TestFallbackNotRememberedWhenJSONObjectAlsoFails(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t, failWith(400, "bad model"))
	c := newTestClient(t, f.url(), Config{})
	_, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil)
	if fl := asFault(t, err); fl.Class != ClassHTTPStatus || fl.Status != 400 {
		t.Fatalf("fault = %+v, want http_status 400", fl)
	}
	if f.requests() != 2 || c.startMode() != ModeJSONSchema {
		t.Fatalf("requests = %d, start mode = %s; want 2 and json_schema still", f.requests(), c.startMode())
	}
}

func TestConfiguredJSONObject(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t, answerWith(allowJSON))
	c := newTestClient(t, f.url(), Config{StructuredOutput: ModeJSONObject})
	ctx := deadline(t, 5*time.Second)
	res, err := c.Complete(ctx, sysPrompt, userMsg, nil)
	if err != nil || res.Mode != ModeJSONObject || res.Attempts != 1 {
		t.Fatalf("Complete = %+v, %v", res, err)
	}
	b := f.body(0)
	if dig(b, "response_format", "type") != "json_object" || dig(b, "response_format", "json_schema") != nil {
		t.Errorf("response_format = %v", dig(b, "response_format"))
	}
	if sys := systemMessage(t, b); sys != sysPrompt+"\n\n"+jsonSentence {
		t.Errorf("system message = %q", sys)
	}
	withWord := "Answer in json: " + sysPrompt
	if _, err := c.Complete(ctx, withWord, userMsg, nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if sys := systemMessage(t, f.body(1)); sys != withWord {
		t.Errorf("system message that names JSON was changed: %q", sys)
	}
}

func TestRetries(t *testing.T) {
	cases := []struct {
		name     string
		first    step
		minWait  time.Duration
		attempts int
	}{
		{"429 retry-after seconds", failWith(429, "slow down", "Retry-After", "1"), time.Second, 2},
		{"429 retry-after-ms", failWith(429, "slow down", "Retry-After-Ms", "300"), 300 * time.Millisecond, 2},
		{"500 backoff", failWith(500, "oops"), 150 * time.Millisecond, 2},
		{"503 retry-after date", failWith(503, "busy", "Retry-After", time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat)), 0, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			f := newFake(t, tc.first, answerWith(allowJSON))
			c := newTestClient(t, f.url(), Config{})
			start := time.Now()
			res, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil)
			if err != nil || res.Attempts != tc.attempts || res.Content != allowJSON {
				t.Fatalf("Complete = %+v, %v", res, err)
			}
			if el := time.Since(start); el < tc.minWait {
				t.Errorf("retried after %v, want at least %v", el, tc.minWait)
			}
		})
	}
}

func TestRetryAfterBeyondDeadlineFailsAtOnce(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t, failWith(429, "quota", "Retry-After", "30"), answerWith(allowJSON))
	c := newTestClient(t, f.url(), Config{})
	start := time.Now()
	res, err := c.Complete(deadline(t, 3*time.Second), sysPrompt, userMsg, nil)
	fl := asFault(t, err)
	if fl.Class != ClassServer || fl.Status != 429 || res.Attempts != 1 || f.requests() != 1 {
		t.Fatalf("fault = %+v, attempts %d, requests %d", fl, res.Attempts, f.requests())
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("took %v, want an immediate fault", el)
	}
}

func TestServerErrorsUntilGivingUp(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t, failWith(502, "bad gateway"))
	c := newTestClient(t, f.url(), Config{})
	res, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil)
	if fl := asFault(t, err); fl.Class != ClassServer || fl.Status != 502 || res.Attempts != maxFailures {
		t.Fatalf("fault = %+v after %d attempts, want server after %d", fl, res.Attempts, maxFailures)
	}
}

func TestNotRetried(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	cases := []struct {
		name   string
		s      step
		class  string
		status int
	}{
		{"401", failWith(401, "Incorrect API key provided"), ClassAuth, 401},
		{"403", failWith(403, "forbidden"), ClassAuth, 403},
		{"404", failWith(404, "model not found"), ClassHTTPStatus, 404},
		{"refusal", answerBody(completion("", "I can't help with that.", "stop")), ClassRefusal, 0},
		{"content filter", answerBody(completion("", "", "content_filter")), ClassRefusal, 0},
		{"length", answerBody(completion(`{"outcome":"al`, "", "length")), ClassTruncated, 0},
		{"no choices", answerBody(map[string]any{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []any{}}), ClassEmpty, 0},
		{"empty content", answerWith("  "), ClassEmpty, 0},
		{"null content", answerBody(json.RawMessage(`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":null,"refusal":null}}]}`)), ClassEmpty, 0},
		{"content type", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte(`{"choices":[]}`))
		}, ClassContentType, 0},
		{"oversized by length", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(huge)))
			_, _ = w.Write([]byte(huge))
		}, ClassOversized, 0},
		{"oversized json", answerWith(huge), ClassOversized, 0},
		{"oversized chunked", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			for i := 0; i < 16; i++ {
				if _, err := w.Write([]byte(huge[:64<<10])); err != nil {
					return
				}
				w.(http.Flusher).Flush()
			}
		}, ClassOversized, 0},
		{"oversized error body", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			_, _ = w.Write([]byte(huge))
		}, ClassOversized, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			f := newFake(t, tc.s, answerWith(allowJSON))
			c := newTestClient(t, f.url(), Config{MaxBody: 256 << 10, StructuredOutput: ModeJSONSchema})
			res, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil)
			fl := asFault(t, err)
			if fl.Class != tc.class || fl.Status != tc.status {
				t.Fatalf("fault = %q %d (%v), want %q %d", fl.Class, fl.Status, fl.Err, tc.class, tc.status)
			}
			if res.Attempts != 1 || f.requests() != 1 {
				t.Errorf("attempts %d, requests %d; want 1 (no retry)", res.Attempts, f.requests())
			}
		})
	}
}

func TestMalformedBodyRetried(t *testing.T) {
	bodies := map[string]step{
		"not json": answerBody(json.RawMessage(`"x"`)),
		"syntax": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("not json"))
		},
		"array":          answerBody([]int{1, 2}),
		"number content": answerBody(json.RawMessage(`{"object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":5}}]}`)),
	}
	for name, s := range bodies {
		t.Run(name, func(t *testing.T) {
			checkGoroutines(t)
			f := newFake(t, s, answerWith(allowJSON))
			c := newTestClient(t, f.url(), Config{})
			res, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil)
			if err != nil || res.Attempts != 2 {
				t.Fatalf("Complete = %+v, %v; want success on the retry", res, err)
			}
			f = newFake(t, s)
			c = newTestClient(t, f.url(), Config{})
			_, err = c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil)
			if fl := asFault(t, err); fl.Class != ClassMalformed {
				t.Fatalf("fault = %q (%v), want malformed", fl.Class, fl.Err)
			}
		})
	}
}

func TestSchemaCopied(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t, answerWith(allowJSON))
	schema := testSchema()
	c := newTestClient(t, f.url(), Config{Schema: schema})
	schema["type"] = "array"
	if _, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if got := dig(f.body(0), "response_format", "json_schema", "schema", "type"); got != "object" {
		t.Errorf("schema type sent = %v; the caller's later edit leaked in", got)
	}
	if _, err := New(Config{BaseURL: f.url(), Model: "m", Schema: map[string]any{"bad": func() {}}}); err == nil {
		t.Error("New accepted a schema that cannot be encoded")
	}
}

func TestSlowDripTimesOut(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if _, err := w.Write([]byte(" ")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-tick.C:
			}
		}
	})
	c := newTestClient(t, f.url(), Config{})
	start := time.Now()
	_, err := c.Complete(deadline(t, 1500*time.Millisecond), sysPrompt, userMsg, nil)
	if fl := asFault(t, err); fl.Class != ClassTimeout {
		t.Fatalf("fault = %q (%v), want timeout", fl.Class, fl.Err)
	}
	if el := time.Since(start); el < 1400*time.Millisecond || el > 2500*time.Millisecond {
		t.Errorf("ended after %v, want at the 1.5 s deadline", el)
	}
}

func TestConnectionRefused(t *testing.T) {
	checkGoroutines(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newTestClient(t, "http://"+addr+"/v1", Config{})
	start := time.Now()
	res, err := c.Complete(deadline(t, 1500*time.Millisecond), sysPrompt, userMsg, nil)
	if fl := asFault(t, err); fl.Class != ClassConnection {
		t.Fatalf("fault = %q (%v), want connection", fl.Class, fl.Err)
	}
	if res.Attempts < 2 {
		t.Errorf("attempts = %d, want retries", res.Attempts)
	}
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Errorf("took %v, past the deadline", el)
	}
}

func TestValidateRetries(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t, answerWith(`not json`), answerWith(`{"outcome":`), answerWith(allowJSON))
	c := newTestClient(t, f.url(), Config{})
	validate := func(s string) error {
		if s != allowJSON {
			return errors.New("not a verdict")
		}
		return nil
	}
	res, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, validate)
	if err != nil || res.Attempts != 3 || res.Content != allowJSON {
		t.Fatalf("Complete = %+v, %v; want success on attempt 3", res, err)
	}
	if res.PromptTokens != 360 || res.CompletionTokens != 90 {
		t.Errorf("tokens = %d/%d, want the sum of 3 attempts", res.PromptTokens, res.CompletionTokens)
	}
}

func TestValidateAlwaysRejects(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t, answerWith(`{"outcome":"maybe"}`))
	c := newTestClient(t, f.url(), Config{})
	cause := errors.New("outcome not allow or deny")
	res, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, func(string) error { return cause })
	fl := asFault(t, err)
	if fl.Class != ClassMalformed || !errors.Is(err, cause) || res.Attempts != maxFailures || res.Content != "" {
		t.Fatalf("fault = %+v, result %+v; want malformed after %d", fl, res, maxFailures)
	}
}

func TestAPIKey(t *testing.T) {
	checkGoroutines(t)
	const key = "sk-test-0123456789abcdef"
	f := newFake(t, failWith(401, "Incorrect API key provided: "+key))
	c := newTestClient(t, f.url(), Config{APIKey: key})
	_, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil)
	if got := f.header(0).Get("Authorization"); got != "Bearer "+key {
		t.Errorf("Authorization = %q", got)
	}
	fl := asFault(t, err)
	if fl.Class != ClassAuth || f.requests() != 1 {
		t.Fatalf("fault %q after %d requests, want auth after 1", fl.Class, f.requests())
	}
	for _, s := range []string{fl.Error(), fl.Err.Error()} {
		if strings.Contains(s, key) || strings.Contains(s, sysPrompt) {
			t.Errorf("error text leaks the key or prompt: %q", s)
		}
	}
}

func TestEnvironmentIgnored(t *testing.T) {
	checkGoroutines(t)
	other := newFake(t, answerWith(allowJSON))
	t.Setenv("OPENAI_API_KEY", "sk-from-env")
	t.Setenv("OPENAI_BASE_URL", other.url())
	t.Setenv("OPENAI_ORG_ID", "org-env")
	f := newFake(t, answerWith(allowJSON))
	c := newTestClient(t, f.url(), Config{})
	if _, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	h := f.header(0)
	if h.Get("Authorization") != "" || h.Get("OpenAI-Organization") != "" || other.requests() != 0 {
		t.Errorf("environment leaked: Authorization %q, org %q, other host %d requests",
			h.Get("Authorization"), h.Get("OpenAI-Organization"), other.requests())
	}
}

func TestRedirectToAnotherHostRefused(t *testing.T) {
	checkGoroutines(t)
	other := newFake(t, answerWith(allowJSON))
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.url()+"/chat/completions", http.StatusTemporaryRedirect)
	})
	c := newTestClient(t, f.url(), Config{APIKey: "sk-secret"})
	_, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil)
	if fl := asFault(t, err); fl.Class != ClassHTTPStatus || fl.Status != http.StatusTemporaryRedirect {
		t.Fatalf("fault = %q %d (%v), want http_status 307", fl.Class, fl.Status, fl.Err)
	}
	if other.requests() != 0 {
		t.Errorf("the other host got %d requests", other.requests())
	}
}

func TestCallerHTTPClientStillBounded(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t, answerWith(strings.Repeat("y", 64<<10)))
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	c := newTestClient(t, f.url(), Config{HTTPClient: hc, MaxBody: 16 << 10})
	_, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil)
	if fl := asFault(t, err); fl.Class != ClassOversized {
		t.Fatalf("fault = %q, want oversized", fl.Class)
	}
	if _, ok := hc.Transport.(*http.Transport); !ok || hc.CheckRedirect != nil {
		t.Errorf("the caller's client was modified")
	}
}

func TestNoDeadlineGetsDefault(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t, answerWith(allowJSON))
	c := newTestClient(t, f.url(), Config{})
	if _, err := c.Complete(context.Background(), sysPrompt, userMsg, nil); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if got := f.header(0).Get("X-Stainless-Retry-Count"); got != "0" && got != "" {
		t.Errorf("SDK retry count header = %q", got)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	good := Config{BaseURL: "http://127.0.0.1:11434/v1", Model: "m", Schema: testSchema()}
	cases := map[string]func(*Config){
		"no base url":       func(c *Config) { c.BaseURL = "" },
		"relative url":      func(c *Config) { c.BaseURL = "/v1" },
		"ftp url":           func(c *Config) { c.BaseURL = "ftp://host/v1" },
		"query":             func(c *Config) { c.BaseURL = "https://host/v1?key=sk-x" },
		"no model":          func(c *Config) { c.Model = "" },
		"negative tokens":   func(c *Config) { c.MaxOutputTokens = -1 },
		"effort":            func(c *Config) { c.ReasoningEffort = "extreme" },
		"mode":              func(c *Config) { c.StructuredOutput = "grammar" },
		"schema mode, none": func(c *Config) { c.StructuredOutput = ModeJSONSchema; c.Schema = nil },
		"negative body":     func(c *Config) { c.MaxBody = -1 },
		"huge body":         func(c *Config) { c.MaxBody = 1 << 40 },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := good
			mutate(&cfg)
			_, err := New(cfg)
			if fl := asFault(t, err); fl.Class != ClassConfig || strings.Contains(fl.Error(), "sk-x") {
				t.Fatalf("New = %v, want a config fault", err)
			}
		})
	}
	if _, err := New(good); err != nil {
		t.Fatalf("New(good) = %v", err)
	}
}

func TestAutoWithoutSchemaUsesJSONObject(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t, answerWith(allowJSON))
	c := newTestClient(t, f.url(), Config{Schema: map[string]any{}})
	res, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil)
	if err != nil || res.Mode != ModeJSONObject {
		t.Fatalf("Complete = %+v, %v", res, err)
	}
}

func TestFaultMessages(t *testing.T) {
	for _, class := range []string{ClassTimeout, ClassAuth, ClassRefusal, ClassTruncated, ClassOversized,
		ClassContentType, ClassEmpty, ClassHTTPStatus, ClassServer, ClassConnection, ClassMalformed, ClassConfig} {
		f := &Fault{Class: class, Status: 418, Err: errors.New("secret cause sk-123")}
		if msg := f.Error(); msg == "model reviewer: failed" || strings.Contains(msg, "sk-123") {
			t.Errorf("%s: %q", class, msg)
		}
		if !strings.Contains(f.Error(), strconv.Itoa(418)) && (class == ClassAuth || class == ClassHTTPStatus || class == ClassServer) {
			t.Errorf("%s: status missing from %q", class, f.Error())
		}
	}
}

// TestDialAndProxy: the client of its own connects only through
// Config.Dial, to the endpoint or to the proxy Config.Proxy names, and
// never through the process's own proxy variables (in a daemon they are
// root's, not the caller's).
func TestDialAndProxy(t *testing.T) {
	checkGoroutines(t)
	f := newFake(t, answerWith(allowJSON))
	envProxy := newFake(t, answerWith(allowJSON))
	t.Setenv("HTTP_PROXY", envProxy.srv.URL)
	t.Setenv("http_proxy", envProxy.srv.URL)
	real := strings.TrimPrefix(f.srv.URL, "http://")
	var mu sync.Mutex
	var dials []string
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dials = append(dials, network+" "+addr)
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, real) // model.test is f
	}
	c := newTestClient(t, "http://model.test/v1", Config{Dial: dial})
	if _, err := c.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil); err != nil {
		t.Fatalf("Complete through Dial: %v", err)
	}
	proxied := newTestClient(t, "http://model.test/v1", Config{Dial: dial, Proxy: func(*http.Request) (*url.URL, error) {
		return url.Parse("http://proxy.test:3128")
	}})
	if _, err := proxied.Complete(deadline(t, 5*time.Second), sysPrompt, userMsg, nil); err != nil {
		t.Fatalf("Complete through the caller's proxy: %v", err)
	}
	mu.Lock()
	if want := []string{"tcp model.test:80", "tcp proxy.test:3128"}; !slices.Equal(dials, want) {
		t.Errorf("Dial was asked %q, want %q", dials, want)
	}
	mu.Unlock()
	if f.requests() != 2 || envProxy.requests() != 0 {
		t.Errorf("endpoint got %d requests (want 2), the process's HTTP_PROXY %d (want 0)", f.requests(), envProxy.requests())
	}
	refused := newTestClient(t, f.url(), Config{Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("refused by the test")
	}})
	_, err := refused.Complete(deadline(t, 2*time.Second), sysPrompt, userMsg, nil)
	if fl := asFault(t, err); fl.Class != ClassConnection {
		t.Errorf("fault = %q, want connection", fl.Class)
	}
	if f.requests() != 2 {
		t.Errorf("a Dial that refuses still reached the endpoint")
	}
}
