package session

import (
	"net/url"
	"slices"
	"testing"

	"github.com/sandboxd/sandboxd/policy"
)

// TestMachineModelWins: with the machine's reviewer, the caller's own
// model, endpoint, key variable and their environment fallbacks are not
// used, so a caller cannot send the machine's key elsewhere; the key
// is redacted from what the reviewer sends; and the caller's proxy is
// followed only to an https endpoint.
func TestMachineModelWins(t *testing.T) {
	env := []string{"HOME=/var/lib/nobody", "SANDBOXD_MODEL=mine", "OPENAI_BASE_URL=http://127.0.0.1:1/v1",
		"MY_KEY=sk-callers-own-key", "HTTP_PROXY=http://127.0.0.1:2", "HTTPS_PROXY=http://127.0.0.1:2"}
	c, err := NewCaller(1000, 1000, env, "/", 0o22)
	if err != nil {
		t.Fatal(err)
	}
	rev := policy.Default().Review
	rev.Model, rev.BaseURL, rev.APIKeyEnv = "mine", "http://127.0.0.1:1/v1", "MY_KEY"
	for _, base := range []string{"http://127.0.0.1:3/v1", "https://models.example/v1"} {
		mm := MachineModel{Model: "machine-model", BaseURL: base, Key: "sk-machine-key-123"}
		cfg, ok := modelConfig(c, rev, policy.DefaultEnvDeny(), nil, &mm)
		if !ok || cfg.Model != mm.Model || cfg.BaseURL != base || cfg.Key != mm.Key {
			t.Fatalf("%s: %v %q %q", base, ok, cfg.Model, cfg.BaseURL)
		}
		if !slices.Contains(cfg.Secrets, mm.Key) {
			t.Errorf("%s: the machine's key is not redacted", base)
		}
		u, _ := url.Parse(base)
		var proxy *url.URL
		if cfg.Proxy != nil {
			proxy, _ = cfg.Proxy(u)
		}
		if (proxy != nil) != (u.Scheme == "https") {
			t.Errorf("%s: proxy %v", base, proxy)
		}
	}
	// Turned off by the caller, it is off.
	rev.Enabled = false
	if _, ok := modelConfig(c, rev, nil, nil, &MachineModel{Model: "m", BaseURL: "https://x/v1"}); ok {
		t.Error("the caller's enabled = false did not turn the machine's reviewer off")
	}
}
