package agenthook

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestDecodeRealPayloads decodes payloads the real agents sent (Claude
// Code 2.1.332, Codex 0.171.0) and compares what sandboxd takes from
// them, and the rewrite Codex would get, with a golden file.
func TestDecodeRealPayloads(t *testing.T) {
	files, _ := filepath.Glob("testdata/payloads/*.json")
	if len(files) == 0 {
		t.Fatal("no payloads")
	}
	sort.Strings(files)
	var out bytes.Buffer
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		agent := ClaudeCode
		if strings.HasPrefix(filepath.Base(f), "codex-") {
			agent = Codex
		}
		p, err := Decode(agent, bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		var keys []string
		for k := range p.Input {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		r := Run{Sandboxd: "/opt/sandboxd", Agent: agent, Session: p.SessionID, Workspace: p.Cwd, IntentFile: "/s/intent"}
		rw, _ := json.Marshal(r.Rewrite(p))
		fmt.Fprintf(&out, "%s\n  agent %s session %s cwd %s mode %s\n  transcript %s\n  input %s command %q\n  rewrite %s\n",
			filepath.Base(f), p.Agent, p.SessionID, p.Cwd, p.PermissionMode, p.TranscriptPath, strings.Join(keys, ","), p.Command, rw)
	}
	golden(t, "testdata/payloads.golden", out.Bytes())
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it):\n%s", path, got)
	}
}

// TestDecodeRefuses: every input that is not a complete shell-tool call
// is refused with a sentence that says what is wrong.
func TestDecodeRefuses(t *testing.T) {
	good := map[string]any{
		"session_id": "s1", "transcript_path": "/h/t.jsonl", "cwd": "/w", "hook_event_name": "PreToolUse",
		"tool_name": "Bash", "tool_input": map[string]any{"command": "ls"},
	}
	with := func(k string, v any) string {
		m := map[string]any{}
		for k2, v2 := range good {
			m[k2] = v2
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	if _, err := Decode(Codex, strings.NewReader(with("x", nil))); err != nil {
		t.Fatalf("the good payload: %v", err)
	}
	for _, c := range []struct{ name, agent, in, want string }{
		{"unknown agent", "cursor", with("x", nil), "unknown agent"},
		{"empty", Codex, "", "not a JSON object"},
		{"garbage", Codex, "{not json", "not a JSON object"},
		{"array", Codex, "[1]", "not a JSON object"},
		{"two values", Codex, with("x", nil) + "{}", "more than one JSON value"},
		{"other event", Codex, with("hook_event_name", "PostToolUse"), `"PostToolUse", not PreToolUse`},
		{"other tool", ClaudeCode, with("tool_name", "Write"), `tool "Write"`},
		{"no session", Codex, with("session_id", nil), "session_id"},
		{"session with a newline", Codex, with("session_id", "a\nb"), "session_id"},
		{"relative cwd", Codex, with("cwd", "w"), "absolute cwd"},
		{"unclean cwd", Codex, with("cwd", "/w/../x"), "absolute cwd"},
		{"relative transcript", Codex, with("transcript_path", "t.jsonl"), "transcript_path"},
		{"no input", Codex, with("tool_input", nil), "tool_input"},
		{"input not an object", Codex, with("tool_input", "ls"), "not a JSON object"},
		{"no command", Codex, with("tool_input", map[string]any{"cmd": "ls"}), "no command string"},
		{"command not a string", Codex, with("tool_input", map[string]any{"command": []string{"ls"}}), "no command string"},
		{"blank command", Codex, with("tool_input", map[string]any{"command": " \n"}), "empty"},
		{"NUL", Codex, with("tool_input", map[string]any{"command": "ls\x00x"}), "NUL"},
		{"long command", Codex, with("tool_input", map[string]any{"command": strings.Repeat("x", MaxCommand+1)}), "script in the workspace"},
		{"huge payload", Codex, with("pad", strings.Repeat("x", MaxPayload)), "larger than"},
	} {
		_, err := Decode(c.agent, strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
	// Text that is not UTF-8 is refused (encoding/json replaces it).
	bad := strings.Replace(with("x", nil), `"ls"`, "\"l\xffs\"", 1)
	if p, err := Decode(Codex, strings.NewReader(bad)); err == nil && strings.ContainsRune(p.Command, 0xff) {
		t.Errorf("took %q", p.Command)
	}
}

// FuzzDecode: no input makes Decode panic, and what it takes holds its
// promises.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/payloads/*.json")
	for _, p := range files {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Add([]byte(`{"hook_event_name":"PreToolUse","tool_name":"Bash","session_id":"s","cwd":"/","tool_input":{"command":"x"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, agent := range []string{ClaudeCode, Codex} {
			p, err := Decode(agent, bytes.NewReader(b))
			if err != nil {
				continue
			}
			shell := p.ToolName == "Bash"
			if !shell && (agent != Codex || p.ToolName != ApplyPatch) || !cleanAbs(p.Cwd) || !validID(p.SessionID) || p.Command == "" ||
				shell && len(p.Command) > MaxCommand || strings.ContainsRune(p.Command, 0) {
				t.Fatalf("took %+v", p)
			}
		}
	})
}
