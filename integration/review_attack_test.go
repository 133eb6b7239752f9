package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func denyAll(string) (string, string, string, string) {
	return "deny", "low", "unknown", "not needed"
}

// Found in review: a workspace symlink (as a cloned repo may carry) to a
// credential store, run by the command, must not make sandboxd's script
// inspection read the target as the caller and send it to the model.
func TestAttackReviewSymlinkedScriptLeaksSecret(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		m := newFakeModel(t, denyAll)
		pol := modelPolicy(t, e, m, "")
		if err := os.Symlink(filepath.Join(e.home, ".ssh", "id_rsa"), filepath.Join(e.ws, "setup.sh")); err != nil {
			t.Fatal(err)
		}
		os.Lchown(filepath.Join(e.ws, "setup.sh"), e.id.uid, e.id.gid)
		target := filepath.Join(e.mkdir("out", 0o755), "x.txt")
		r := e.sandboxdOpts(runOpts{env: []string{"FAKE_REVIEW_KEY=fake-review-key"}},
			"run", "--policy", pol, "--reviewer", "model", "-c", "bash ./setup.sh; echo x > "+target)
		if len(m.requests()) == 0 {
			t.Fatalf("the model was never asked\n%s", r)
		}
		if strings.Contains(strings.Join(m.requests(), "\n"), e.canary) {
			t.Fatalf("the content of ~/.ssh/id_rsa (canary %s) reached the model's endpoint via a workspace symlink", e.canary)
		}
	})
}

// Found in review: a secret given as a glob in filesystem.secrets is
// never read for evidence either (the reviewer's check once compared
// prefixes only).
func TestAttackReviewGlobSecretInspected(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		m := newFakeModel(t, denyAll)
		vault := filepath.Join(e.home, "vault")
		canary := "GLOBCANARY" + randHex(6)
		e.writeFile(filepath.Join(vault, "deploy.key"), "echo "+canary+"\n", 0o600)
		pol := modelPolicy(t, e, m, fmt.Sprintf("[filesystem]\nsecrets = [%q]\n", vault+"/*.key"))
		target := filepath.Join(e.mkdir("out", 0o755), "x.txt")
		r := e.sandboxdOpts(runOpts{env: []string{"FAKE_REVIEW_KEY=fake-review-key"}},
			"run", "--policy", pol, "--reviewer", "model", "-c", "cat "+vault+"/deploy.key; bash "+vault+"/deploy.key; echo x > "+target)
		if strings.Contains(r.stdout, canary) {
			t.Fatalf("the glob secret was readable inside the sandbox (test premise)\n%s", r)
		}
		if len(m.requests()) == 0 {
			t.Fatalf("the model was never asked\n%s", r)
		}
		if strings.Contains(strings.Join(m.requests(), "\n"), canary) {
			t.Fatalf("a file the policy's secret glob denies reached the model's endpoint")
		}
	})
}

// Found in review: a workspace .sandboxd.toml that sets the caps to 0
// (once "no cap") must not lift the user's max_calls_per_session = 1.
func TestAttackWorkspaceLiftsModelCap(t *testing.T) { workspaceCap(t, false) }

// The control: without the workspace file the cap holds.
func TestAttackWorkspaceLiftsModelCapControl(t *testing.T) { workspaceCap(t, true) }

func workspaceCap(t *testing.T, control bool) {
	forEach(t, func(t *testing.T, e *env) {
		m := newFakeModel(t, denyAll)
		pol := modelPolicy(t, e, m, "")
		b, _ := os.ReadFile(pol)
		os.WriteFile(pol, append(b, []byte("max_calls_per_session = 1\n")...), 0o644)
		if !control {
			e.writeFile(filepath.Join(e.ws, ".sandboxd.toml"), "[review]\nmax_calls_per_session = 0\n", 0o644)
		}
		sess := "cap-" + randHex(4)
		for i := range 3 {
			target := filepath.Join(e.mkdir("out", 0o755), fmt.Sprintf("x%d.txt", i))
			r := e.sandboxdOpts(runOpts{env: []string{"FAKE_REVIEW_KEY=fake-review-key"}},
				"run", "--policy", pol, "--reviewer", "model", "--session", sess, "-c", "echo x > "+target)
			if i == 0 && r.code == 125 {
				t.Logf("refused: %s", r)
				return
			}
		}
		if n := len(m.requests()); n > 1 {
			t.Fatalf("%d model calls in one session under the user's max_calls_per_session = 1 (workspace set it to 0)", n)
		}
	})
}

// An API key and base URL in the environment with no model named send
// nothing, in auto and model modes.
func TestAttackKeyAloneSendsNothing(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		m := newFakeModel(t, denyAll)
		target := filepath.Join(e.mkdir("out", 0o755), "x.txt")
		for _, mode := range []string{"auto", "model"} {
			e.sandboxdOpts(runOpts{env: []string{"OPENAI_API_KEY=fake-review-key", "OPENAI_BASE_URL=" + m.url}},
				"run", "--reviewer", mode, "-c", "echo x > "+target)
		}
		if n := len(m.requests()); n != 0 {
			t.Fatalf("%d requests reached the endpoint with no model configured", n)
		}
	})
}
