package agenthook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Agents whose hooks sandboxd answers.
const (
	ClaudeCode = "claude-code"
	Codex      = "codex"
)

// ApplyPatch is Codex's file-editing tool, whose input is a patch.
const ApplyPatch = "apply_patch"

// MaxPayload bounds a hook's input. The largest part is the command,
// which must fit one argument of an exec (MaxCommand); the rest is a few
// short fields.
const MaxPayload = 1 << 20

// MaxCommand bounds a command: Linux refuses a single argument longer
// than 128 KiB (MAX_ARG_STRLEN), and the command travels as one, inside
// a longer one.
const MaxCommand = 100 << 10

// Payload is a PreToolUse hook's input for the agent's shell tool, as
// both agents send it (payloads in testdata/).
type Payload struct {
	Agent          string `json:"-"`
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	Cwd            string `json:"cwd"`
	HookEventName  string `json:"hook_event_name"`
	ToolName       string `json:"tool_name"`
	ToolUseID      string `json:"tool_use_id"`
	PermissionMode string `json:"permission_mode"`
	// PromptID is Claude Code's id of the prompt whose turn the call is
	// in; the transcript's lines of that turn carry it as promptId.
	PromptID string `json:"prompt_id"`
	// Input is the tool's input, every field kept (a rewrite changes
	// only the command); Command is its command (apply_patch's patch).
	Input   map[string]json.RawMessage `json:"tool_input"`
	Command string                     `json:"-"`
}

// Decode reads one hook payload of agent's from r. Anything but a
// complete PreToolUse call of the shell tool with the fields a rewrite
// needs is an error that says what is wrong.
func Decode(agent string, r io.Reader) (Payload, error) {
	var p Payload
	if agent != ClaudeCode && agent != Codex {
		return p, fmt.Errorf("unknown agent %q", agent)
	}
	b, err := io.ReadAll(io.LimitReader(r, MaxPayload+1))
	if err != nil {
		return p, fmt.Errorf("cannot read the hook's input: %w", err)
	}
	if len(b) > MaxPayload {
		return p, fmt.Errorf("the hook's input is larger than %d KiB", MaxPayload>>10)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&p); err != nil {
		return p, fmt.Errorf("the hook's input is not a JSON object: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return p, errors.New("the hook's input has more than one JSON value")
	}
	p.Agent = agent
	return p, p.check()
}

// check validates a decoded payload.
func (p *Payload) check() error {
	switch {
	case p.HookEventName != "PreToolUse":
		return fmt.Errorf("the hook was called for %q, not PreToolUse: sandboxd answers only PreToolUse", clip(p.HookEventName))
	case p.ToolName != "Bash" && (p.Agent != Codex || p.ToolName != ApplyPatch):
		return fmt.Errorf("the hook was called for the tool %q: sandboxd answers only for the shell tool (Bash) and Codex's apply_patch", clip(p.ToolName))
	case !validID(p.SessionID):
		return errors.New("the hook's input has no usable session_id")
	case !cleanAbs(p.Cwd):
		return fmt.Errorf("the hook's input has no absolute cwd (%q)", clip(p.Cwd))
	case p.TranscriptPath != "" && !cleanAbs(p.TranscriptPath):
		return fmt.Errorf("the hook's transcript_path %q is not an absolute path", clip(p.TranscriptPath))
	case p.Input == nil:
		return errors.New("the hook's input has no tool_input object")
	}
	raw, ok := p.Input["command"]
	if !ok || json.Unmarshal(raw, &p.Command) != nil {
		return errors.New("the hook's tool_input has no command string")
	}
	switch {
	case strings.TrimSpace(p.Command) == "":
		return errors.New("the command is empty")
	case len(p.Command) > MaxCommand && p.ToolName == "Bash":
		return fmt.Errorf("the command is %d KiB, longer than the %d KiB an argument may be: write it to a script in the workspace and run that", len(p.Command)>>10, MaxCommand>>10)
	case strings.ContainsRune(p.Command, 0):
		return errors.New("the command holds a NUL byte, which no shell can be given")
	case !utf8.ValidString(p.Command):
		return errors.New("the command is not UTF-8 text")
	}
	return nil
}

// validID: a session id is an agent's token (a UUID today), short and
// printable, used in a file name only through a hash.
func validID(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c == 0x7f || c > '~' {
			return false
		}
	}
	return true
}

// cleanAbs: an absolute path in clean form, with no NUL or newline.
func cleanAbs(p string) bool {
	return filepath.IsAbs(p) && filepath.Clean(p) == p && !strings.ContainsAny(p, "\x00\n")
}

// clip is a field from the payload, short enough for a message.
func clip(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.ToValidUTF8(s, "?")
}
