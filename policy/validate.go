package policy

import (
	"fmt"
	"net/netip"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/netdest"
	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/reviewurl"
	"github.com/sandboxd/sandboxd/ruletext"
)

// validator checks (and normalizes in place) the value v of one key. It
// returns "" when the value is valid; otherwise the message and the index
// of the offending array element (-1 when the whole value is at fault).
type validator func(v reflect.Value) (int, string)

// validators returns the validator of every key of the schema, by dotted
// key. TestValidatorsMatchSchema proves that every key of the schema has
// one and that every key here is in the schema. (Built by a function:
// policy keeps no package-level variables.)
func validators() map[string]validator {
	anyValue := whole(func(reflect.Value) string { return "" }) // a bool
	ceiling := intRange(0, 1<<40)
	return map[string]validator{
		"profile":   enum(ProfileDefault, ProfileStrict),
		"isolation": enum(IsolationAuto, IsolationNamespaces, IsolationLandlockOnly),

		"filesystem.writable":        list(normPathSpec),
		"filesystem.home_allow":      list(normPathSpec),
		"filesystem.secrets":         list(normSecret),
		"filesystem.allow_secrets":   list(normAllowSecret),
		"filesystem.protected":       list(normProtected),
		"env.allow":                  list(normEnvPattern),
		"env.deny":                   list(normEnvPattern),
		"boundaries.allow":           list(normRule),
		"boundaries.ask":             list(normRule),
		"boundaries.deny":            list(normRule),
		"quiet.deny":                 list(normQuiet),
		"transaction.no_transaction": list(normCommandPattern),

		"limits.pids":       whole(checkPids),
		"limits.memory":     minSize(MinMemory),
		"limits.file_size":  minSize(MinFileSize),
		"limits.tmp_size":   minSize(MinTmpSize),
		"limits.layer_size": minSize(MinLayerSize),
		"limits.cache_size": minSize(MinCacheSize),

		"network.grant_scope":      enum(ScopeRun, ScopeConnection),
		"network.hold_timeout":     durationRange(time.Second, time.Hour),
		"network.max_connections":  intRange(16, 65536),
		"network.max_destinations": intRange(16, 1<<20),
		"network.resolver":         text(checkResolver),
		"network.capture":          anyValue,

		"review.enabled":           anyValue,
		"review.model":             text(checkModelName),
		"review.api_key_env":       text(checkVarName),
		"review.base_url":          text(checkBaseURL),
		"review.timeout":           durationRange(time.Second, 10*time.Minute),
		"review.max_output_tokens": intRange(64, 8192),
		"review.max_input_tokens":  intRange(2048, 32768),
		"review.reasoning_effort":  enum("", "low", "medium", "high"),
		"review.structured_output": enum(StructuredAuto, StructuredJSONSchema, StructuredJSONObject),
		"review.production":        checkProduction,

		"audit.rotate_size": minSize(MiB),
		"audit.retain_age":  zeroOr(durationRange(time.Hour, 100*365*24*time.Hour)),
		"audit.retain_size": zeroOr(minSize(MiB)),

		"review.max_calls_per_session":    ceiling,
		"review.max_calls_per_hour":       ceiling,
		"review.max_tokens_per_session":   ceiling,
		"review.max_tokens_per_hour":      ceiling,
		"review.max_user_calls_per_hour":  ceiling,
		"review.max_user_tokens_per_hour": ceiling,
	}
}

// validateLeaf checks (and normalizes in place) the value v of the key
// path with its validator among rules. A key without one fails closed.
func validateLeaf(rules map[string]validator, path string, v reflect.Value) (int, string) {
	check, ok := rules[path]
	if !ok {
		return -1, "internal error: no validation rule for this key"
	}
	return check(v)
}

// validatePolicy checks every key of p (normalizing p in place) and returns
// the first problem as (key, message).
func validatePolicy(s *schema, p *Policy) (string, string) {
	v := reflect.ValueOf(p).Elem()
	for _, lf := range s.leaves {
		if elem, msg := validateLeaf(s.rules, lf.path, v.FieldByIndex(lf.index)); msg != "" {
			if elem >= 0 {
				msg = fmt.Sprintf("entry %d: %s", elem+1, msg)
			}
			return lf.path, msg
		}
	}
	return "", ""
}

// whole is the validator of a value checked as a whole by check.
func whole(check func(v reflect.Value) string) validator {
	return func(v reflect.Value) (int, string) { return -1, check(v) }
}

