package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSuggestedRuleAllows closes the loop: a person refuses a write at
// the terminal; once the command is over the terminal (and the report,
// and `sandboxd suggest`) show the one rule that would allow it, never
// the command's stderr; that rule, as the policy file, allows the same
// write in the next run, without a person, and nothing next to it.
func TestSuggestedRuleAllows(t *testing.T) {
	// Serial: it waits a fixed time for the terminal to show the suggestion.
	forEach(t, func(t *testing.T, e *env) {
		outDir := e.mkdir("out", 0o755)
		target := filepath.Join(outDir, `my "file" *.txt`)
		sibling := filepath.Join(outDir, `my "file" x.txt`)
		pol := filepath.Join(e.mkdir("policy", 0o755), "policy.toml")
		e.writeFile(pol, "", 0o644)
		script := `echo x > '` + target + `'`
		tm := newTerminal(t, e, func(int, string) string { return "n" })
		r := e.sandboxdOpts(runOpts{tty: tm.slave}, "run", "--policy", pol, "--reviewer", "human", "-c", script)
		if _, err := os.Lstat(target); err == nil {
			t.Fatalf("a refused write happened\n%s", r)
		}
		var rule, toml string
		for _, b := range boundaries(r) {
			if s, ok := b["suggestion"].(map[string]any); ok && b["path"] == target {
				rule, _ = s["rule"].(string)
				toml, _ = s["toml"].(string)
			}
		}
		want := `fs make_reg ` + strings.NewReplacer(" ", `\ `, "*", `\*`).Replace(target)
		if rule != want || !strings.Contains(toml, pol) {
			t.Fatalf("suggested %q (toml %q), want %q\n%s", rule, toml, want, r)
		}
		if strings.Contains(r.stderr, "fs make_reg") || strings.Contains(r.stderr, "[boundaries]") {
			t.Fatalf("a rule reached the command's stderr\n%s", r)
		}
		shown := `"fs make_reg ` + strings.NewReplacer(`"`, `\"`, " ", `\\ `, "*", `\\*`).Replace(target) + `",`
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(tm.text(), shown) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if text := tm.text(); !strings.Contains(text, "rules that would allow what was denied") || !strings.Contains(text, shown) {
			t.Fatalf("the terminal does not show %s\n%q\n%s", shown, text, r)
		}

		// The suggestion, as the policy, allows exactly that write.
		e.writeFile(pol, toml, 0o644)
		r = e.sandboxd("run", "--policy", pol, "-c", script)
		if b, err := os.ReadFile(target); err != nil || string(b) != "x\n" {
			t.Fatalf("the suggested rule did not allow the write: %q %v\n%s", b, err, r)
		}
		r = e.sandboxd("run", "--policy", pol, "-c", `echo y > '`+sibling+`'`)
		if _, err := os.Lstat(sibling); err == nil {
			t.Fatalf("the rule allowed a sibling too\n%s", r)
		}
	})
}
