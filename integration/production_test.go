package integration

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
)

// TestProductionTargetCritical: with a model that allows everything, a
// connection to a host whose label is a production marker and a write
// below ~/.kube/prod (the caller's cluster configuration, readable by
// allow_secrets) are critical before the model is asked: with nobody at
// a terminal they are denied, the model's server never hears of them,
// the origin gets nothing, the file is unchanged, and the report and
// stderr say which name matched which marker. The same requests to
// "dev" names go to the model, which allows them: the test would see a
// production target let through. The denials of one attempt are
// reviewed together (broker.DecideEach), so this also proves none is
// sent ahead to the model.
func TestProductionTargetCritical(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		m := newFakeModel(t, func(string) (string, string, string, string) {
			return "allow", "low", "high", "the task needs it"
		})
		o := egNewOrigin(t, "127.0.0.1:0", false, nil)
		dns := egNewDNS(t, func(name string, n int) ([]netip.Addr, bool) { return egAddrs("127.0.0.1"), true })
		prodHost, devHost := "prod-api.sbx.test", "dev-api.sbx.test"
		prodFile := filepath.Join(e.home, ".kube", "prod", "config")
		devFile := filepath.Join(e.home, ".kube", "dev", "config")
		e.writeFile(prodFile, "server: prod\n", 0o644)
		e.writeFile(devFile, "server: dev\n", 0o644)
		unchanged := fileUnchanged(t, prodFile)
		pol := modelPolicy(t, e, m, fmt.Sprintf("[filesystem]\nallow_secrets = [\"~/.kube\"]\n[network]\nresolver = %q\n[boundaries]\nask = [\"net connect 127.0.0.1:%s\"]",
			dns.addr, o.port))
		script := fmt.Sprintf(`echo PROD $(curl -s -m 10 -o /dev/null -w '%%{http_code}' http://%[1]s:%[3]s/prod)
echo DEV $(curl -s -m 10 -o /dev/null -w '%%{http_code}' http://%[2]s:%[3]s/dev)
echo changed > "$HOME/.kube/prod/config"; echo changed > "$HOME/.kube/dev/config"; echo END
`, prodHost, devHost, o.port)
		r := e.sandboxdOpts(runOpts{env: []string{"FAKE_REVIEW_KEY=fake-review-key"}}, "run", "--policy", pol, "--reviewer", "model", "-c", script)
		netRan(t, r)
		unchanged()
		// The dev file's write is allowed by the model; no retry runs, as
		// the production denials stand.
		if b := reportBoundary(r, "path", devFile); b == nil || b["decision"] != "allow" || b["source"] != "reviewer" {
			t.Errorf("the dev file's write was not allowed by the model (the test proves nothing): %v\n%s", b, r)
		}
		if !strings.Contains(r.stdout, "DEV 200") || !o.sawPath("/dev") {
			t.Errorf("the dev host, which the model allowed, was not reached (the test proves nothing)\n%s", r)
		}
		if o.sawPath("/prod") || strings.Contains(r.stdout, "PROD 200") {
			t.Errorf("the production host was reached: %s\n%s", o.summary(), r)
		}
		if dns.askedAny(prodHost) {
			t.Errorf("the production host was looked up: it is refused before: %v", dns.queries())
		}
		targets := modelTargets(t, m)
		for _, tgt := range targets {
			if strings.Contains(tgt, "prod") {
				t.Errorf("the model was asked about a production target %q (all: %q)", tgt, targets)
			}
		}
		if !strings.Contains(strings.Join(targets, " "), devHost) || !strings.Contains(strings.Join(targets, " "), devFile) {
			t.Errorf("the model was not asked about the dev targets (the test proves nothing): %q", targets)
		}
		for _, want := range []struct{ key, target, why string }{
			{"destination", prodHost + ":" + o.port, "the name prod in the host " + prodHost + " matches the production marker prod"},
			{"path", prodFile, "the name prod in " + prodFile + ", under kubectl's configuration " + filepath.Join(e.home, ".kube") + ", matches the production marker prod"},
		} {
			b := reportBoundary(r, want.key, want.target)
			if b == nil {
				t.Errorf("no boundary for %s in the report\n%s", want.target, r)
				continue
			}
			why, _ := b["rationale"].(string)
			if b["decision"] != "deny" || b["source"] != "no-reviewer" || b["production"] != "prod" || !strings.HasPrefix(why, want.why) {
				t.Errorf("boundary for %s: %v", want.target, b)
			}
			if !strings.Contains(r.stderr, want.why) {
				t.Errorf("stderr does not say why %s was denied\n%s", want.target, r)
			}
		}
	})
}

// reportBoundary is the report's boundary whose key (path or
// destination) is target, or nil.
func reportBoundary(r result, key, target string) map[string]any {
	bs, _ := r.report["boundaries"].([]any)
	for _, b := range bs {
		if m, ok := b.(map[string]any); ok && m[key] == target {
			return m
		}
	}
	return nil
}

// modelTargets are the boundaries (path or destination) the fake model
// was asked about, read from the evidence each request shows it.
func modelTargets(t *testing.T, m *fakeModel) []string {
	t.Helper()
	var out []string
	for _, body := range m.requests() {
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatalf("a request the model could not read: %v", err)
		}
		for _, msg := range req.Messages {
			_, ev, ok := strings.Cut(msg.Content, "\n{")
			if !ok {
				continue
			}
			var shown struct {
				Request struct {
					Path        string `json:"path"`
					Destination string `json:"destination"`
				} `json:"request"`
			}
			dec := json.NewDecoder(strings.NewReader("{" + ev))
			if err := dec.Decode(&shown); err == nil {
				out = append(out, shown.Request.Path+shown.Request.Destination)
			}
		}
	}
	return out
}
