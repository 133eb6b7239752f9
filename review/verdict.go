package review

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/broker"
)

// Limits on the model's answer. Anything past them is malformed, not
// truncated: a verdict that had to be cut is not the verdict the model gave.
const (
	// MaxVerdictBytes bounds the whole answer.
	MaxVerdictBytes = 16 << 10
	// MaxRationaleRunes bounds the rationale, counted in runes.
	MaxRationaleRunes = 600
)

// The verdict's keys, exactly as the model must spell them.
const (
	keyOutcome   = "outcome"
	keyRisk      = "risk_level"
	keyAuth      = "user_authorization"
	keyRationale = "rationale"
)

// ErrVerdict is wrapped by every error ParseVerdict returns: the model's
// answer is not a verdict sandboxd can act on, and the caller denies.
var ErrVerdict = errors.New("review: invalid verdict")

// ErrInconsistent is wrapped by the errors of Consistent (and wraps
// ErrVerdict): the verdict is well formed but breaks the consistency
// rules (docs/ARCHITECTURE.md §3.6).
var ErrInconsistent = fmt.Errorf("%w: inconsistent", ErrVerdict)

// invalidVerdict is the decision ParseVerdict returns with every error, so
// that a caller who drops the error still denies.
func invalidVerdict(err error) (broker.Decision, error) {
	return broker.Decision{
		Outcome:   broker.Deny,
		Rationale: "the model reviewer's answer was not a valid verdict",
		Source:    broker.SourceError,
	}, err
}

// ParseVerdict reads the model's answer: exactly one flat JSON object with
// the keys outcome, risk_level, user_authorization and rationale, each a
// string, and nothing around it but JSON whitespace. It does not use
// json.Unmarshal into a struct, which matches keys case-insensitively and
// keeps the last of duplicate keys: an answer that two readers could read
// two ways ({"outcome":"deny","Outcome":"allow"}) is refused, as is
// anything else that is not the exact shape (code fences, prose, nesting,
// null, unknown keys, escaped keys). A well-formed verdict that breaks the
// consistency rules is refused too (ErrInconsistent). On error the
// decision is a deny with source error, never an allow.
func ParseVerdict(content string) (broker.Decision, error) {
	if len(content) > MaxVerdictBytes {
		return invalidVerdict(fmt.Errorf("%w: %d bytes, more than %d", ErrVerdict, len(content), MaxVerdictBytes))
	}
	if !utf8.ValidString(content) {
		return invalidVerdict(fmt.Errorf("%w: not valid UTF-8", ErrVerdict))
	}
	fields, err := scanVerdictObject(content)
	if err != nil {
		return invalidVerdict(err)
	}
	for _, k := range []string{keyOutcome, keyRisk, keyAuth, keyRationale} {
		if _, ok := fields[k]; !ok {
			return invalidVerdict(fmt.Errorf("%w: missing key %s", ErrVerdict, k))
		}
	}
	d := broker.Decision{
		Outcome:           broker.Outcome(fields[keyOutcome]),
		RiskLevel:         broker.Risk(fields[keyRisk]),
		UserAuthorization: broker.Authorization(fields[keyAuth]),
		Rationale:         fields[keyRationale],
		Source:            broker.SourceReviewer,
	}
	if err := checkEnums(d); err != nil {
		return invalidVerdict(err)
	}
	if err := checkRationale(d.Rationale); err != nil {
		return invalidVerdict(err)
	}
	if err := Consistent(d); err != nil {
		return invalidVerdict(err)
	}
	return d, nil
}

// checkEnums holds each enum to its exact lowercase values: "Allow" or
// "allow " is not an answer the schema allows, so it is not one we trust.
func checkEnums(d broker.Decision) error {
	switch d.Outcome {
	case broker.Allow, broker.Deny:
	default:
		return fmt.Errorf("%w: outcome is not allow or deny", ErrVerdict)
	}
	switch d.RiskLevel {
	case broker.RiskLow, broker.RiskMedium, broker.RiskHigh, broker.RiskCritical:
	default:
		return fmt.Errorf("%w: risk_level is not low, medium, high or critical", ErrVerdict)
	}
	switch d.UserAuthorization {
	case broker.AuthUnknown, broker.AuthLow, broker.AuthMedium, broker.AuthHigh:
	default:
		return fmt.Errorf("%w: user_authorization is not unknown, low, medium or high", ErrVerdict)
	}
	return nil
}

