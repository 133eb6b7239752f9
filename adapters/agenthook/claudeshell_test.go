package agenthook

import (
	"strings"
	"testing"
)

// A script Claude Code 2.1.332 gave its shell prefix (testdata/).
const realScript = `source /h/.claude/shell-snapshots/snapshot-bash-1796228793028-78f923.sh 2>/dev/null || true && { \builtin shopt -u extglob || \builtin setopt NO_EXTENDED_GLOB NO_BARE_GLOB_QUAL NO_BRACE_CCL NO_MAGIC_EQUAL_SUBST NO_RC_QUOTES NO_EQUALS; } >/dev/null 2>&1 || true && { \builtin unalias -- 'which'; \builtin unset -f -- 'which'; } >/dev/null 2>&1 || true && { \builtin unalias -- 'unsetenv'; \builtin unset -f -- 'unsetenv'; } >/dev/null 2>&1 || true && eval 'echo WRAPPED; pwd; echo hi > x.txt' < /dev/null && pwd -P >| /tmp/claude-3d7e-cwd`

func TestSplitClaudeScript(t *testing.T) {
	head, file, ok := SplitClaudeScript(realScript)
	if !ok || file != "/tmp/claude-3d7e-cwd" || !strings.HasSuffix(head, "eval 'echo WRAPPED; pwd; echo hi > x.txt' < /dev/null") {
		t.Fatalf("got %q, %q, %v", head, file, ok)
	}
	if got := ClaudeScript(head); got != head+" && pwd -P >&3" {
		t.Errorf("ClaudeScript: %q", got)
	}
	for _, s := range []string{
		"", "ls", "pwd -P >| /tmp/x", " && pwd -P >| /tmp/x", "ls && pwd -P >| tmp/x", "ls && pwd -P >| /tmp/x; rm -rf /",
		"ls && pwd -P >| /tmp/$(id)", "ls && pwd -P >| /tmp/a b", "ls && pwd -P >| /tmp/../etc/x", "ls && pwd -P >| '/tmp/a'b'",
	} {
		if h, f, ok := SplitClaudeScript(s); ok {
			t.Errorf("%q split into %q, %q", s, h, f)
		}
	}
	if _, f, ok := SplitClaudeScript("ls && pwd -P >| '/tmp/claude x-cwd'"); ok {
		t.Errorf("a quoted name with a space was taken: %q", f)
	}
	if _, f, ok := SplitClaudeScript("ls && pwd -P >| '/tmp/claude-1-cwd'"); !ok || f != "/tmp/claude-1-cwd" {
		t.Errorf("a quoted name: %q, %v", f, ok)
	}
}

func FuzzSplitClaudeScript(f *testing.F) {
	f.Add(realScript)
	f.Add("x && pwd -P >| /a")
	f.Fuzz(func(t *testing.T, s string) {
		head, file, ok := SplitClaudeScript(s)
		if !ok {
			return
		}
		if !strings.HasPrefix(s, head+cwdTail) || !cleanAbs(file) || strings.ContainsAny(file, " '$`;&|") {
			t.Fatalf("%q split into %q, %q", s, head, file)
		}
	})
}
