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
	args := []string{"--require-isolation", "--agent", r.Agent}
	if r.Session != "" {
		args = append(args, "--session", r.Session)
	}
	if r.Workspace != "" {
		args = append(args, "--workspace", r.Workspace)
	}
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

// ShellWords splits s into words as a POSIX shell would, when s is
// only words: unquoted, single-quoted, double-quoted or with backslash
// escapes. ok is false for anything a shell would expand or treat as an
// operator.
func ShellWords(s string) (words []string, ok bool) {
	var w strings.Builder
	in, plain := false, true // plain: the word so far has no quoting
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ' ' || c == '\t':
			if in {
				words, in, plain = append(words, w.String()), false, true
				w.Reset()
			}
		case c == '=' && len(words) == 0 && plain && isAssignment(w.String()+"="):
			return nil, false // NAME=value first: an assignment, not a word
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			w.WriteString(s[i+1 : i+1+j])
			i, in, plain = i+1+j, true, false
		case c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '$' || s[j] == '`' {
					return nil, false
				}
				if s[j] == '\\' && j+1 < len(s) && strings.IndexByte("\"\\$`", s[j+1]) >= 0 {
					j++
				}
				w.WriteByte(s[j])
			}
			if j == len(s) {
				return nil, false
			}
			i, in, plain = j, true, false
		case c == '\\' && i+1 < len(s) && s[i+1] != '\n':
			w.WriteByte(s[i+1])
			i, in, plain = i+1, true, false
		case strings.IndexByte("\n;&|<>()$`*?[]{}~#!", c) >= 0 && !(c == '#' && in):
			return nil, false
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words, len(words) > 0
}

// ShellQuote quotes s for a POSIX shell: a word of safe characters as
// it is, anything else (an "=" too: NAME=value first is an assignment)
// in single quotes.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
