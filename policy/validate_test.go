package policy

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/golden"
)

// validateCases are policy files with invalid values: at least one for
// every key that has an invalid value, and one for every message a
// validator writes. Their errors are pinned in testdata/validate.golden,
// so that a change to a validator's text or to the order in which
// problems are reported shows there.
func validateCases() []struct{ name, doc string } {
	long := strings.Repeat("a", 1025)
	return []struct{ name, doc string }{
		{"profile", `profile = "paranoid"`},
		{"isolation", `isolation = "none"`},
		{"writable empty", `filesystem.writable = [""]`},
		{"writable NUL", `filesystem.writable = ["/a\u0000b"]`},
		{"writable tilde user", `filesystem.writable = ["/ok", "~bob/x"]`},
		{"writable relative", `filesystem.writable = ["build"]`},
		{"secrets glob in dir", `filesystem.secrets = ["/a/*/b"]`},
		{"secrets bad glob", `filesystem.secrets = ["/a/["]`},
		{"secrets relative", `filesystem.secrets = ["a"]`},
		{"allow_secrets part of built-in", `filesystem.allow_secrets = ["~/.ssh/id_rsa"]`},
		{"allow_secrets glob", `filesystem.allow_secrets = ["~/Documents/*.kdbx"]`},
		{"allow_secrets own config", `filesystem.allow_secrets = ["~/.config/sandboxd"]`},
		{"allow_secrets below own config", `filesystem.allow_secrets = ["~/.config/sandboxd/policy.toml"]`},
		{"allow_secrets above own config", `filesystem.allow_secrets = ["~/.config"]`},
		{"allow_secrets relative", `filesystem.allow_secrets = ["x"]`},
		{"home_allow tilde user", `filesystem.home_allow = ["~root"]`},
		{"protected empty", `filesystem.protected = [""]`},
		{"protected NUL", `filesystem.protected = ["a\u0000"]`},
		{"protected absolute", `filesystem.protected = ["/etc"]`},
		{"protected home", `filesystem.protected = ["~/x"]`},
		{"protected dotdot", `filesystem.protected = ["a/../../etc"]`},
		{"protected dot", `filesystem.protected = ["./"]`},
		{"protected bad pattern", `filesystem.protected = ["a/[b"]`},
		{"env allow empty", `env.allow = [""]`},
		{"env allow equals", `env.allow = ["A=B"]`},
		{"env deny NUL", `env.deny = ["A\u0000"]`},
		{"pids", `limits.pids = 15`},
		{"memory", `limits.memory = "8MiB"`},
		{"file_size", `limits.file_size = "1KiB"`},
		{"tmp_size", `limits.tmp_size = "1KiB"`},
		{"layer_size", `limits.layer_size = "1KiB"`},
		{"cache_size", `limits.cache_size = "1MiB"`},
		{"rule fields", `boundaries.allow = ["fs write_file"]`},
		{"rule escape", `boundaries.allow = ["fs write_file /a\\"]`},
		{"rule surface", `boundaries.ask = ["disk read_file /a"]`},
		{"rule fs operation", `boundaries.deny = ["fs frob /a"]`},
		{"rule net operation", `boundaries.deny = ["net write example.org:443"]`},
		{"rule fs pattern", `boundaries.allow = ["fs read relative"]`},
		{"rule net pattern", `boundaries.allow = ["net connect example.org:x"]`},
		{"rule NUL", `boundaries.deny = ["fs read_file /a\u0000"]`},
		{"quiet home", `quiet.deny = ["~"]`},
		{"quiet root", `quiet.deny = ["/"]`},
		{"quiet bad pattern", `quiet.deny = ["~/a/[x"]`},
		{"quiet relative", `quiet.deny = ["a"]`},
		{"grant_scope", `network.grant_scope = "forever"`},
		{"hold_timeout short", `network.hold_timeout = "500ms"`},
		{"hold_timeout long", `network.hold_timeout = "2h"`},
		{"max_connections low", `network.max_connections = 8`},
		{"max_connections high", `network.max_connections = 70000`},
		{"max_destinations", `network.max_destinations = 1`},
		{"resolver no port", `network.resolver = "8.8.8.8"`},
		{"resolver port 0", `network.resolver = "1.1.1.1:0"`},
		{"base_url scheme", `review.base_url = "ftp://x"`},
		{"base_url credentials", `review.base_url = "https://u:p@x"`},
		{"base_url query", `review.base_url = "https://x/v1?api-key=k"`},
		{"base_url unparsable", `review.base_url = "https://u:p@x:bad/v1"`},
		{"model", `review.model = "gpt 4"`},
		{"api_key_env", `review.api_key_env = "MY-KEY"`},
		{"api_key_env a key", `review.api_key_env = "sk-proj-abc123"`},
		{"review timeout short", `review.timeout = "0s"`},
		{"review timeout long", `review.timeout = "11m"`},
		{"max_output_tokens", `review.max_output_tokens = 10`},
		{"max_input_tokens", `review.max_input_tokens = 100000`},
		{"reasoning_effort", `review.reasoning_effort = "max"`},
		{"structured_output", `review.structured_output = "xml"`},
		{"max_calls_per_session", `review.max_calls_per_session = -1`},
		{"max_calls_per_hour", `review.max_calls_per_hour = -1`},
		{"max_tokens_per_session", `review.max_tokens_per_session = -1`},
		{"max_tokens_per_hour", `review.max_tokens_per_hour = -1`},
		{"max_user_calls_per_hour", `review.max_user_calls_per_hour = -1`},
		{"max_user_tokens_per_hour", `review.max_user_tokens_per_hour = 1099511627777`},
		{"no_transaction empty", `transaction.no_transaction = [" "]`},
		{"no_transaction long", `transaction.no_transaction = ["` + long + `"]`},
		{"no_transaction every command", `transaction.no_transaction = ["* *"]`},
		{"no_transaction control", `transaction.no_transaction = ["a\u0001"]`},
		// Order: the first line with a problem wins; on one line, the
		// schema's order.
		{"order by line", "[review]\ntimeout = \"0s\"\n[limits]\npids = 1\n"},
		{"order on one line", `limits = { memory = "1KiB", pids = 1 }`},
		{"order of list entries", "filesystem.writable = [\n\"/ok\",\n\"rel\",\n\"\",\n]\n"},
	}
}

