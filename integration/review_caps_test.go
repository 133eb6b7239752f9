package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelCapsPerSession: the hourly caps are each session's own and the
// user's ceiling counts them all. With one call an hour per session and
// two for the user: session A's first write is reviewed, its second is
// refused by A's hourly cap; session B is still reviewed (A's use is not
// B's); a run without a session (a session of its own) is then refused
// by the ceiling. Each refusal says which cap on stderr and in the
// report, nothing refused reaches the model, and the refused writes do
// not land.
func TestModelCapsPerSession(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		m := newFakeModel(t, func(string) (string, string, string, string) {
			return "allow", "low", "medium", "a file the task writes"
		})
		pol := modelPolicy(t, e, m, "")
		e.writeFile(pol, mustRead(t, pol)+"max_calls_per_hour = 1\nmax_user_calls_per_hour = 2\n", 0o644)
		out := e.mkdir("out", 0o755)
		opts := runOpts{env: []string{"FAKE_REVIEW_KEY=fake-review-key"}}
		for i, step := range []struct {
			session string // "" = no --session
			allowed bool
			why     string // the cap's sentence when refused
		}{
			{"caps-a", true, ""},
			{"caps-a", false, "this session's hourly cap of 1 model call is reached (review.max_calls_per_hour)"},
			{"caps-b", true, ""},
			{"", false, "your hourly ceiling of 2 model calls, every session together, is reached (review.max_user_calls_per_hour)"},
		} {
			target := filepath.Join(out, fmt.Sprintf("step-%d.txt", i))
			args := []string{"run", "--policy", pol, "--reviewer", "model"}
			if step.session != "" {
				args = append(args, "--session", step.session)
			}
			asked := len(m.requests())
			r := e.sandboxdOpts(opts, append(args, "-c", "echo written > "+target)...)
			_, err := os.Stat(target)
			if landed := err == nil; landed != step.allowed {
				t.Fatalf("step %d (%q): the write landed: %v, want %v\n%s", i, step.session, landed, step.allowed, r)
			}
			if step.allowed {
				if len(m.requests()) == asked {
					t.Errorf("step %d: allowed without asking the model\n%s", i, r)
				}
				continue
			}
			if len(m.requests()) != asked {
				t.Errorf("step %d: a capped review reached the model", i)
			}
			if !strings.Contains(r.stderr, step.why) {
				t.Errorf("step %d: stderr does not say which cap (%q)\n%s", i, step.why, r)
			}
			found := false
			for _, b := range boundaries(r) {
				found = found || (b["decision"] == "deny" && b["source"] == "error" && strings.Contains(fmt.Sprint(b["rationale"]), step.why))
			}
			if !found {
				t.Errorf("step %d: no denied boundary in the report says %q: %v", i, step.why, boundaries(r))
			}
		}
	})
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