// list is the validator of an array of strings, each normalized by norm
// (see checkList).
func list(norm func(string) (string, string)) validator {
	return func(v reflect.Value) (int, string) { return checkList(v, norm) }
}

// text is the validator of a string checked as a whole by check.
func text(check func(s string) string) validator {
	return whole(func(v reflect.Value) string { return check(v.String()) })
}

// enum is the validator of a string that must be one of allowed.
func enum(allowed ...string) validator {
	return text(func(s string) string { return checkEnum(s, allowed...) })
}

// intRange is the validator of an integer in [lo, hi].
func intRange(lo, hi int64) validator {
	return whole(func(v reflect.Value) string { return checkRange(v.Int(), lo, hi) })
}

// minSize is the validator of a size of at least lowest.
func minSize(lowest Size) validator {
	return whole(func(v reflect.Value) string { return checkMinSize(v, lowest) })
}

// zeroOr is check, except that zero (off) is always accepted.
func zeroOr(check validator) validator {
	return func(v reflect.Value) (int, string) {
		if v.IsZero() {
			return -1, ""
		}
		return check(v)
	}
}

// durationRange is the validator of a duration in [lo, hi].
func durationRange(lo, hi time.Duration) validator {
	return whole(func(v reflect.Value) string {
		if d := time.Duration(v.Int()); d < lo || d > hi {
			return fmt.Sprintf("must be between %s and %s (got %v)", boundText(lo), boundText(hi), d)
		}
		return ""
	})
}

// boundText writes a duration's bound as people write it ("1h", not
// time.Duration's "1h0m0s").
func boundText(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}

// checkPids says what is wrong with a limits.pids below MinPids.
func checkPids(v reflect.Value) string {
	if n := v.Int(); n < MinPids {
		return fmt.Sprintf("must be at least %d (got %d)", MinPids, n)
	}
	return ""
}

// checkRange says what is wrong with n outside [lo, hi].
func checkRange(n, lo, hi int64) string {
	if n < lo || n > hi {
		return fmt.Sprintf("must be between %d and %d (got %d)", lo, hi, n)
	}
	return ""
}

// checkModelName checks the reviewer's model name: printable, no
// spaces.
func checkModelName(s string) string {
	for _, c := range s {
		if c <= ' ' || c >= 0x7f {
			return fmt.Sprintf("invalid value %q", s)
		}
	}
	return ""
}

// checkVarName checks the name of the variable holding the reviewer's
// key: letters, digits and '_'. A wrong value is not quoted: the key
// itself written where its variable's name belongs is the usual mistake,
// and the message reaches logs (a daemon's, the journal).
func checkVarName(s string) string {
	for _, c := range s {
		if c != '_' && (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return "invalid value, not shown as it may be a key (want the name of an environment variable, such as OPENAI_API_KEY: letters, digits and _)"
		}
	}
	return ""
}

// checkBaseURL accepts "" or an http(s) URL with a host and no userinfo
// (a key belongs in api_key_env, not in the policy).
func checkBaseURL(s string) string {
	if s == "" {
		return ""
	}
	// A file's endpoint may not carry credentials: files are read by
	// others, copied and committed (the key has api_key_env).
	// The value is not quoted, its host at most: it may hold the very
	// credentials refused, and the message reaches logs.
	if reviewurl.Check(s) != "" || reviewurl.HasCredentials(s) {
		what := "invalid value, not shown as it may hold credentials"
		if h := reviewurl.Host(s); h != "" {
			what = fmt.Sprintf("invalid value for the endpoint at %q, the rest not shown as it may hold credentials", h)
		}
		return what + " (want an http or https URL such as https://api.openai.com/v1, with no credentials, query or fragment in it)"
	}
	return ""
}

// checkResolver accepts "" (the host's resolver) or IP:PORT.
func checkResolver(s string) string {
	if s == "" {
		return ""
	}
	if ap, err := netip.ParseAddrPort(s); err != nil || ap.Port() == 0 {
		return fmt.Sprintf("invalid value %q (want \"\" for the host's resolver, or IP:PORT of a DNS server)", s)
	}
	return ""
}

func checkEnum(s string, allowed ...string) string {
	if slices.Contains(allowed, s) {
		return ""
	}
	q := make([]string, len(allowed))
	for i, a := range allowed {
		q[i] = fmt.Sprintf("%q", a)
	}
	return fmt.Sprintf("invalid value %q (want %s)", s, strings.Join(q, ", "))
}

