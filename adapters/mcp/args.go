package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds on one call's arguments: a client is untrusted input.
const (
	// MaxArgs bounds the arguments' JSON.
	MaxArgs = 256 << 10
	// MaxCommand bounds the command, as the agents' hooks do.
	MaxCommand = 100 << 10
	// MaxCwd bounds the working directory (PATH_MAX).
	MaxCwd = 4096
	// MaxIntent bounds the stated intent, which the model reviewer is
	// shown whole.
	MaxIntent = 16 << 10
)

// Args are one bash call's arguments.
type Args struct {
	// Command is the shell command, run with bash -c.
	Command string
	// Cwd is the directory it runs in as given ("": the server's), an
	// absolute path or one relative to the workspace.
	Cwd string
	// Intent is what the agent says the command is for.
	Intent string
	// Timeout is the call's own (0: the server's default).
	Timeout time.Duration
}

// DecodeArgs decodes a call's arguments strictly: one JSON object of
// valid UTF-8 whose keys are exactly command, cwd, intent and timeout,
// each at most once and of its own type (null stands for an absent
// optional one); a command that is not empty, no string holding a NUL,
// every one within its bound, and a timeout of positive seconds of at
// most maxTimeout. Every error is a sentence for the agent.
func DecodeArgs(raw []byte, maxTimeout time.Duration) (Args, error) {
	var a Args
	if len(raw) > MaxArgs {
		return a, fmt.Errorf("the arguments are over %d KiB", MaxArgs>>10)
	}
	if !utf8.Valid(raw) {
		return a, errors.New("the arguments are not valid UTF-8")
	}
	fields, err := objectFields(raw)
	if err != nil {
		return a, err
	}
	for _, f := range fields {
		switch f.key {
		case "command":
			a.Command, err = stringField(f, MaxCommand, false)
		case "cwd":
			a.Cwd, err = stringField(f, MaxCwd, true)
		case "intent":
			a.Intent, err = stringField(f, MaxIntent, true)
		case "timeout":
			a.Timeout, err = timeoutField(f, maxTimeout)
		default:
			err = fmt.Errorf("unknown argument %q: the arguments are command, cwd, intent and timeout", clip(f.key))
		}
		if err != nil {
			return Args{}, err
		}
	}
	if strings.TrimSpace(a.Command) == "" {
		return Args{}, errors.New("command is required and must not be blank")
	}
	return a, nil
}

// field is one key of the arguments object and its raw value.
type field struct {
	key string
	val json.RawMessage
}

// objectFields splits one JSON object into its fields, in order,
// refusing anything else, a repeated key and trailing data.
func objectFields(raw []byte) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	notObject := errors.New("the arguments must be one JSON object")
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, notObject
	}
	var out []field
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, notObject
		}
		key, ok := t.(string)
		if !ok {
			return nil, notObject
		}
		if seen[key] {
			return nil, fmt.Errorf("the argument %q is given twice", clip(key))
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, notObject
		}
		out = append(out, field{key, v})
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, notObject
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, notObject // trailing data
	}
	return out, nil
}

// stringField is f's string value, within max bytes and free of NULs;
// null, when optional, is "".
func stringField(f field, max int, optional bool) (string, error) {
	if optional && string(f.val) == "null" {
		return "", nil
	}
	var s string
	if len(f.val) == 0 || f.val[0] != '"' || json.Unmarshal(f.val, &s) != nil {
		return "", fmt.Errorf("%s must be a string", f.key)
	}
	if len(s) > max {
		return "", fmt.Errorf("%s is over %d KiB", f.key, max>>10)
	}
	if strings.ContainsRune(s, 0) {
		return "", fmt.Errorf("%s holds a NUL character", f.key)
	}
	return s, nil
}

// timeoutField is f's timeout: a positive number of seconds, at most
// max; null is 0 (the server's default).
func timeoutField(f field, max time.Duration) (time.Duration, error) {
	if string(f.val) == "null" {
		return 0, nil
	}
	var n json.Number
	if len(f.val) == 0 || f.val[0] == '"' || json.Unmarshal(f.val, &n) != nil {
		return 0, errors.New("timeout must be a number of seconds")
	}
	secs, err := n.Float64()
	if err != nil || math.IsNaN(secs) || secs <= 0 {
		return 0, errors.New("timeout must be a positive number of seconds")
	}
	if secs > max.Seconds() {
		return 0, fmt.Errorf("timeout must be at most %g seconds", max.Seconds())
	}
	d := time.Duration(secs * float64(time.Second))
	if d < time.Millisecond {
		return 0, errors.New("timeout must be at least 0.001 seconds")
	}
	return d, nil
}

// clip shortens a client's key for an error message.
func clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	for i := 40; i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i] + "…"
		}
	}
	return "…"
}
