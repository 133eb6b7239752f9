package agenthook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/atomicfile"
)

// transcriptWindow is how much of a transcript's end Intent reads: the
// request a command serves is near the end, and a transcript grows with
// every tool result, without bound.
const transcriptWindow = 8 << 20

// MaxIntent bounds the request handed to sandboxd run. A longer one
// (a pasted log) keeps its head and tail: what was asked, and the last
// of what was pasted.
const MaxIntent = 16 << 10

// Intent is the request the person last typed, read from the end of the
// agent's transcript at path, which must be a regular file owned by uid
// (the agent's own, as the hook runs as its user). It is "" when the
// transcript holds none: a command can serve no typed request (an agent
// started with a prompt file, a resumed session whose window holds only
// tool output).
func Intent(agent, path string, uid int) (string, error) {
	b, err := readWindow(path, uid)
	if err != nil {
		return "", err
	}
	return latest(b, typedFor(agent)), nil
}

// IntentOf is Intent for a call that names the prompt it serves (Claude
// Code's prompt_id). Claude Code writes its transcript behind its turn:
// the first command of a prompt can reach the hook before the prompt's
// own line is in the file (Claude Code 2.1.332, a few runs in a hundred
// under load), and the request read then would be the one before, or
// none.
// So until the transcript holds a line of that prompt it reads it again,
// for at most wait; after that the request is "" (no evidence), never an
// older one.
func IntentOf(agent, path string, uid int, promptID string, wait time.Duration) (string, error) {
	if promptID == "" {
		return Intent(agent, path, uid)
	}
	needle, _ := json.Marshal(promptID)
	needle = append([]byte(`"promptId":`), needle...)
	deadline := time.Now().Add(wait)
	for {
		b, err := readWindow(path, uid)
		if err == nil && bytes.Contains(b, needle) {
			return latest(b, typedFor(agent)), nil
		}
		if time.Now().After(deadline) {
			return "", err
		}
		time.Sleep(promptPoll)
	}
}

// promptPoll is how often IntentOf reads the transcript again.
const promptPoll = 25 * time.Millisecond

func typedFor(agent string) func([]byte) (string, bool) {
	if agent == Codex {
		return codexTyped
	}
	return claudeTyped
}

// readWindow is the end of the transcript at path (at most
// transcriptWindow, from a line's start), which must be a regular file
// owned by uid.
func readWindow(path string, uid int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("cannot read the agent's transcript: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot read the agent's transcript: %w", err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !st.Mode().IsRegular() || !ok || int(sys.Uid) != uid {
		return nil, fmt.Errorf("the transcript %s is not a regular file of the agent's user", path)
	}
	start := max(st.Size()-transcriptWindow, 0)
	b := make([]byte, st.Size()-start)
	n, err := f.ReadAt(b, start)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("cannot read the agent's transcript: %w", err)
	}
	b = b[:n]
	if start > 0 {
		// The window's first line is cut: skip it.
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		} else {
			b = nil
		}
	}
	return b, nil
}

// latest is the last line of a JSONL transcript that typed calls a
// typed request, bounded; lines that are not JSON are skipped (a line
// being written). Lines are found forwards, where the search is fast,
// and judged from the last.
func latest(b []byte, typed func([]byte) (string, bool)) string {
	var lines [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			i = len(b)
		}
		lines = append(lines, b[:i])
		b = b[min(i+1, len(b)):]
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if s, ok := typed(bytes.TrimSpace(lines[i])); ok && strings.TrimSpace(s) != "" {
			return bound(s)
		}
	}
	return ""
}

// bound is s cut to MaxIntent bytes, head and tail kept at rune
// boundaries, the cut said.
func bound(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxIntent {
		return s
	}
	head, tail := MaxIntent*3/4, MaxIntent/4-64
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	t := len(s) - tail
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return fmt.Sprintf("%s\n[… %d bytes cut …]\n%s", s[:head], t-head, s[t:])
}

