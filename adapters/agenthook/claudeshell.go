package agenthook

import (
	"os"
	"path/filepath"
	"strings"
)

// cwdTail is how Claude Code ends every script it gives its shell
// prefix: the directory the shell ended in, written to a file it reads
// back for the next command, only when the command succeeded.
const cwdTail = " && pwd -P >| "

// SplitClaudeScript splits a script Claude Code gives its shell prefix
// into the script without its last step and the file that step writes
// the shell's directory to. ok is false when the script does not end
// that way: then it runs whole and its directory is not carried over.
func SplitClaudeScript(script string) (head, cwdFile string, ok bool) {
	i := strings.LastIndex(script, cwdTail)
	if i < 0 {
		return "", "", false
	}
	head, file := script[:i], strings.TrimRight(script[i+len(cwdTail):], " \n")
	if len(file) >= 2 && file[0] == '\'' && file[len(file)-1] == '\'' {
		file = file[1 : len(file)-1]
	}
	if strings.TrimSpace(head) == "" || !cleanAbs(file) || strings.ContainsAny(file, " \t'\"\\$`;&|<>(){}*?[]~") || filepath.Base(file) == "" {
		return "", "", false
	}
	return head, file, true
}

// ClaudeScript is the script the sandbox runs for a split one: the head,
// then the shell's directory written to descriptor 3, the pipe out of
// the sandbox (Claude Code's own file is under a /tmp the sandbox
// makes private).
func ClaudeScript(head string) string { return head + " && pwd -P >&3" }

// ClaudeShellName is the name sandboxd answers to as Claude Code's shell
// prefix. Claude Code runs CLAUDE_CODE_SHELL_PREFIX as one program with
// the script as its one argument (a value with arguments is taken as a
// path with spaces), so the prefix is a link of this name to sandboxd,
// which sandboxd's main reads from its argv[0].
const ClaudeShellName = "sandboxd-claude-code-shell"

// ClaudePrefix is the value of CLAUDE_CODE_SHELL_PREFIX: the link named
// ClaudeShellName in binDir, a directory of the caller's state.
func ClaudePrefix(binDir string) string { return filepath.Join(binDir, ClaudeShellName) }

// ClaudeHookCommand and CodexHookCommand are the PreToolUse hook
// commands the installer writes. Codex runs a hook with bash -c and has
// no setting that blocks when a hook fails: "|| exit 2" blocks when
// sandboxd is missing or crashes.
func ClaudeHookCommand(sandboxd string) string { return ShellQuote(sandboxd) + " hook claude-code" }

func CodexHookCommand(sandboxd string) string { return ShellQuote(sandboxd) + " hook codex || exit 2" }

// ClaudeLinkTarget is the file the prefix link leads to ("" when none),
// and whether that is sandboxd, the binary at sandboxd: the hook blocks
// and status fails unless it is.
func ClaudeLinkTarget(link, sandboxd string) (target string, ok bool) {
	target, err := filepath.EvalSymlinks(link)
	if err != nil {
		return "", false
	}
	a, err1 := os.Stat(target)
	b, err2 := os.Stat(sandboxd)
	return target, err1 == nil && err2 == nil && os.SameFile(a, b)
}
