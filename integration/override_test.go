package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// overridePrompt ends every question `sandboxd approve` and
// `sandboxd break-glass` ask.
const overridePrompt = "(60 s to answer)"

// overrideCase is one session whose model denies every boundary with a
// fixed risk, and a write outside the workspace to deny.
type overrideCase struct {
	e       *env
	model   *fakeModel
	pol     string
	session string
	target  string
	script  string
}

func newOverrideCase(t *testing.T, e *env, risk, why string) *overrideCase {
	t.Helper()
	m := newFakeModel(t, func(string) (string, string, string, string) { return "deny", risk, "low", why })
	c := &overrideCase{e: e, model: m, pol: modelPolicy(t, e, m, ""), session: "ov-" + randHex(4)}
	c.target = filepath.Join(e.mkdir("out", 0o755), "approved.txt")
	c.script = fmt.Sprintf("echo approved > %s && echo WROTE", c.target)
	return c
}

// run runs the case's command in its session with the model reviewing.
func (c *overrideCase) run() result {
	c.e.t.Helper()
	return c.e.sandboxdOpts(runOpts{env: []string{"FAKE_REVIEW_KEY=fake-review-key"}},
		"run", "--policy", c.pol, "--reviewer", "model", "--session", c.session, "-c", c.script)
}

// mustBeDenied checks that the write did not land and that the model
// denied it.
func (c *overrideCase) mustBeDenied(t *testing.T, r result) {
	t.Helper()
	if _, err := os.Lstat(c.target); err == nil {
		t.Fatalf("the write landed\n%s", r)
	}
	bs := boundaries(r)
	if len(bs) != 1 || bs[0]["decision"] != "deny" || bs[0]["source"] != "reviewer" {
		t.Fatalf("boundaries %v\n%s", bs, r)
	}
}

// mustLand checks that the write landed on the retry, allowed by the
// person's override without asking the model.
func (c *overrideCase) mustLand(t *testing.T, r result, asked int) {
	t.Helper()
	if b, err := os.ReadFile(c.target); err != nil || string(b) != "approved\n" || !strings.Contains(r.stdout, "WROTE") {
		t.Fatalf("the approved write did not land: %q %v\n%s", b, err, r)
	}
	bs := boundaries(r)
	if len(bs) != 1 || bs[0]["decision"] != "allow" || bs[0]["source"] != "human" || bs[0]["grant"] != "consumed" {
		t.Fatalf("boundaries %v\n%s", bs, r)
	}
	if n := len(c.model.requests()); n != asked {
		t.Fatalf("the model was asked about the overridden request (%d calls, want %d)", n, asked)
	}
}

// file is the session's override state file.
func (c *overrideCase) file() string {
	sum := sha256.Sum256(fmt.Appendf(nil, "uid %d: %s", c.e.id.uid, c.session))
	return filepath.Join(c.e.home, ".local", "state", "sandboxd", "overrides", hex.EncodeToString(sum[:])+".json")
}

// person runs `sandboxd CMD --session S` on a pty whose person answers
// each question with answer(n, prompt).
func (c *overrideCase) person(t *testing.T, cmd string, answer func(n int, prompt string) string) (result, *terminal) {
	t.Helper()
	tm := newTerminalFor(t, c.e, overridePrompt, answer)
	return c.e.sandboxdOpts(runOpts{tty: tm.slave}, cmd, "--session", c.session), tm
}

// TestOverrideApproveOnce: a model denial becomes exactly one retry: the
// person approves it by number, the same command in the same session
// lands without the model being asked, the next run is denied again, and
// the same denial is never approved twice.
func TestOverrideApproveOnce(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		c := newOverrideCase(t, e, "medium", "not part of the task")
		c.mustBeDenied(t, c.run())
		a, tm := c.person(t, "approve", func(int, string) string { return "1" })
		if a.code != 0 || !strings.Contains(a.stdout, "one retry of make_reg "+c.target) {
			t.Fatalf("approve\n%s\n%q", a, tm.text())
		}
		text := tm.text()
		if !strings.Contains(text, "make_reg "+c.target) || !strings.Contains(text, "risk medium: not part of the task") ||
			!strings.Contains(text, "  1. ") || !strings.Contains(text, "command: "+c.script) {
			t.Fatalf("the list is not what was denied\n%q", text)
		}
		asked := len(c.model.requests())
		c.mustLand(t, c.run(), asked)
		os.Remove(c.target)
		c.mustBeDenied(t, c.run())
		again, tm := c.person(t, "approve", func(int, string) string { return "1" })
		if again.code != 1 || !strings.Contains(again.stderr, "already approved once") {
			t.Fatalf("a second approve of the same request\n%s\n%q", again, tm.text())
		}
		c.mustBeDenied(t, c.run())
	})
}

