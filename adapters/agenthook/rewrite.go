package agenthook

import (
	"encoding/json"
	"strings"
)

// Run is how a command reaches sandboxd run: which binary, and the
// flags a hook fixes for it.
type Run struct {
	// Sandboxd is the absolute path of the sandboxd binary.
	Sandboxd string
	// Agent, Session and Workspace name the agent, its session and the
	// project directory; IntentFile is where the hook left the request.
	Agent, Session, Workspace, IntentFile string
}

// Args are sandboxd run's arguments (after "run") for command: in
// namespaces only (an agent's own sandbox that refuses them must block,
// not weaken), with the request read from IntentFile, never put on the
// command line.
func (r Run) Args(command string) []string {
	args := []string{"--require-isolation", "--agent", r.Agent, "--session", r.Session, "--workspace", r.Workspace}
	if r.IntentFile != "" {
		args = append(args, "--intent-file", r.IntentFile)
	}
	return append(args, "-c", command)
}

// Command is the shell command that runs command under sandboxd run,
// for an agent that runs it with bash -c: exec, so that the agent's
// signals reach sandboxd itself.
func (r Run) Command(command string) string {
	var b strings.Builder
	b.WriteString("exec ")
	b.WriteString(ShellQuote(r.Sandboxd))
	b.WriteString(" run")
	for _, a := range r.Args(command) {
		b.WriteByte(' ')
		b.WriteString(ShellQuote(a))
	}
	return b.String()
}

// Rewrite is p's tool input with its command run under sandboxd: every
// other field is kept, since the agents replace the whole input.
func (r Run) Rewrite(p Payload) map[string]json.RawMessage {
	in := make(map[string]json.RawMessage, len(p.Input))
	for k, v := range p.Input {
		in[k] = v
	}
	in["command"], _ = json.Marshal(r.Command(p.Command))
	return in
}

// ShellQuote quotes s for a POSIX shell: a word of safe characters as
// it is, anything else in single quotes.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
