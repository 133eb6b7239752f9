package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// promptMarker ends every question the human reviewer asks.
const promptMarker = "Allow exactly this, once? [y/N]"

// terminal is a pty the test plays the person at.
type terminal struct {
	master, slave *os.File
	mu            sync.Mutex
	transcript    bytes.Buffer
	prompts       int
	done          chan struct{}
}

// newTerminal opens a pty whose slave the env's identity may use, and
// answers the n-th prompt (from 0) with answer(n, prompt) — called with
// the text of that prompt — before it writes the reply.
func newTerminal(t *testing.T, e *env, answer func(n int, prompt string) string) *terminal {
	t.Helper()
	return newTerminalFor(t, e, promptMarker, answer)
}

// newTerminalFor is newTerminal for questions that end with marker.
func newTerminalFor(t *testing.T, e *env, promptMarker string, answer func(n int, prompt string) string) *terminal {
	t.Helper()
	m, s := openPTY(t, e)
	tm := &terminal{master: m, slave: s, done: make(chan struct{})}
	t.Cleanup(func() { m.Close(); s.Close(); <-tm.done })
	go func() {
		defer close(tm.done)
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			if n > 0 {
				tm.mu.Lock()
				tm.transcript.Write(buf[:n])
				text := tm.transcript.String()
				asked := strings.Count(text, promptMarker)
				var reply string
				for tm.prompts < asked {
					i := tm.prompts
					tm.prompts++
					parts := strings.Split(text, promptMarker)
					reply = answer(i, parts[i])
				}
				tm.mu.Unlock()
				if reply != "" {
					m.Write([]byte(reply + "\n"))
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return tm
}

// openPTY opens a pty whose slave the env's identity may use.
func openPTY(t *testing.T, e *env) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0)
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("/dev/pts/%d", n)
	if os.Geteuid() == 0 {
		os.Chown(name, e.id.uid, e.id.gid)
	}
	s, err := os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

func (tm *terminal) text() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.transcript.String()
}

// boundaries returns the report's boundaries as maps.
func boundaries(r result) []map[string]any {
	var out []map[string]any
	for _, b := range r.report["boundaries"].([]any) {
		out = append(out, b.(map[string]any))
	}
	return out
}

// TestHumanGrantRetry: a write outside the workspace that the person
// allows happens on the retry, and only it: the retried run is still
// sandboxed (the secret stays unreadable), and a second boundary in it —
// creating a sibling — is reviewed on its own and, refused, not made.
func TestHumanGrantRetry(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		outDir := e.mkdir("out", 0o755)
		target := filepath.Join(outDir, "granted.txt")
		sibling := filepath.Join(outDir, "sibling.txt")
		var asked []string
		tm := newTerminal(t, e, func(n int, prompt string) string {
			asked = append(asked, prompt)
			if n == 0 && strings.Contains(prompt, "make_reg "+target) {
				return "y"
			}
			return "n"
		})
		script := fmt.Sprintf("if echo granted > %s; then cat ~/.ssh/id_rsa; echo x > %s; echo RETRIED; fi", target, sibling)
		r := e.sandboxdOpts(runOpts{tty: tm.slave}, "run", "--reviewer", "human", "-c", script)
		e.noCanary(t, r)
		if b, err := os.ReadFile(target); err != nil || string(b) != "granted\n" {
			t.Fatalf("granted write: %q %v\n%s\n%s", b, err, r, tm.text())
		}
		if _, err := os.Lstat(sibling); err == nil {
			t.Fatalf("the retry created a sibling it was not granted\n%s", r)
		}
		if !strings.Contains(r.stdout, "RETRIED") || r.report["attempts"] != float64(2) {
			t.Fatalf("no retry\n%s", r)
		}
		if !strings.Contains(r.stderr, "retrying the same command with exactly: make_reg "+target) {
			t.Fatalf("the retried command was not told what it was granted\n%s", r)
		}
		var first, second bool
		for _, b := range boundaries(r) {
			switch {
			case b["attempt"] == float64(1) && b["path"] == target:
				first = b["operation"] == "make_reg" && b["decision"] == "allow" && b["source"] == "human" && b["grant"] == "consumed"
			case b["attempt"] == float64(2) && b["path"] == sibling:
				second = b["operation"] == "make_reg" && b["decision"] == "deny" && b["source"] == "human"
			}
		}
		if !first || !second {
			t.Fatalf("boundaries %v", boundaries(r))
		}
		if len(asked) != 2 {
			t.Fatalf("asked %d times, want 2 (the grant, then the sibling)", len(asked))
		}
	})
}

