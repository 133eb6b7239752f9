package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/adapters/agenthook"
	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
)

const hookUsage = `Usage:
  sandboxd hook install claude-code|codex
  sandboxd hook status [claude-code|codex]
  sandboxd hook uninstall claude-code|codex
  sandboxd hook claude-code|codex          (the agent runs this)
  sandboxd hook claude-code-shell SCRIPT   (Claude Code runs this)

Wire a coding agent so that every shell command it runs goes through
sandboxd run, in the project directory, with the agent's session and
the request the person last typed. install merges sandboxd's entries
into the agent's own configuration and prints what it changed; status
says whether each piece is in place; uninstall removes exactly what
install added.

"sandboxd hook claude-code" and "sandboxd hook codex" are the agents'
PreToolUse hooks: they read the call on stdin and answer on stdout. Any
failure blocks the command (exit 2, the reason on stderr); none lets it
run outside the sandbox.
`

// exitBlock is the status a PreToolUse hook exits with to block the
// tool call, its reason on stderr, in both agents.
const exitBlock = 2

func hookCommand(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	if len(args) == 0 {
		return usageError(stderr, hookUsage, "")
	}
	switch args[0] {
	case agenthook.ClaudeCode, agenthook.Codex:
		if len(args) > 1 {
			return hookBlocked(stderr, fmt.Errorf("the hook takes no arguments, not %s", quoted(args[1:])))
		}
		return hookCall(args[0], getenv, stdin, stdout, stderr)
	case "install", "status", "uninstall":
		return hookInstall(args[0], args[1:], getenv, stdout, stderr)
	case "claude-code-shell":
		return claudeShell(ctx, args[1:], getenv, stdin, stdout, stderr, sigs)
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, hookUsage)
		return 0
	}
	return usageError(stderr, hookUsage, fmt.Sprintf("unknown hook command %q", args[0]))
}

// hookBlocked says why the call is blocked, for the agent to show, and
// exits with the status that blocks it.
func hookBlocked(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "sandboxd: %s; the command was not run\n", esc(err.Error()))
	return exitBlock
}

// hookCall answers one PreToolUse call of agent's: it leaves the
// person's latest request in the caller's state directory, then
// rewrites the command to run under sandboxd run (Codex), or leaves
// the call to the agent's own rules once it is sure the agent's shell
// prefix is sandboxd's (Claude Code). Everything it does is local and
// bounded: no model, no network; a watchdog blocks the call if it ever
// takes longer than hookDeadline.
func hookCall(agent string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	watchdog := time.AfterFunc(hookDeadline, func() {
		fmt.Fprintf(stderr, "sandboxd: the hook took longer than %s; the command was not run\n", hookDeadline)
		os.Exit(exitBlock)
	})
	defer watchdog.Stop()
	p, err := agenthook.Decode(agent, stdin)
	if err != nil {
		return hookBlocked(stderr, err)
	}
	caller, err := runcmd.CallerOf(getenv)
	if err != nil {
		return hookBlocked(stderr, err)
	}
	self, err := sandboxdPath()
	if err != nil {
		return hookBlocked(stderr, fmt.Errorf("cannot find sandboxd's own binary: %w", err))
	}
	if p.ToolName == agenthook.ApplyPatch {
		// Codex runs its hooks in the session's directory: the project.
		if err := agenthook.CheckPatch(p.Command, p.Cwd, caller.Cwd); err != nil {
			return hookBlocked(stderr, err)
		}
		return 0 // no output, status 0: Codex applies the patch as it is
	}
	workspace := caller.Cwd // Codex runs its hooks in the session's directory
	if agent == agenthook.ClaudeCode {
		workspace = getenv("CLAUDE_PROJECT_DIR")
	}
	if !filepath.IsAbs(workspace) {
		return hookBlocked(stderr, errors.New("the agent did not say which project directory the session is in"))
	}
	// What refuses the call comes first, before any reading of the
	// transcript.
	if agent == agenthook.ClaudeCode {
		err = checkClaudePrefix(self, caller.Layout().Bin(), getenv)
	} else if err = agenthook.CheckWorkdir(p.Cwd, workspace); err == nil {
		err = checkCodexRules(p, caller.Cwd, caller.Env, getenv)
	}
	if err != nil {
		return hookBlocked(stderr, err)
	}
	intent := ""
	if p.TranscriptPath != "" {
		// A transcript sandboxd cannot read leaves the reviewer without
		// the request, which it treats as no evidence; the sandbox is
		// the same.
		intent, _ = agenthook.IntentOf(agent, p.TranscriptPath, caller.UID, p.PromptID, promptWait)
	}
	dir := caller.Layout().AgentSession(agent, p.SessionID)
	if err := agenthook.WriteSession(dir, intent, workspace); err != nil {
		return hookBlocked(stderr, err)
	}
	if agent == agenthook.ClaudeCode {
		err = agenthook.WriteNoDecision(stdout)
	} else {
		run := agenthook.Run{Sandboxd: self, Agent: agent, Session: p.SessionID, Workspace: workspace, IntentFile: agenthook.IntentFile(dir)}
		err = agenthook.WriteAllow(stdout, run.Rewrite(p))
	}
	if err != nil {
		return hookBlocked(stderr, fmt.Errorf("cannot answer the agent: %w", err))
	}
	return 0
}

