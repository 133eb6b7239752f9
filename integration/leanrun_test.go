package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// leanRunLayout is make build's layout in a directory of the test's
// own: the front, sandboxd-run and the helper of this suite's build, and
// as sandboxd-core the file core ("": none). It returns the front's
// path.
func leanRunLayout(t *testing.T, core string) string {
	t.Helper()
	return layoutOf(t, map[string]string{frontBinary: "sandboxd", runBinary: "sandboxd-run", helperBinary: "sandboxd-helper", core: "sandboxd-core"})
}

// layoutOf links each file (a key; "" is skipped) into a directory of
// the test's own under its name, and returns the path of sandboxd there.
func layoutOf(t *testing.T, files map[string]string) string {
	t.Helper()
	dir, err := os.MkdirTemp(baseDir, "leanrun-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	// Linked, not copied: nothing is open for writing (see copyExecutable).
	for from, to := range files {
		if from == "" {
			continue
		}
		if err := os.Link(from, filepath.Join(dir, to)); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "sandboxd")
}

// TestLeanRunInitialisesNoModelClient: the process an embedded `sandboxd
// run` executes (the front, then sandboxd-run) initialises none of the
// model's client, Prometheus and what it drags, the MCP SDK, JSON
// schemas, html/template, the daemon's server, its approvals page,
// metrics or the nftables library; the supervisor's own packages are
// initialised (so the trace is the supervisor's).
func TestLeanRunInitialisesNoModelClient(t *testing.T) {
	t.Parallel()
	forbidden := []string{"github.com/openai/openai-go", "github.com/prometheus/", "google.golang.org/protobuf",
		"github.com/modelcontextprotocol/go-sdk", "github.com/google/jsonschema-go", "html/template",
		"github.com/google/nftables", "github.com/sandboxd/sandboxd/approvals",
		"github.com/sandboxd/sandboxd/metrics", "github.com/sandboxd/sandboxd/machine", "github.com/sandboxd/sandboxd/daemon "}
	initLine := regexp.MustCompile(`(?m)^init (\S+) @`)
	forEach(t, func(t *testing.T, e *env) {
		r := e.sandboxdOpts(runOpts{env: []string{"GODEBUG=inittrace=1"}}, "run", "--no-daemon", "--reviewer", "off", "--", "true")
		r.mustSucceed(t)
		var inits []string
		for _, m := range initLine.FindAllStringSubmatch(r.stderr, -1) {
			inits = append(inits, m[1]+" ")
		}
		all := strings.Join(inits, "\n")
		if !strings.Contains(all, "github.com/sandboxd/sandboxd/session ") && !strings.Contains(all, "github.com/sandboxd/sandboxd/persist ") {
			t.Fatalf("no supervisor's package in the trace: the run was not embedded here\n%s", r)
		}
		for _, f := range forbidden {
			for _, p := range inits {
				if strings.HasPrefix(p, f) {
					t.Errorf("an embedded run initialises %s", p)
				}
			}
		}
	})
}

// TestLeanRunModelThroughCore: sandboxd-run asks the model through the
// core beside it: an allow issues the grant and the retry writes the
// file. Without the core, or with a core that answers garbage or
// fails, the reviewer has failed: the write is denied (source error),
// the file is absent, and stderr says so in a sentence of sandboxd's.
func TestLeanRunModelThroughCore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, core string
		allowed    bool
	}{
		{"core", binary, true},
		{"no core", "", false},
		{"garbage", "/bin/echo", false},
		{"crash", "/bin/false", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			front := leanRunLayout(t, tc.core)
			forEach(t, func(t *testing.T, e *env) {
				m := newFakeModel(t, func(string) (string, string, string, string) {
					return "allow", "low", "medium", "a file the task writes"
				})
				target := filepath.Join(e.mkdir("out", 0o755), "through-core.txt")
				pol := modelPolicy(t, e, m, "")
				r := e.sandboxdOpts(runOpts{bin: front, env: []string{"FAKE_REVIEW_KEY=fake-review-key"}},
					"run", "--no-daemon", "--policy", pol, "--reviewer", "model", "--intent", "write the output file", "-c", "echo written > "+target)
				_, err := os.Lstat(target)
				var b map[string]any
				for _, x := range boundaries(r) {
					if x["path"] == target {
						b = x
					}
				}
				if tc.allowed {
					if err != nil || r.code != 0 || b["decision"] != "allow" || b["source"] != "reviewer" || len(m.requests()) == 0 {
						t.Fatalf("the model's allow through the core did not land (%v, boundary %v)\n%s", err, b, r)
					}
					return
				}
				if err == nil {
					t.Fatalf("the write landed with no model to ask\n%s", r)
				}
				if b["decision"] != "deny" || b["source"] != "error" || len(m.requests()) != 0 {
					t.Fatalf("want a deny with source error and no request to the model: boundary %v, %d requests\n%s", b, len(m.requests()), r)
				}
				if !strings.Contains(r.stderr, "sandboxd's core, which holds the model's client, did not answer") {
					t.Fatalf("stderr does not say why\n%s", r)
				}
				if strings.Contains(r.stderr, "fake-review-key") || strings.Contains(fmt.Sprint(r.report), "fake-review-key") {
					t.Fatalf("the key was shown\n%s", r)
				}
			})
		})
	}
}