func checkMinSize(v reflect.Value, lowest Size) string {
	if s := Size(v.Int()); s < lowest {
		return fmt.Sprintf("must be at least %s (got %s)", lowest, s)
	}
	return ""
}

// checkList applies norm to every string of the slice v, replacing each
// entry by its normalized form, and stops at the first invalid entry.
func checkList(v reflect.Value, norm func(string) (string, string)) (int, string) {
	for i := 0; i < v.Len(); i++ {
		s, msg := norm(v.Index(i).String())
		if msg != "" {
			return i, msg
		}
		v.Index(i).SetString(s)
	}
	return -1, ""
}

// normPathSpec accepts an absolute path, "~" or "~/...", and returns it
// cleaned ("~/a/./b/" becomes "~/a/b").
func normPathSpec(s string) (string, string) {
	switch {
	case s == "":
		return "", "empty path"
	case strings.ContainsRune(s, 0):
		return "", fmt.Sprintf("path %q contains a NUL byte", s)
	case s == "~":
		return s, ""
	case strings.HasPrefix(s, "~/"):
		rest := filepath.Clean(strings.TrimLeft(s[2:], "/"))
		if rest == "." {
			return "~", ""
		}
		return "~/" + rest, ""
	case strings.HasPrefix(s, "~"):
		user, _, _ := strings.Cut(s, "/")
		return "", fmt.Sprintf("%q: the %q form is not supported; use \"~/...\" or an absolute path", s, user)
	case filepath.IsAbs(s):
		return filepath.Clean(s), ""
	}
	return "", fmt.Sprintf("%q must be an absolute path or start with \"~/\"", s)
}

// hasGlob reports whether s contains glob metacharacters.
func hasGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// normSecret is normPathSpec where the last element may be a glob.
func normSecret(s string) (string, string) {
	n, msg := normPathSpec(s)
	if msg != "" {
		return "", msg
	}
	dir, last := n, ""
	if i := strings.LastIndexByte(n, '/'); i >= 0 {
		dir, last = n[:i], n[i+1:]
	}
	if hasGlob(dir) {
		return "", fmt.Sprintf("%q: only the last path element may be a glob", s)
	}
	if _, err := filepath.Match(last, ""); err != nil {
		return "", fmt.Sprintf("%q: invalid glob pattern %q", s, last)
	}
	return n, ""
}

// normAllowSecret accepts only built-in secret entries, and never those
// protecting sandboxd itself.
func normAllowSecret(s string) (string, string) {
	n, msg := normPathSpec(s)
	if msg != "" {
		return "", msg
	}
	if hasGlob(filepath.Base(n)) {
		return "", fmt.Sprintf("%q: name a built-in entry or one path, not a glob", s)
	}
	for _, self := range selfSecrets() {
		if pathtree.Within(n, self) || pathtree.Within(self, n) {
			return "", fmt.Sprintf("%q protects sandboxd's own configuration and state and cannot be allowed", s)
		}
	}
	builtin := DefaultSecrets(true)
	if slices.Contains(builtin, n) {
		return n, ""
	}
	// Otherwise one path the credential scan finds: never a part of a
	// built-in entry, which would stay denied as a whole.
	for _, b := range builtin {
		if _, inside := pathtree.Below(b, n); inside {
			return "", fmt.Sprintf("%q is inside the built-in secret entry %q (allow that entry, or nothing)", s, b)
		}
	}
	return n, ""
}

// normProtected accepts a relative path inside the workspace and returns it
// cleaned.
func normProtected(s string) (string, string) {
	switch {
	case s == "":
		return "", "empty path"
	case strings.ContainsRune(s, 0):
		return "", fmt.Sprintf("path %q contains a NUL byte", s)
	case filepath.IsAbs(s), strings.HasPrefix(s, "~"):
		return "", fmt.Sprintf("%q must be relative to the workspace", s)
	}
	if slices.Contains(strings.Split(s, "/"), "..") {
		return "", fmt.Sprintf("%q must not contain \"..\"", s)
	}
	c := filepath.Clean(s)
	if c == "." {
		return "", fmt.Sprintf("%q must name a path inside the workspace, not the workspace itself", s)
	}
	for _, elem := range strings.Split(c, "/") {
		if _, err := path.Match(elem, ""); err != nil {
			return "", fmt.Sprintf("%q is not a valid pattern (%v)", s, err)
		}
	}
	return c, ""
}

