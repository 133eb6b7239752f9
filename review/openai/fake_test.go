package openai

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"
)

// step answers one request to the fake endpoint.
type step func(w http.ResponseWriter, r *http.Request)

// fakeServer is a local Chat Completions endpoint on 127.0.0.1. It answers
// POST /v1/chat/completions with the steps in order (the last repeats) and
// records every request's headers and decoded body.
type fakeServer struct {
	srv     *httptest.Server
	mu      sync.Mutex // guards steps, bodies, headers
	steps   []step
	bodies  []map[string]any
	headers []http.Header
}

func newFake(t *testing.T, steps ...step) *fakeServer {
	t.Helper()
	f := &fakeServer{steps: steps}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) url() string { return f.srv.URL + "/v1" }

func (f *fakeServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	f.mu.Lock()
	n := len(f.bodies)
	f.bodies = append(f.bodies, body)
	f.headers = append(f.headers, r.Header.Clone())
	s := f.steps[min(n, len(f.steps)-1)]
	f.mu.Unlock()
	s(w, r)
}

func (f *fakeServer) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

func (f *fakeServer) body(i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[i]
}

func (f *fakeServer) header(i int) http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.headers[i]
}

// completion is a real chat.completion response body.
func completion(content, refusal, finish string) map[string]any {
	msg := map[string]any{"role": "assistant", "content": content, "refusal": nil}
	if refusal != "" {
		msg["content"], msg["refusal"] = nil, refusal
	}
	return map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion", "created": 1767225600, "model": "test-model",
		"choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func answerWith(content string) step {
	return func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, completion(content, "", "stop")) }
}

func answerBody(v any) step {
	return func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 200, v) }
}

// failWith answers an OpenAI-style error body with status and extra headers.
func failWith(status int, message string, kv ...string) step {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(kv); i += 2 {
			w.Header().Set(kv[i], kv[i+1])
		}
		writeJSON(w, status, map[string]any{"error": map[string]any{
			"message": message, "type": "invalid_request_error", "param": nil, "code": nil,
		}})
	}
}

// checkGoroutines fails t if goroutines started during it outlive it. Call
// it first so that its cleanup runs after the servers' and clients'.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("goroutines: %d before, %d after\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
	})
}

// testSchema is a small strict verdict schema.
func testSchema() map[string]any {
	return map[string]any{
		"type": "object", "additionalProperties": false,
		"required":   []any{"outcome", "rationale"},
		"properties": map[string]any{"outcome": map[string]any{"type": "string", "enum": []any{"allow", "deny"}}, "rationale": map[string]any{"type": "string"}},
	}
}

// newTestClient builds a Client for f (or url) with cfg's other fields.
func newTestClient(t *testing.T, baseURL string, cfg Config) *Client {
	t.Helper()
	cfg.BaseURL = baseURL
	if cfg.Model == "" {
		cfg.Model = "test-model"
	}
	if cfg.Schema == nil {
		cfg.Schema = testSchema()
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

func asFault(t *testing.T, err error) *Fault {
	t.Helper()
	f, ok := err.(*Fault)
	if !ok {
		t.Fatalf("error %T %v is not a *Fault", err, err)
	}
	return f
}

func dig(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

func systemMessage(t *testing.T, body map[string]any) string {
	t.Helper()
	msgs, _ := body["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("messages = %v, want system and user", body["messages"])
	}
	m, _ := msgs[0].(map[string]any)
	if m["role"] != "system" {
		t.Fatalf("first message role = %v", m["role"])
	}
	return fmt.Sprint(m["content"])
}