// promptWait bounds the wait for Claude Code to write the prompt a call
// serves to its transcript (agenthook.IntentOf): well inside
// hookDeadline.
const promptWait = 3 * time.Second

// hookDeadline bounds a hook's own work. Claude Code blocks a call
// whose hook times out; Codex runs it bare, so sandboxd's hook must
// never be the one that times out: the installed timeouts are far
// longer.
const hookDeadline = 20 * time.Second

// checkClaudePrefix makes sure Claude Code runs its shell scripts
// through sandboxd: the hook only records the request and leaves the
// decision to Claude Code's own rules, so without the prefix the
// command would run bare.
func checkClaudePrefix(self, binDir string, getenv func(string) string) error {
	want := agenthook.ClaudePrefix(binDir)
	if got := getenv("CLAUDE_CODE_SHELL_PREFIX"); got != want {
		return fmt.Errorf("Claude Code's shell prefix is %q, not sandboxd's (%s), so the command would run outside the sandbox: run sandboxd hook install claude-code", got, want)
	}
	if _, ok := agenthook.ClaudeLinkTarget(want, self); !ok {
		return fmt.Errorf("%s is not a link to this sandboxd (%s): run sandboxd hook install claude-code", want, self)
	}
	return nil
}

// checkCodexRules judges the command as the person wrote it against
// their Codex rules (Codex judges them after this hook, against the
// rewrite, where none would match). A rule that forbids a command, or
// asks about it, blocks: the hook cannot ask through Codex (it runs
// the command when a hook answers "ask").
func checkCodexRules(p agenthook.Payload, dir string, env []string, getenv func(string) string) error {
	_, home, err := agentDirs(getenv)
	if err != nil {
		return err
	}
	rules, _ := filepath.Glob(filepath.Join(home, "rules", "*.rules"))
	if len(rules) == 0 {
		return nil
	}
	codex, err := codexBinary()
	if err != nil {
		return fmt.Errorf("you have Codex rules (%s) but sandboxd cannot judge the command against them: %w", filepath.Join(home, "rules"), err)
	}
	v, err := agenthook.CheckCodexRules(context.Background(), codex, rules, p.Command, dir, env)
	if err != nil {
		return err
	}
	why := ""
	if v.Justification != "" {
		why = " (" + v.Justification + ")"
	}
	switch v.Decision {
	case "forbidden":
		return fmt.Errorf("your Codex rules forbid %q%s", v.Command, why)
	case "prompt":
		return fmt.Errorf("your Codex rules ask before %q%s, and a hook cannot ask for you: run it yourself, or change the rule", v.Command, why)
	}
	return nil
}

// codexBinary is the Codex that runs this hook: the nearest ancestor
// process whose program is named codex (its judgement of its own rules
// is the one that counts, whatever codex is on PATH).
func codexBinary() (string, error) {
	pid := os.Getppid()
	for range 8 {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err == nil && filepath.Base(exe) == "codex" {
			return exe, nil
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			break
		}
		// The parent is the second field after the command's ")".
		i := bytes.LastIndexByte(st, ')')
		f := strings.Fields(string(st[i+1:]))
		if i < 0 || len(f) < 2 {
			break
		}
		if pid, err = strconv.Atoi(f[1]); err != nil || pid <= 1 {
			break
		}
	}
	return "", errors.New("no codex process runs this hook")
}