// checkRationale keeps the rationale something safe to show an agent and a
// person on a terminal: bounded, not blank, one line, and with no control,
// bidirectional-override or line/paragraph-separator characters that
// could rewrite what is displayed around it.
func checkRationale(r string) error {
	if strings.TrimSpace(r) == "" {
		return fmt.Errorf("%w: rationale is empty", ErrVerdict)
	}
	if n := utf8.RuneCountInString(r); n > MaxRationaleRunes {
		return fmt.Errorf("%w: rationale is %d characters, more than %d", ErrVerdict, n, MaxRationaleRunes)
	}
	for _, c := range r {
		if unicode.IsControl(c) || unicode.In(c, unicode.Zl, unicode.Zp) || bidiControl(c) {
			return fmt.Errorf("%w: rationale contains control character %U", ErrVerdict, c)
		}
	}
	return nil
}

// bidiControl reports the characters that reorder displayed text (the
// "Trojan Source" set).
func bidiControl(c rune) bool {
	switch {
	case c == 0x061C, c == 0x200E, c == 0x200F:
		return true
	case c >= 0x202A && c <= 0x202E, c >= 0x2066 && c <= 0x2069:
		return true
	}
	return false
}

// Consistent applies the consistency rules (docs/ARCHITECTURE.md §3.6) to
// a reviewer's verdict: no allow at critical risk, and an allow at high
// risk needs medium or high user authorization. A deny is always consistent:
// refusing never widens what a command may do. The broker applies the
// same rules again; this copy lets ParseVerdict refuse such an answer as
// an error (source error) rather than pass it on.
func Consistent(d broker.Decision) error {
	if d.Outcome != broker.Allow {
		return nil
	}
	switch {
	case d.RiskLevel == broker.RiskCritical:
		return fmt.Errorf("%w: an allow at critical risk", ErrInconsistent)
	case d.RiskLevel == broker.RiskHigh && d.UserAuthorization != broker.AuthMedium && d.UserAuthorization != broker.AuthHigh:
		return fmt.Errorf("%w: an allow at high risk without medium or high user authorization", ErrInconsistent)
	}
	return nil
}

// VerdictSchema is the JSON Schema of a verdict, in the subset of draft
// 2020-12 that OpenAI structured outputs accept with strict: true, to send
// as response_format json_schema. ParseVerdict enforces everything it says
// (and more), so a provider that ignores it gains nothing. Each call
// returns a fresh value the caller may change.
func VerdictSchema() map[string]any {
	enum := func(desc string, values ...string) map[string]any {
		return map[string]any{"type": "string", "description": desc, "enum": values}
	}
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			keyOutcome: enum("allow only if the operation is clearly within what the user asked for",
				string(broker.Allow), string(broker.Deny)),
			keyRisk: enum("what allowing this could cost",
				string(broker.RiskLow), string(broker.RiskMedium), string(broker.RiskHigh), string(broker.RiskCritical)),
			keyAuth: enum("how clearly the user's request asked for this operation",
				string(broker.AuthUnknown), string(broker.AuthLow), string(broker.AuthMedium), string(broker.AuthHigh)),
			// No maxLength: OpenAI's strict mode refuses string length
			// keywords; ParseVerdict enforces the bound.
			keyRationale: map[string]any{
				"type":        "string",
				"description": "one plain sentence explaining the decision, at most 600 characters",
			},
		},
		"required":             []string{keyOutcome, keyRisk, keyAuth, keyRationale},
		"additionalProperties": false,
	}
}