// TestLeanRunEndpointFromEnvironment: an endpoint from OPENAI_BASE_URL,
// which no policy check saw, is held to the model client's rule alike by
// sandboxd-run and by the core that holds the client: one with
// credentials in it (the caller's own, in the caller's environment)
// reaches the model from both, and one with a query fails the run in
// both, with nothing run and nothing sent. The password is never shown.
func TestLeanRunEndpointFromEnvironment(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, bin string }{{"sandboxd-run", ""}, {"core", binary}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			forEach(t, func(t *testing.T, e *env) {
				m := newFakeModel(t, func(string) (string, string, string, string) {
					return "allow", "low", "medium", "a file the task writes"
				})
				pol := filepath.Join(e.dir, "policies", "env-endpoint-"+randHex(3)+".toml")
				e.writeFile(pol, "[review]\nmodel = \"fake-model\"\napi_key_env = \"FAKE_REVIEW_KEY\"\n", 0o644)
				password := "pw" + randHex(8)
				for _, c := range []struct {
					name, url string
					ok        bool
				}{
					{"credentials", strings.Replace(m.url, "http://", "http://someone:"+password+"@", 1), true},
					{"query", m.url + "?x=1", false},
				} {
					target := filepath.Join(e.mkdir("out", 0o755), c.name+".txt")
					before := len(m.requests())
					r := e.sandboxdOpts(runOpts{bin: tc.bin, env: []string{"FAKE_REVIEW_KEY=fake-review-key", "OPENAI_BASE_URL=" + c.url}},
						"run", "--no-daemon", "--policy", pol, "--reviewer", "model", "--intent", "write the output file", "-c", "echo written > "+target)
					_, err := os.Lstat(target)
					asked := len(m.requests()) - before
					if c.ok && (err != nil || r.code != 0 || asked == 0) {
						t.Fatalf("%s: the model's allow did not land (%v, %d requests)\n%s", c.name, err, asked, r)
					}
					if !c.ok && (err == nil || r.code == 0 || asked != 0) {
						t.Fatalf("%s: the run went on with an endpoint the model's client refuses (%v, %d requests)\n%s", c.name, err, asked, r)
					}
					if strings.Contains(r.stderr, password) || strings.Contains(fmt.Sprint(r.report), password) {
						t.Fatalf("%s: the endpoint's password was shown\n%s", c.name, r)
					}
				}
			})
		})
	}
}

// TestLeanRunHandsOver: sandboxd-run takes a run only with the separate
// helper beside it, else the core takes it (and runs itself as the
// helper); a front of another build is refused by sandboxd-run as by
// the core, and nothing runs.
func TestLeanRunHandsOver(t *testing.T) {
	t.Parallel()
	noHelper := layoutOf(t, map[string]string{frontBinary: "sandboxd", runBinary: "sandboxd-run", binary: "sandboxd-core"})
	other := layoutOf(t, map[string]string{buildFrontOnce(t, "0123456789abcdef0123456789abcdef"): "sandboxd", runBinary: "sandboxd-run",
		helperBinary: "sandboxd-helper", binary: "sandboxd-core"})
	forEach(t, func(t *testing.T, e *env) {
		r := e.sandboxdOpts(runOpts{bin: noHelper}, "run", "--no-daemon", "-v", "--", "sh", "-c", "echo ran")
		r.mustSucceed(t)
		if !strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, `msg="sandbox helper" path=`+filepath.Join(filepath.Dir(noHelper), "sandboxd-core")+" separate=false") {
			t.Fatalf("without the helper the core does not take the run\n%s", r)
		}
		marker := filepath.Join(e.ws, "marker")
		r = e.sandboxdOpts(runOpts{bin: other, noReport: true}, "run", "--no-daemon", "--", "sh", "-c", "echo ran > "+marker)
		if r.code != 125 || !strings.Contains(r.stderr, "are of different builds") {
			t.Fatalf("a front of another build: want 125 and why\n%s", r)
		}
		if _, err := os.Lstat(marker); err == nil {
			t.Fatalf("the command ran under a front of another build")
		}
	})
}