// TestHumanNoTerminal: with nobody to ask, the human reviewer denies.
func TestHumanNoTerminal(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		target := filepath.Join(e.mkdir("out", 0o755), "x.txt")
		r := e.sandboxd("run", "--reviewer", "human", "-c", "echo x > "+target)
		if _, err := os.Lstat(target); err == nil {
			t.Fatalf("written without a terminal\n%s", r)
		}
		// Nobody answered, so the deny is not "decided by: human".
		bs := boundaries(r)
		if len(bs) != 1 || bs[0]["decision"] != "deny" || bs[0]["source"] != "no-reviewer" || !strings.Contains(bs[0]["rationale"].(string), "no terminal") {
			t.Fatalf("boundaries %v\n%s", bs, r)
		}
	})
}

// TestHumanPromptCannotBeFaked: the command writes cursor movement, a
// screen clear, a title and a fake prompt to the same terminal before and
// after its boundary; the real prompt is intact and none of the command's
// control sequences reach the terminal.
func TestHumanPromptCannotBeFaked(t *testing.T) {
	// Serial: it reads the terminal's transcript a fixed time after the run.
	forEach(t, func(t *testing.T, e *env) {
		target := filepath.Join(e.mkdir("out", 0o755), "x.txt")
		tm := newTerminal(t, e, func(int, string) string { return "n" })
		script := `printf '\033[2J\033[H\033]0;pwned\007\033[5A\033[2K allow: nothing dangerous\n'; echo x > ` + target +
			`; printf '\033[1A\033[2K\033[1A\033[2Ksandboxd: allowed\n'`
		r := e.sandboxdOpts(runOpts{tty: tm.slave, ttyStdout: true}, "run", "--reviewer", "human", "-c", script)
		time.Sleep(50 * time.Millisecond)
		text := tm.text()
		if !strings.Contains(text, promptMarker) || !strings.Contains(text, "allow:   make_reg "+target) {
			t.Fatalf("the real prompt is missing\n%q\n%s", text, r)
		}
		for _, bad := range []string{"\x1b[2J", "\x1b[H", "\x1b]0;", "\x1b[5A", "\x1b[1A", "\x1b[2K"} {
			if strings.Contains(text, bad) {
				t.Fatalf("the command's %q reached the terminal\n%q", bad, text)
			}
		}
		if _, err := os.Lstat(target); err == nil {
			t.Fatalf("denied write happened\n%s", r)
		}
	})
}

// TestHumanSwapBetweenReviewAndRetry: the granted file is replaced by a
// symlink to another file while the person is being asked; the grant no
// longer fits, nothing is retried, and neither file is written.
func TestHumanSwapBetweenReviewAndRetry(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		outDir := e.mkdir("out", 0o755)
		target := filepath.Join(outDir, "t.txt")
		e.writeFile(target, "original\n", 0o644)
		other := e.outside("other.txt", "other\n")
		checkOther := fileUnchanged(t, other)
		tm := newTerminal(t, e, func(n int, prompt string) string {
			os.Remove(target)
			os.Symlink(other, target)
			return "y"
		})
		r := e.sandboxdOpts(runOpts{tty: tm.slave}, "run", "--reviewer", "human", "-c", "echo changed >> "+target)
		checkOther()
		if r.report["attempts"] != float64(1) {
			t.Fatalf("retried after the object changed\n%s", r)
		}
		rejected := false
		for _, b := range boundaries(r) {
			if b["grant"] == "rejected" {
				rejected = true
			}
		}
		if !rejected {
			t.Fatalf("no rejected grant: %v\n%s\n%q", boundaries(r), r, tm.text())
		}
	})
}

// TestPolicyAllowRetries: a policy allow rule grants without a person:
// the write happens on the retry, exactly once, and a write the rule does
// not cover stays denied.
func TestPolicyAllowRetries(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		outDir := e.mkdir("out", 0o755)
		target := filepath.Join(outDir, "ok.txt")
		pol := filepath.Join(e.mkdir("policy", 0o755), "p.toml")
		e.writeFile(pol, "[boundaries]\nallow = [\"fs make_reg "+target+"\"]\n", 0o644)
		r := e.sandboxd("run", "--policy", pol, "-c", "echo one >> "+target+" && echo two > "+filepath.Join(outDir, "not.txt"))
		if b, err := os.ReadFile(target); err != nil || string(b) != "one\n" {
			t.Fatalf("allowed write: %q %v\n%s", b, err, r)
		}
		if _, err := os.Lstat(filepath.Join(outDir, "not.txt")); err == nil {
			t.Fatalf("a write the rule does not cover happened\n%s", r)
		}
		var allowed, denied bool
		for _, b := range boundaries(r) {
			if b["path"] == target && b["source"] == "policy" && b["grant"] == "consumed" && b["attempt"] == float64(1) {
				allowed = true
			}
			if b["attempt"] == float64(2) && b["decision"] == "deny" && b["source"] == "no-reviewer" {
				denied = true
			}
		}
		if !allowed || !denied || r.report["attempts"] != float64(2) {
			t.Fatalf("boundaries %v attempts %v\n%s", boundaries(r), r.report["attempts"], r)
		}
	})
}
