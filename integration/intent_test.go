package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestIntentScope: a person's intent for a file lets the session's
// command write it without review (the model is not asked), a sibling
// file is still reviewed and denied, `session status` lists the intent,
// and once it is revoked the write is reviewed (and denied) again. A
// scope for a cache is refused, and nothing is issued without a typed
// yes.
func TestIntentScope(t *testing.T) {
	t.Parallel()
	idRE := regexp.MustCompile(`intent (in-[0-9a-f]{12}) allows `)
	forEach(t, func(t *testing.T, e *env) {
		c := newOverrideCase(t, e, "medium", "not part of the task")
		scope := "fs write " + c.target
		approve := func(scope, answer string) (result, *terminal) {
			tm := newTerminalFor(t, e, overridePrompt, func(int, string) string { return answer })
			return e.sandboxdOpts(runOpts{tty: tm.slave}, "approve", "--session", c.session, "--scope", scope, "--for", "1h"), tm
		}
		no, tm := approve(scope, "no")
		if no.code != 1 || !strings.Contains(no.stderr, "not yes") {
			t.Fatalf("an intent without a yes\n%s\n%q", no, tm.text())
		}
		cache, _ := approve("fs write "+filepath.Join(e.home, ".cache", "pip", "x"), "yes")
		if cache.code != 1 || !strings.Contains(cache.stderr, "a cache") {
			t.Fatalf("an intent for a cache\n%s", cache)
		}
		a, tm := approve(scope, "yes")
		m := idRE.FindStringSubmatch(a.stdout)
		if a.code != 0 || m == nil {
			t.Fatalf("approve --scope\n%s\n%q", a, tm.text())
		}
		if text := tm.text(); !strings.Contains(text, "scope:   "+scope) || !strings.Contains(text, "of the one file "+c.target) {
			t.Fatalf("the scope was not shown as approved\n%q", text)
		}
		st := e.sandboxd("session", "status", c.session)
		if st.code != 0 || !strings.Contains(st.stdout, "intent "+m[1]+": "+scope) {
			t.Fatalf("session status does not list the intent\n%s", st)
		}
		asked := len(c.model.requests())
		r := c.run()
		if b, err := os.ReadFile(c.target); err != nil || string(b) != "approved\n" {
			t.Fatalf("the write the intent covers did not land: %q %v\n%s", b, err, r)
		}
		bs := boundaries(r)
		if len(bs) != 1 || bs[0]["decision"] != "allow" || bs[0]["source"] != "intent" {
			t.Fatalf("boundaries %v\n%s", bs, r)
		}
		if n := len(c.model.requests()); n != asked {
			t.Fatalf("the model was asked about a request the intent covers (%d calls, want %d)", n, asked)
		}
		sibling := filepath.Join(filepath.Dir(c.target), "sibling.txt")
		sr := e.sandboxdOpts(runOpts{env: []string{"FAKE_REVIEW_KEY=fake-review-key"}}, "run", "--policy", c.pol, "--reviewer", "model",
			"--session", c.session, "-c", fmt.Sprintf("echo x > %s", sibling))
		if _, err := os.Lstat(sibling); err == nil {
			t.Fatalf("the sibling was written\n%s", sr)
		}
		if bs := boundaries(sr); len(bs) != 1 || bs[0]["source"] != "reviewer" || len(c.model.requests()) == asked {
			t.Fatalf("the sibling was not reviewed: %v\n%s", bs, sr)
		}
		rv := e.sandboxd("approve", "--session", c.session, "--revoke", m[1])
		if rv.code != 0 || !strings.Contains(rv.stdout, "is revoked") {
			t.Fatalf("revoke\n%s", rv)
		}
		os.Remove(c.target)
		c.mustBeDenied(t, c.run())
		// Its issue, its use and its revocation are in the caller's log.
		log := e.sandboxd("audit", "show")
		for _, want := range []string{"issued by a person at their terminal", "allow by intent", "revoked (sandboxd approve --revoke)"} {
			if !strings.Contains(log.stdout, want) {
				t.Fatalf("the audit log does not hold %q\n%s", want, log)
			}
		}
		if n := strings.Count(log.stdout, "intent "+m[1]); n < 3 {
			t.Fatalf("the audit log names the intent %d times\n%s", n, log)
		}
	})
}
