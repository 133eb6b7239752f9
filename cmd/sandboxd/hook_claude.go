package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/adapters/agenthook"
	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
)

// claudeShell is Claude Code's shell prefix: Claude Code, having matched
// its own rules against the command as written, hands the whole script
// it would run to this. Every script runs under sandboxd run, in the
// project directory, with the session and the request the hook left,
// except what the prefix also wraps that the person set up themselves (a
// hook command or an MCP server of their own settings), which must run as
// it would without sandboxd (sandboxd's own hook among them). The
// directory the script ends in is carried out of the sandbox through a
// pipe and written where Claude Code reads it, so that a cd carries over
// to the next command.
func claudeShell(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sandboxd: %s; the command was not run\n", esc(err.Error()))
		return exitSandboxd
	}
	if len(args) != 1 {
		return fail(fmt.Errorf("Claude Code's shell prefix takes one script, not %d arguments", len(args)))
	}
	script := args[0]
	self, err := sandboxdPath()
	if err != nil {
		return fail(fmt.Errorf("cannot find sandboxd's own binary: %w", err))
	}
	if personsOwn(script, getenv) {
		err := syscall.Exec("/bin/sh", []string{"sh", "-c", script}, os.Environ())
		return fail(fmt.Errorf("cannot run the hook: %w", err))
	}
	caller, err := runcmd.CallerOf(getenv)
	if err != nil {
		return fail(err)
	}
	// The session's project and request, as its hook left them. A
	// command no hook saw (the person's own !command before any tool
	// call) runs with no request, in the workspace sandboxd run finds.
	run := agenthook.Run{Sandboxd: self, Agent: agenthook.ClaudeCode, Session: getenv("CLAUDE_CODE_SESSION_ID")}
	if run.Session != "" {
		dir := caller.Layout().AgentSession(agenthook.ClaudeCode, run.Session)
		if ws, err := agenthook.SessionWorkspace(dir); err == nil {
			run.Workspace, run.IntentFile = ws, agenthook.IntentFile(dir)
		}
	}
	head, cwdFile, split := agenthook.SplitClaudeScript(script)
	if !split {
		// Not the form sandboxd knows: run it whole, in the sandbox. The
		// directory it ends in does not carry over.
		return runcmd.Command(ctx, run.Args(script), getenv, stdin, stdout, stderr, sigs, runOptions(nil))
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fail(fmt.Errorf("cannot make a pipe: %w", err))
	}
	last := make(chan string, 1)
	go func() { last <- lastLine(r); r.Close() }()
	code := runcmd.Command(ctx, run.Args(agenthook.ClaudeScript(head)), getenv, stdin, stdout, stderr, sigs, runOptions([]*os.File{w}))
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

// personsOwn: the script is, exactly, a hook command or an MCP server
// of the person's own Claude Code settings (the user's and the managed
// ones, which no agent writes: sandboxd's sandbox keeps commands out of
// them, and install denies Claude Code's file tools them), which Claude
// Code also runs through the prefix. A project's settings and MCP servers
// live in the workspace, where an agent could add one: those run in the
// sandbox like any script.
func personsOwn(script string, getenv func(string) string) bool {
	home := getenv("HOME")
	dir, _, err := agentDirs(getenv)
	if err != nil {
		return false
	}
	for _, f := range []string{filepath.Join(dir, "settings.json"), "/etc/claude-code/managed-settings.json"} {
		if slices.Contains(hookCommands(f), script) {
			return true
		}
	}
	words, ok := agenthook.ShellWords(script)
	if !ok {
		return false
	}
	for _, f := range []string{filepath.Join(home, ".claude.json"), filepath.Join(dir, ".claude.json"), "/etc/claude-code/managed-mcp.json"} {
		if slices.ContainsFunc(mcpCommands(f), func(argv []string) bool { return slices.Equal(argv, words) }) {
			return true
		}
	}
	return false
}

// mcpServers is where a Claude Code file names stdio MCP servers: at its
// top, and per project (the "local" scope, kept in ~/.claude.json).
type mcpServers map[string]struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
}

// mcpCommands are the argv of the stdio MCP servers a file names.
func mcpCommands(file string) [][]string {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var s struct {
		MCP      mcpServers `json:"mcpServers"`
		Projects map[string]struct {
			MCP mcpServers `json:"mcpServers"`
		} `json:"projects"`
	}
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	all := []mcpServers{s.MCP}
	for _, p := range s.Projects {
		all = append(all, p.MCP)
	}
	var cmds [][]string
	for _, servers := range all {
		for _, m := range servers {
			if m.Command != "" {
				cmds = append(cmds, append([]string{m.Command}, m.Args...))
			}
		}
	}
	return cmds
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