// TestOverrideRefusedInsideSandbox: `sandboxd approve` run by a
// sandboxed command is refused, with SANDBOXD set and without it (there
// is no controlling terminal inside, though the person's pty is the
// command's stdin), the state is unreadable from inside, and no override
// appears: the denied write stays denied.
func TestOverrideRefusedInsideSandbox(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		c := newOverrideCase(t, e, "medium", "not part of the task")
		c.mustBeDenied(t, c.run())
		unchanged := fileUnchanged(t, c.file())
		if _, err := os.Stat(c.file()); err != nil {
			t.Fatalf("no override state was recorded: %v", err)
		}
		tm := newTerminalFor(t, e, overridePrompt, func(int, string) string { return "1" })
		script := fmt.Sprintf(`%[1]s approve --session %[2]s; echo "rc1=$?"
env -u SANDBOXD %[1]s approve --session %[2]s; echo "rc2=$?"
env -u SANDBOXD %[1]s break-glass --session %[2]s; echo "rc3=$?"
cat %[3]s >/dev/null 2>&1 && echo READABLE`, binary, c.session, c.file())
		r := e.sandboxdOpts(runOpts{tty: tm.slave}, "run", "--reviewer", "off", "-c", script)
		for _, want := range []string{"rc1=125", "rc2=125", "rc3=125"} {
			if !strings.Contains(r.stdout, want) {
				t.Fatalf("approve inside the sandbox was not refused with 125 (%s)\n%s\n%q", want, r, tm.text())
			}
		}
		if !strings.Contains(r.stderr, "never inside a sandbox") || !strings.Contains(r.stderr, "there is none here") {
			t.Fatalf("the refusals do not say why\n%s", r)
		}
		if strings.Contains(r.stdout, "READABLE") || strings.Contains(tm.text(), overridePrompt) {
			t.Fatalf("the sandbox reached the override state or the person's terminal\n%s\n%q", r, tm.text())
		}
		unchanged()
		c.mustBeDenied(t, c.run())
	})
}

// TestOverrideBreakGlass: a denial the model judged critical cannot be
// approved; break-glass shows the rationale, the boundary and the
// request's fingerprint, refuses a wrong phrase, and with the phrase
// typed back allows exactly one retry.
func TestOverrideBreakGlass(t *testing.T) {
	t.Parallel()
	phrase := regexp.MustCompile(`To confirm, type:  (BREAK-GLASS [A-Z0-9]{8})\r*\n`)
	forEach(t, func(t *testing.T, e *env) {
		c := newOverrideCase(t, e, "critical", "writes where nothing should")
		c.mustBeDenied(t, c.run())
		a, tm := c.person(t, "approve", func(int, string) string { return "1" })
		if a.code != 1 || !strings.Contains(a.stderr, "only `sandboxd break-glass --session "+c.session+"`") {
			t.Fatalf("approve of a critical denial\n%s\n%q", a, tm.text())
		}
		typed := func(right bool) func(int, string) string {
			return func(n int, prompt string) string {
				if n == 0 {
					return "1"
				}
				m := phrase.FindStringSubmatch(prompt)
				switch {
				case m == nil:
					return "no phrase shown"
				case right:
					return m[1]
				}
				return strings.ToLower(m[1])
			}
		}
		wrong, tm := c.person(t, "break-glass", typed(false))
		if wrong.code != 1 || !strings.Contains(wrong.stderr, "not the one shown") {
			t.Fatalf("break-glass with a wrong phrase\n%s\n%q", wrong, tm.text())
		}
		ok, tm := c.person(t, "break-glass", typed(true))
		text := tm.text()
		if ok.code != 0 {
			t.Fatalf("break-glass\n%s\n%q", ok, text)
		}
		for _, want := range []string{"risk critical: writes where nothing should", "filesystem make_reg " + c.target} {
			if !strings.Contains(text, want) {
				t.Fatalf("break-glass did not show %q\n%q", want, text)
			}
		}
		if !regexp.MustCompile(`request: +[0-9a-f]{12} \(fingerprint`).MatchString(text) {
			t.Fatalf("no fingerprint shown\n%q", text)
		}
		c.mustLand(t, c.run(), len(c.model.requests()))
	})
}