// claudeEntry is the part of a Claude Code transcript line (one JSON
// object per line) that tells a typed request from everything else the
// transcript stores with the user role.
type claudeEntry struct {
	Type             string          `json:"type"`
	IsMeta           bool            `json:"isMeta"`
	IsCompactSummary bool            `json:"isCompactSummary"`
	IsSidechain      bool            `json:"isSidechain"`
	ToolUseResult    json.RawMessage `json:"toolUseResult"`
	SourceTool       string          `json:"sourceToolAssistantUUID"`
	PromptSource     string          `json:"promptSource"`
	TurnOrigin       string          `json:"turnOrigin"`
	Origin           *struct {
		Kind string `json:"kind"`
	} `json:"origin"`
	Message struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

// claudeNotTyped are the turn origins Claude Code itself counts as not
// the person's (a scheduled prompt, a background task's notice, an
// automatic continuation, another agent, the host or the system).
var claudeNotTyped = map[string]bool{
	"scheduled": true, "task_notification": true, "auto_continuation": true,
	"peer": true, "host_synthetic": true, "system": true,
}

// claudePerson are the origin kinds of a message a person wrote (an
// entry without one is an older or headless typed prompt).
var claudePerson = map[string]bool{"human": true, "person": true, "voice-call": true}

// claudeMarkers open the text Claude Code stores, with the user role, for
// what the person did not type as a request: a ! command and its output,
// a slash command and its output, and the notes it adds.
var claudeMarkers = []string{
	"<bash-input>", "<bash-stdout>", "<bash-stderr>",
	"<command-name>", "<command-message>", "<command-args>",
	"<local-command-stdout>", "<local-command-stderr>", "<local-command-caveat>",
	"<system-reminder>", "<user-prompt-submit-hook>", "<task-notification>",
}

// claudeTyped: a line of Claude Code's transcript that is a request the
// person typed: a user entry that is not a tool's result, a summary, a
// meta note, a subagent's prompt, a command's text, or from an origin
// other than a person (the transcript's origin, turnOrigin and
// promptSource, read as Claude Code reads them).
func claudeTyped(line []byte) (string, bool) {
	// Most lines of a long turn are tool results, often large: those are
	// skipped before decoding. In JSON text a quote inside a string is
	// escaped, so these bytes occur only as a key or a value.
	if !bytes.Contains(line, []byte(`"type":"user"`)) || bytes.Contains(line, []byte(`"toolUseResult":`)) {
		return "", false
	}
	var e claudeEntry
	if json.Unmarshal(line, &e) != nil || e.Type != "user" || e.Message.Role != "user" ||
		e.IsMeta || e.IsCompactSummary || e.IsSidechain || len(e.ToolUseResult) > 0 || e.SourceTool != "" ||
		e.PromptSource == "system" || claudeNotTyped[e.TurnOrigin] || (e.Origin != nil && !claudePerson[e.Origin.Kind]) {
		return "", false
	}
	var text string
	if json.Unmarshal(e.Message.Content, &text) != nil {
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(e.Message.Content, &blocks) != nil {
			return "", false
		}
		var parts []string
		for _, b := range blocks {
			switch b.Type {
			case "text":
				parts = append(parts, b.Text)
			case "image", "document":
			default: // a tool_result, or a kind not known to be typed
				return "", false
			}
		}
		text = strings.Join(parts, "\n")
	}
	t := strings.TrimSpace(text)
	for _, m := range claudeMarkers {
		if strings.HasPrefix(t, m) {
			return "", false
		}
	}
	return text, true
}

// codexLine is the part of a Codex rollout line that tells a typed
// request from the other user-role messages it stores (the environment
// context, a ! command, a summary): each content item's kind and who
// it came from.
type codexLine struct {
	Type    string `json:"type"`
	Payload struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Meta *struct {
			Kinds []string `json:"content_item_kinds"`
			Items []struct {
				Provenance struct {
					Type string `json:"type"`
				} `json:"provenance"`
			} `json:"content_item_metadata"`
		} `json:"internal_chat_message_metadata_passthrough"`
	} `json:"payload"`
}

// errNoMeta: a Codex message without the metadata that says who wrote
// each item is never taken for a typed request.
var errNoMeta = errors.New("no content metadata")

// codexTyped: a line of a Codex rollout that is a message whose text
// items the person typed (kind user.text, provenance user).
func codexTyped(line []byte) (string, bool) {
	if !bytes.Contains(line, []byte(`"role":"user"`)) { // as in claudeTyped
		return "", false
	}
	var l codexLine
	if json.Unmarshal(line, &l) != nil || l.Type != "response_item" || l.Payload.Type != "message" || l.Payload.Role != "user" {
		return "", false
	}
	text, err := codexText(&l)
	return text, err == nil && text != ""
}

func codexText(l *codexLine) (string, error) {
	m := l.Payload.Meta
	if m == nil || len(m.Kinds) != len(l.Payload.Content) || len(m.Items) != len(l.Payload.Content) {
		return "", errNoMeta
	}
	var parts []string
	for i, c := range l.Payload.Content {
		if m.Kinds[i] == "user.text" && m.Items[i].Provenance.Type == "user" && c.Type == "input_text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n"), nil
}

// A session's directory (statedir.Layout.AgentSession) holds these.
const (
	// intentName is the request the person last typed.
	intentName = "intent"
	// workspaceName is the project directory, for a front end that runs
	// where the agent does not say it (Claude Code's shell prefix).
	workspaceName = "workspace"
)

// IntentFile is the request's file in a session's directory.
func IntentFile(dir string) string { return filepath.Join(dir, intentName) }

// WriteSession leaves the request and the project directory where
// sandboxd run and the shell prefix read them: files only the caller may
// read, in a directory only it may enter, each replaced whole (an empty
// request too: a stale one must never stand for a later command's).
func WriteSession(dir, intent, workspace string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("cannot make the session's directory: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, workspaceName), []byte(workspace), 0o600); err != nil {
		return fmt.Errorf("cannot write the session's workspace: %w", err)
	}
	if err := atomicfile.WriteFile(IntentFile(dir), []byte(intent), 0o600); err != nil {
		return fmt.Errorf("cannot write the intent: %w", err)
	}
	return nil
}

// SessionWorkspace is the project directory a hook left for a session;
// an error when no hook ran in it.
func SessionWorkspace(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, workspaceName))
	if err != nil || !cleanAbs(string(b)) {
		return "", errors.New("sandboxd's PreToolUse hook has not run in this session")
	}
	return string(b), nil
}
