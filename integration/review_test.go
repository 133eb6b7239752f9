package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeModel is an OpenAI-compatible Chat Completions server on the
// host's loopback: the real wire format, driven by sandboxd's real
// openai-go client. It records every request body and answers with
// decide(body).
type fakeModel struct {
	url    string
	mu     sync.Mutex
	bodies []string
}

func newFakeModel(t *testing.T, decide func(body string) (outcome, risk, auth, why string)) *fakeModel {
	t.Helper()
	m := &fakeModel{}
	m.url = "http://" + serveLoopback(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.bodies = append(m.bodies, string(b))
		m.mu.Unlock()
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer fake-review-key" {
			http.Error(w, `{"error":{"message":"no"}}`, http.StatusUnauthorized)
			return
		}
		outcome, risk, auth, why := decide(string(b))
		writeVerdict(w, "fake-model", outcome, risk, auth, why)
	}) + "/v1"
	return m
}

// serveLoopback serves h on a loopback port of the test's own until the
// test ends, and returns its address (host:port).
func serveLoopback(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// writeVerdict answers a chat completion whose content is the verdict
// (outcome, risk level, user authorization, rationale), as the OpenAI
// API does, with 900 prompt and 40 completion tokens.
func writeVerdict(w http.ResponseWriter, model string, outcome, risk, auth, why string) {
	verdict, _ := json.Marshal(map[string]string{"outcome": outcome, "risk_level": risk, "user_authorization": auth, "rationale": why})
	resp, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": time.Now().Unix(), "model": model,
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": string(verdict)}}},
		"usage": map[string]any{"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940},
	})
	w.Header().Set("Content-Type", "application/json")
	w.Write(resp)
}

func (m *fakeModel) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.bodies...)
}

// modelPolicy is a policy naming the fake model, plus extra TOML.
func modelPolicy(t *testing.T, e *env, m *fakeModel, extra string) string {
	t.Helper()
	p := filepath.Join(e.dir, "policies", "model-"+randHex(3)+".toml")
	e.writeFile(p, fmt.Sprintf("%s\n[review]\nmodel = \"fake-model\"\nbase_url = %q\napi_key_env = \"FAKE_REVIEW_KEY\"\n", extra, m.url), 0o644)
	return p
}

// TestModelReviewerEndToEnd: with --reviewer model, a harmless write
// outside the workspace is allowed by the model and the retry succeeds;
// a held connection to an asked destination is allowed while it waits;
// a credential read is hard-denied before the model is asked, so its
// content is never sent; and canaries in the environment, the command
// and a URL never reach the model's endpoint.
func TestModelReviewerEndToEnd(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		m := newFakeModel(t, func(body string) (string, string, string, string) {
			if strings.Contains(body, "read_file") {
				return "deny", "critical", "unknown", "a private key"
			}
			return "allow", "low", "medium", "a file the task writes"
		})
		o := egNewOrigin(t, "127.0.0.1:0", false, nil)
		target := filepath.Join(e.mkdir("out", 0o755), "model-allowed.txt")
		envCanary := "ENVCANARY" + randHex(12)
		urlCanary := "urlcanary" + randHex(12)
		pol := modelPolicy(t, e, m, fmt.Sprintf("[boundaries]\nask = [\"net connect 127.0.0.1:%s\"]", o.port))
		fileCanary := "ghp_" + randHex(18)
		e.writeFile(filepath.Join(e.ws, "build.sh"), "#!/bin/sh\nGITHUB_TOKEN="+fileCanary+" true\n", 0o755)
		script := fmt.Sprintf(`bash build.sh; echo written > %s && echo WROTE; : %s
curl -s -o /dev/null -w 'HTTP %%{http_code}\n' 'http://127.0.0.1:%s/path?token=%s'; echo END`, target, envCanary, o.port, urlCanary)
		opts := runOpts{env: []string{"FAKE_REVIEW_KEY=fake-review-key", "MY_API_TOKEN=" + envCanary}}
		r := e.sandboxdOpts(opts, "run", "--policy", pol, "--reviewer", "model", "--intent", "write the output file and fetch the page", "-c", script)
		if b, err := os.ReadFile(target); err != nil || string(b) != "written\n" {
			t.Fatalf("the model's allow did not land: %q %v\n%s", b, err, r)
		}
		if !strings.Contains(r.stdout, "HTTP 200") {
			t.Errorf("the held connection was not allowed\n%s", r)
		}
		o.mustHits(t, 2, r) // once per attempt: the write's retry runs the command again
		key := e.sandboxdOpts(opts, "run", "--policy", pol, "--reviewer", "model", "-c", "cat ~/.ssh/id_rsa; echo "+envCanary)
		e.noCanary(t, key)
		for _, b := range boundaries(key) {
			if strings.HasSuffix(fmt.Sprint(b["path"]), "id_rsa") && b["source"] != "hard-deny" {
				t.Errorf("credential read decided by %v", b["source"])
			}
		}
		rev, _ := r.report["reviewer"].(map[string]any)
		if rev["kind"] != "model" || rev["model"] != "fake-model" {
			t.Errorf("report reviewer: %v", rev)
		}
		bodies := strings.Join(m.requests(), "\n")
		if len(m.requests()) == 0 {
			t.Fatalf("the model was never asked\n%s", r)
		}
		if !strings.Contains(bodies, "build.sh") {
			t.Errorf("the script the command runs was not shown to the model")
		}
		for _, c := range []string{e.canary, envCanary, urlCanary, fileCanary, "fake-review-key"} {
			if strings.Contains(bodies, c) {
				t.Errorf("%q reached the model's endpoint", c)
			}
		}
		if strings.Contains(bodies, "read_file") {
			t.Errorf("the credential read was sent to the model (hard denies come first)")
		}
		for _, body := range m.requests() {
			var req map[string]any
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatalf("request body: %v", err)
			}
			if rf, _ := req["response_format"].(map[string]any); rf["type"] != "json_schema" {
				t.Errorf("response_format %v", req["response_format"])
			}
		}
	})
}

// TestModelReviewerFailsClosed: an endpoint that answers garbage is a
// deny with source error (the reviewer failed, not denied); the write
// does not land.
func TestModelReviewerFailsClosed(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		m := newFakeModel(t, func(string) (string, string, string, string) {
			return "allow", "critical", "high", "inconsistent on purpose"
		})
		target := filepath.Join(e.mkdir("out", 0o755), "never.txt")
		pol := modelPolicy(t, e, m, "")
		r := e.sandboxdOpts(runOpts{env: []string{"FAKE_REVIEW_KEY=fake-review-key"}},
			"run", "--policy", pol, "--reviewer", "model", "-c", "echo x > "+target)
		if _, err := os.Lstat(target); err == nil {
			t.Fatalf("an inconsistent verdict allowed the write\n%s", r)
		}
		found := false
		for _, b := range boundaries(r) {
			if b["path"] == target {
				found = b["decision"] == "deny" && b["source"] == "error" && strings.Contains(fmt.Sprint(b["rationale"]), "failed")
			}
		}
		if !found {
			t.Errorf("want a deny with source error: %v\n%s", boundaries(r), r)
		}
		if n := len(m.requests()); n < 1 || n > 8 {
			t.Errorf("%d requests", n)
		}
	})
}
