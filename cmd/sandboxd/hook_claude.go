package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/adapters/agenthook"
)

// claudeShell is Claude Code's shell prefix: Claude Code, having matched
// its own rules against the command as written, hands the whole script
// it would run to this. Every script runs under sandboxd run, in the
// project directory, with the session and the request the hook left,
// except a hook command of the person's own settings, which the prefix
// also wraps and which must run as it would without sandboxd (sandboxd's
// own hook among them). The directory the script ends in is carried out
// of the sandbox through a pipe and written where Claude Code reads it,
// so that a cd carries over to the next command.
func claudeShell(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sandboxd: %s; the command was not run\n", esc(err.Error()))
		return exitSandboxd
	}
	if len(args) != 1 {
		return fail(fmt.Errorf("Claude Code's shell prefix takes one script, not %d arguments", len(args)))
	}
	script := args[0]
	self, err := os.Executable()
	if err != nil {
		return fail(fmt.Errorf("cannot find sandboxd's own binary: %w", err))
	}
	if personsHook(script, getenv) {
		err := syscall.Exec("/bin/sh", []string{"sh", "-c", script}, os.Environ())
		return fail(fmt.Errorf("cannot run the hook: %w", err))
	}
	session := getenv("CLAUDE_CODE_SESSION_ID")
	if session == "" {
		return fail(errors.New("Claude Code did not say which session the command is for (CLAUDE_CODE_SESSION_ID)"))
	}
	caller, err := callerOf(getenv)
	if err != nil {
		return fail(err)
	}
	dir := caller.Layout().AgentSession(agenthook.ClaudeCode, session)
	project, err := agenthook.SessionWorkspace(dir)
	if err != nil {
		return fail(fmt.Errorf("%w, so Claude Code's wiring is incomplete: run sandboxd hook install claude-code", err))
	}
	run := agenthook.Run{Sandboxd: self, Agent: agenthook.ClaudeCode, Session: session, Workspace: project, IntentFile: agenthook.IntentFile(dir)}
	head, cwdFile, split := agenthook.SplitClaudeScript(script)
	if !split {
		// Not the form sandboxd knows: run it whole, in the sandbox. The
		// directory it ends in does not carry over.
		return runWithPipes(ctx, run.Args(script), getenv, stdin, stdout, stderr, sigs, nil)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fail(fmt.Errorf("cannot make a pipe: %w", err))
	}
	last := make(chan string, 1)
	go func() { last <- lastLine(r); r.Close() }()
	code := runWithPipes(ctx, run.Args(agenthook.ClaudeScript(head)), getenv, stdin, stdout, stderr, sigs, []*os.File{w})
	w.Close()
	if d := <-last; code == 0 && d != "" {
		writeClaudeCwd(cwdFile, d)
	}
	return code
}

// lastLine is the last line the command wrote to the pipe, read to its
// end with a bound: a clean absolute path, or "".
func lastLine(r io.Reader) string {
	s := bufio.NewScanner(io.LimitReader(r, 1<<20))
	s.Buffer(make([]byte, 0, 4096), 8192)
	last := ""
	for s.Scan() {
		last = s.Text()
	}
	io.Copy(io.Discard, r)
	if !filepath.IsAbs(last) || filepath.Clean(last) != last {
		return ""
	}
	return last
}

// writeClaudeCwd writes dir where Claude Code reads the shell's last
// directory, as its own script would have: a directory that is not
// there (or not one) is left out, and Claude Code keeps its own.
func writeClaudeCwd(file, dir string) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return
	}
	f.WriteString(dir + "\n")
	f.Close()
}

// personsHook: the script is, exactly, a hook command of the person's
// own Claude Code settings (the user's and the managed ones, which no
// agent writes), which Claude Code also runs through the prefix. Project
// settings live in the workspace, where an agent could add a hook: those
// run in the sandbox like any script.
func personsHook(script string, getenv func(string) string) bool {
	dir := getenv("CLAUDE_CONFIG_DIR")
	if dir == "" {
		dir = filepath.Join(getenv("HOME"), ".claude")
	}
	for _, f := range []string{filepath.Join(dir, "settings.json"), "/etc/claude-code/managed-settings.json"} {
		if slices.Contains(hookCommands(f), script) {
			return true
		}
	}
	return false
}

// hookCommands are the command hooks a Claude Code settings file names.
func hookCommands(file string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var s struct {
		Hooks map[string][]struct {
			Hooks []struct {
				Type    string `json:"type"`
				Command string `json:"command"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	var cmds []string
	for _, groups := range s.Hooks {
		for _, g := range groups {
			for _, h := range g.Hooks {
				if h.Type == "command" && strings.TrimSpace(h.Command) != "" {
					cmds = append(cmds, h.Command)
				}
			}
		}
	}
	return cmds
}
