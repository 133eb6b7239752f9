package mcp

import (
	"encoding/json"
	"fmt"
	"time"
)

// inputSchema is the bash tool's arguments (DecodeArgs is the check; the
// schema tells the client). maxTimeout is in seconds.
func inputSchema(maxTimeout time.Duration) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{
 "type": "object",
 "properties": {
  "command": {"type": "string", "minLength": 1, "description": "The shell command, run with bash -c in the sandbox."},
  "cwd": {"type": "string", "description": "The directory to run it in: absolute, or relative to the workspace; it must lie inside the workspace. Default: the directory the server started in. A cd does not carry over to the next call."},
  "intent": {"type": "string", "description": "What the command is for, in a sentence: the reviewer of a boundary the command meets reads it as your account, not the user's words."},
  "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": %g, "description": "End the command after this many seconds (exit status 124)."}
 },
 "required": ["command"],
 "additionalProperties": false
}`, maxTimeout.Seconds()))
}

// outputSchema is the structured content of every bash result (Result).
const outputSchema = `{
 "type": "object",
 "properties": {
  "exit_code": {"type": "integer", "description": "The command's exit status: 124 timed out, 125 sandboxd failed or refused, 126/127 not executable/not found, 128+N killed by signal N."},
  "stdout": {"type": "string", "description": "The command's standard output; when long, its head and tail with the size left out between them."},
  "stderr": {"type": "string", "description": "The command's standard error, bounded as stdout is."},
  "stdout_bytes": {"type": "integer", "description": "Bytes the command wrote to stdout in all."},
  "stderr_bytes": {"type": "integer", "description": "Bytes the command wrote to stderr in all."},
  "truncated": {"type": "boolean", "description": "Output was left out."},
  "timed_out": {"type": "boolean"},
  "attempts": {"type": "integer", "description": "How many times the command ran: it is retried once per round of boundaries that were all allowed."},
  "boundaries": {"type": "array", "items": {
   "type": "object",
   "properties": {
    "attempt": {"type": "integer"},
    "surface": {"type": "string", "enum": ["filesystem", "network"]},
    "operation": {"type": "string"},
    "target": {"type": "string", "description": "The path or network destination."},
    "decision": {"type": "string", "enum": ["allow", "deny"]},
    "decided_by": {"type": "string", "description": "policy, hard-deny, reviewer (the model), human, client (a person's answer relayed by a client of the daemon), grant, circuit-breaker, no-reviewer or error."},
    "reviewer_fault": {"type": "boolean", "description": "The reviewer failed: not a judgement of the command."},
    "rationale": {"type": "string"},
    "held": {"type": "boolean", "description": "Decided while the command ran (a network connection that waited)."}
   },
   "required": ["attempt", "surface", "operation", "target", "decision", "decided_by", "reviewer_fault", "rationale"]
  }},
  "notes": {"type": "string", "description": "What sandboxd told the command's user: denials, retries, what was not committed."},
  "error": {"type": "string", "description": "Why sandboxd could not run the command (exit status 125)."},
  "workspace": {"type": "string"},
  "cwd": {"type": "string"},
  "session": {"type": "string"}
 },
 "required": ["exit_code", "stdout", "stderr", "stdout_bytes", "stderr_bytes", "truncated", "timed_out", "attempts", "boundaries"]
}`

// Result is the structured content of a bash call (outputSchema).
type Result struct {
	ExitCode    int        `json:"exit_code"`
	Stdout      string     `json:"stdout"`
	Stderr      string     `json:"stderr"`
	StdoutBytes int64      `json:"stdout_bytes"`
	StderrBytes int64      `json:"stderr_bytes"`
	Truncated   bool       `json:"truncated"`
	TimedOut    bool       `json:"timed_out"`
	Attempts    int        `json:"attempts"`
	Boundaries  []Boundary `json:"boundaries"`
	Notes       string     `json:"notes,omitempty"`
	Error       string     `json:"error,omitempty"`
	Workspace   string     `json:"workspace,omitempty"`
	Cwd         string     `json:"cwd,omitempty"`
	Session     string     `json:"session,omitempty"`
}

// Boundary is one boundary the command met, as decided.
type Boundary struct {
	Attempt       int    `json:"attempt"`
	Surface       string `json:"surface"`
	Operation     string `json:"operation"`
	Target        string `json:"target"`
	Decision      string `json:"decision"`
	DecidedBy     string `json:"decided_by"`
	ReviewerFault bool   `json:"reviewer_fault"`
	Rationale     string `json:"rationale"`
	Held          bool   `json:"held,omitempty"`
}