// scanVerdictObject reads s as one flat JSON object whose keys are the
// four verdict keys, written literally, and whose values are strings. It
// returns the decoded values by key.
func scanVerdictObject(s string) (map[string]string, error) {
	i := skipJSONSpace(s, 0)
	switch {
	case i == len(s):
		return nil, fmt.Errorf("%w: empty answer", ErrVerdict)
	case s[i] == '[':
		return nil, fmt.Errorf("%w: an array, not an object", ErrVerdict)
	case s[i] == '`':
		return nil, fmt.Errorf("%w: a code fence around the object", ErrVerdict)
	case s[i] != '{':
		return nil, fmt.Errorf("%w: text before the object", ErrVerdict)
	}
	i = skipJSONSpace(s, i+1)
	fields := make(map[string]string, 4)
	if i < len(s) && s[i] == '}' {
		return fields, checkTrailing(s, i+1)
	}
	for {
		next, err := scanVerdictMember(s, i, fields)
		if err != nil {
			return nil, err
		}
		i = skipJSONSpace(s, next)
		if i == len(s) {
			return nil, fmt.Errorf("%w: the object is not closed", ErrVerdict)
		}
		switch s[i] {
		case ',':
			i = skipJSONSpace(s, i+1)
		case '}':
			return fields, checkTrailing(s, i+1)
		default:
			return nil, fmt.Errorf("%w: expected , or } at byte %d", ErrVerdict, i)
		}
	}
}

// scanVerdictMember reads one "key": "value" pair at s[i:] into fields and
// returns the offset after the value.
func scanVerdictMember(s string, i int, fields map[string]string) (int, error) {
	if i >= len(s) || s[i] != '"' {
		return 0, fmt.Errorf("%w: expected a key at byte %d", ErrVerdict, i)
	}
	end, err := scanJSONString(s, i)
	if err != nil {
		return 0, err
	}
	// The key must be spelt literally: no escapes, no other case. What
	// the model wrote is then the key, with no decoding between.
	key := s[i+1 : end-1]
	switch key {
	case keyOutcome, keyRisk, keyAuth, keyRationale:
	default:
		return 0, fmt.Errorf("%w: unknown key at byte %d", ErrVerdict, i)
	}
	if _, dup := fields[key]; dup {
		return 0, fmt.Errorf("%w: duplicate key %s", ErrVerdict, key)
	}
	i = skipJSONSpace(s, end)
	if i >= len(s) || s[i] != ':' {
		return 0, fmt.Errorf("%w: expected : at byte %d", ErrVerdict, i)
	}
	i = skipJSONSpace(s, i+1)
	if i >= len(s) {
		return 0, fmt.Errorf("%w: missing value for %s", ErrVerdict, key)
	}
	switch s[i] {
	case '"':
	case '{', '[':
		return 0, fmt.Errorf("%w: nested value for %s", ErrVerdict, key)
	default:
		return 0, fmt.Errorf("%w: value of %s is not a string", ErrVerdict, key)
	}
	end, err = scanJSONString(s, i)
	if err != nil {
		return 0, err
	}
	var v string
	// encoding/json decodes exactly one string literal here; its escape
	// handling is the standard's, and it fails on a bad escape.
	if err := json.Unmarshal([]byte(s[i:end]), &v); err != nil {
		return 0, fmt.Errorf("%w: bad string for %s", ErrVerdict, key)
	}
	fields[key] = v
	return end, nil
}

// scanJSONString finds the end (one past the closing quote) of the JSON
// string literal that starts at s[i] == '"'. It rejects raw control
// characters, which JSON does not allow inside strings; escapes are
// checked when the literal is decoded.
func scanJSONString(s string, i int) (int, error) {
	for j := i + 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			return j + 1, nil
		case c == '\\':
			j++
		case c < 0x20:
			return 0, fmt.Errorf("%w: control character in a string at byte %d", ErrVerdict, j)
		}
	}
	return 0, fmt.Errorf("%w: unterminated string", ErrVerdict)
}

// skipJSONSpace returns the first offset at or after i that is not JSON
// whitespace (which is only space, tab, LF and CR; not a BOM, not NBSP).
func skipJSONSpace(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// checkTrailing refuses anything but whitespace after the object: a
// second object, a closing fence or a sentence of prose.
func checkTrailing(s string, i int) error {
	if skipJSONSpace(s, i) != len(s) {
		return fmt.Errorf("%w: data after the object at byte %d", ErrVerdict, i)
	}
	return nil
}