// TestValidateGolden pins every validator's message, where it is
// reported and which problem is reported first, for a file (Parse) and
// for a policy value (validatePolicy, as Resolve checks it).
func TestValidateGolden(t *testing.T) {
	var b strings.Builder
	for _, tc := range validateCases() {
		_, err := Parse("p.toml", []byte(tc.doc), Default())
		fmt.Fprintf(&b, "# %s\n%v\n", tc.name, err)
	}
	p := Default()
	p.Review.MaxInputTokens = 1
	p.Limits.Pids = 1
	p.Filesystem.Writable = []string{"/ok", "rel"}
	for range 4 {
		key, msg := validatePolicy(ruleSchema(), &p)
		fmt.Fprintf(&b, "# validatePolicy\n%s: %s\n", key, msg)
		// Fix the problem reported, to see the next one.
		switch key {
		case "filesystem.writable":
			p.Filesystem.Writable = nil
		case "limits.pids":
			p.Limits.Pids = MinPids
		case "review.max_input_tokens":
			p.Review.MaxInputTokens = 4096
		}
	}
	golden.Check(t, "validate.golden", []byte(b.String()))
}

// TestValidateNormalizes pins the normalized form validation leaves in
// a policy.
func TestValidateNormalizes(t *testing.T) {
	p, err := Parse("n.toml", []byte(`
[filesystem]
writable = ["~/a/./b/", "/x//y/"]
secrets = ["~//k/*.pem"]
home_allow = ["~/"]
protected = ["./tools/hooks/"]
[boundaries]
allow = ["fs   read   /etc/hosts"]
[quiet]
deny = ["~/.cache//x/**"]
`), Default())
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%q %q %q %q %q %q", p.Filesystem.Writable, p.Filesystem.Secrets, p.Filesystem.HomeAllow,
		p.Filesystem.Protected, p.Boundaries.Allow, p.Quiet.Deny)
	want := `["~/a/b" "/x/y"] ["~/k/*.pem"] ["~"] ["tools/hooks"] ["fs read /etc/hosts"] ["~/.cache/x/**"]`
	if got != want {
		t.Errorf("normalized:\n got %s\nwant %s", got, want)
	}
}

// TestValidatorsMatchSchema: every key of the schema has a validator (a
// key without one is rejected at load time), and every validator's key
// is a key of the schema (a validator for a key that was renamed or
// removed would silently check nothing).
func TestValidatorsMatchSchema(t *testing.T) {
	rules := validators()
	schema := map[string]bool{}
	for _, lf := range leaves(policyType()) {
		schema[lf.path] = true
		if rules[lf.path] == nil {
			t.Errorf("key %s has no validator in validators()", lf.path)
		}
	}
	for _, key := range sortedKeys(rules) {
		if !schema[key] {
			t.Errorf("validators() has a validator for %s, which is not a key of the schema", key)
		}
	}
	if len(schema) < 40 {
		t.Errorf("the schema has %d keys: leaves() no longer walks it", len(schema))
	}
	var p Policy
	if _, msg := validateLeaf(rules, "no.such_key", reflect.ValueOf(&p).Elem()); !strings.HasPrefix(msg, "internal error") {
		t.Errorf("a key without a validator passed: %q", msg)
	}
}
