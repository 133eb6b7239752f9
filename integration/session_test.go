package integration

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSessionReset: three denials lock a session; the lockdown message
// names the way out; a command inside a sandbox cannot lift it, not even
// with a terminal of its own and a "y"; the person at a terminal can, and
// the next decision is a real one again.
func TestSessionReset(t *testing.T) {
	// Serial: the person's answer comes a fixed time after the question.
	forEach(t, func(t *testing.T, e *env) {
		sess := "reset-" + randHex(4)
		r := e.sandboxd("run", "--session", sess, "-c", "echo x > /etc/sbx-a; echo x > /etc/sbx-b; echo x > /etc/sbx-c; echo x > /etc/sbx-d")
		last := boundaries(r)
		if len(last) == 0 || last[len(last)-1]["source"] != "circuit-breaker" ||
			!strings.Contains(last[len(last)-1]["rationale"].(string), "sandboxd session reset") {
			t.Fatalf("not locked down, or the lockdown does not say how to lift it\n%s", r)
		}
		status := func() int { return e.sandboxdOpts(runOpts{noReport: true}, "session", "status", sess).code }
		if status() != 1 {
			t.Fatal("session status does not say locked")
		}
		// From inside: SANDBOXD unset, a pty from script(1), "y" typed.
		inside := e.sh("printf 'y\\n' | env -u SANDBOXD script -qec '" + binary + " session reset " + sess + "' /dev/null; echo rc=$?")
		if status() != 1 {
			t.Fatalf("a sandboxed command lifted its own lockdown\n%s", inside)
		}
		// From the person's terminal.
		m, s := openPTY(t, e)
		defer m.Close()
		defer s.Close()
		var mu sync.Mutex
		var seen bytes.Buffer
		go func() {
			buf := make([]byte, 1024)
			for {
				n, err := m.Read(buf)
				mu.Lock()
				seen.Write(buf[:n])
				asked := strings.Contains(seen.String(), "Lift the lockdown?")
				mu.Unlock()
				if asked {
					time.Sleep(50 * time.Millisecond)
					m.Write([]byte("y\n"))
					return
				}
				if err != nil {
					return
				}
			}
		}()
		out := e.sandboxdOpts(runOpts{noReport: true, tty: s}, "session", "reset", sess)
		if out.code != 0 || !strings.Contains(out.stdout, "lockdown lifted") {
			mu.Lock()
			t.Fatalf("reset at the terminal failed\n%s\nterminal: %q", out, seen.String())
		}
		if status() != 0 {
			t.Fatal("still locked after the person lifted it")
		}
		r = e.sandboxd("run", "--session", sess, "-c", "echo x > /etc/sbx-e")
		if bs := boundaries(r); len(bs) != 1 || bs[0]["source"] != "no-reviewer" {
			t.Fatalf("after the reset: %v\n%s", bs, r)
		}
	})
}
