package agenthook

import (
	"encoding/json"
	"io"
)

// hookOutput is the JSON a PreToolUse hook prints.
type hookOutput struct {
	HookSpecificOutput *specific `json:"hookSpecificOutput,omitempty"`
}

type specific struct {
	HookEventName      string                     `json:"hookEventName"`
	PermissionDecision string                     `json:"permissionDecision,omitempty"`
	UpdatedInput       map[string]json.RawMessage `json:"updatedInput,omitempty"`
}

// WriteAllow prints the answer that runs input instead of the agent's
// own: an allow with the whole updated input (Codex takes an updated
// input only with an allow).
func WriteAllow(w io.Writer, input map[string]json.RawMessage) error {
	return writeJSON(w, hookOutput{&specific{HookEventName: "PreToolUse", PermissionDecision: "allow", UpdatedInput: input}})
}

// WriteNoDecision prints the answer that leaves the call to the agent's
// own permission rules, as valid JSON: an agent that reads anything
// else as a failed hook may run the command (Claude Code does).
func WriteNoDecision(w io.Writer) error {
	return writeJSON(w, hookOutput{})
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