// normEnvPattern accepts a variable name or a pattern with '*' wildcards.
func normEnvPattern(s string) (string, string) {
	switch {
	case s == "":
		return "", "empty name"
	case strings.ContainsAny(s, "=\x00"):
		return "", fmt.Sprintf("%q: a name or pattern must not contain '=' or NUL", s)
	}
	return s, ""
}

// normRule checks "SURFACE OPERATION PATTERN" (the broker parses it; this
// gives errors a file and line).
func normRule(s string) (string, string) {
	f, err := ruletext.Fields(s)
	if err != nil {
		return "", fmt.Sprintf("rule %q: %v", s, err)
	}
	if len(f) != 3 {
		return "", fmt.Sprintf("rule %q: want SURFACE OPERATION PATTERN, e.g. \"fs write_file /etc/hosts\" (a backslash escapes a space in a path)", s)
	}
	var surface boundary.Surface
	switch f[0] {
	case "fs":
		surface = boundary.Filesystem
		// Any home will do to check the pattern: "~" expands escaped.
		x, _ := ruletext.ExpandHome(f[2], "/home")
		if err := ruletext.Check(x); err != nil {
			return "", fmt.Sprintf("rule %q: %v", s, err)
		}
	case "net":
		surface = boundary.Network
		if _, err := netdest.ParsePattern(f[2]); err != nil {
			return "", fmt.Sprintf("rule %q: %v", s, strings.TrimPrefix(err.Error(), "netdest: "))
		}
	default:
		return "", fmt.Sprintf("rule %q: the surface must be fs or net", s)
	}
	if msg := checkRuleOperation(surface, f[1]); msg != "" {
		return "", fmt.Sprintf("rule %q: %s", s, msg)
	}
	if strings.ContainsRune(s, 0) {
		return "", fmt.Sprintf("rule %q contains a NUL byte", s)
	}
	return strings.Join(f, " "), ""
}

// checkRuleOperation says what is wrong with a rule's operation: a rule
// that names no real operation would never match, and a deny rule that
// never matches is worse than none.
func checkRuleOperation(surface boundary.Surface, op string) string {
	if op == "*" || boundary.Operation(op).Of(surface) {
		return ""
	}
	names := []string{"*"}
	if surface == boundary.Filesystem {
		if op == "read" || op == "write" {
			return ""
		}
		names = append(names, "read", "write")
	}
	for _, o := range boundary.Operations(surface) {
		names = append(names, string(o))
	}
	return fmt.Sprintf("unknown %s operation %q (want one of %s)", surface, op, strings.Join(names, ", "))
}

// normQuiet accepts a quiet pattern: "~/..." or absolute, each element a
// valid glob ("**" spans elements), never the home or / itself.
func normQuiet(s string) (string, string) {
	c, msg := normPathSpec(s)
	if msg != "" {
		return "", msg
	}
	if c == "~" || c == "/" {
		return "", fmt.Sprintf("%q would quiet every write below it; name the tool's own file or directory", s)
	}
	for _, elem := range strings.Split(c, "/") {
		if _, err := path.Match(strings.ReplaceAll(elem, "**", "*"), ""); err != nil {
			return "", fmt.Sprintf("%q is not a valid pattern (%v)", s, err)
		}
	}
	return c, ""
}

// normCommandPattern accepts a command pattern: not empty, at most 1024
// bytes, no control characters, and not "*" alone (that is
// --no-transaction for every command: say so with the flag instead).
func normCommandPattern(s string) (string, string) {
	switch {
	case strings.TrimSpace(s) == "":
		return "", "empty command pattern"
	case len(s) > 1024:
		return "", "command pattern longer than 1024 bytes"
	case strings.Trim(s, "* ") == "":
		return "", fmt.Sprintf("%q matches every command", s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Sprintf("%q has a control character", s)
		}
	}
	return s, ""
}

// CheckModelName checks a model reviewer's model name as [review]
// model is checked: "" when s is valid, else why not. (The machine
// configuration names reviewers too.)
func CheckModelName(s string) string { return checkModelName(s) }

// CheckBaseURL checks a model reviewer's endpoint as [review] base_url
// is checked: "" when s is valid, else why not.
func CheckBaseURL(s string) string { return checkBaseURL(s) }
