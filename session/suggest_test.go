package session

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/suggest"
)

// Each denial in the report carries its suggestion, for the caller's own
// policy file; an allow carries none; no event ever does (the agent hears
// the events).
func TestReportSuggestions(t *testing.T) {
	w := newWorld(t)
	secret := filepath.Join(w.caller.Home, ".ssh", "id_rsa")
	mine := filepath.Join(w.caller.Home, "notes *.txt")
	fake := &fakeSandbox{script: []attemptFunc{denies(1, fsDenial("make_reg", w.allowed), fsDenial("write_file", w.denied),
		fsDenial("read_file", secret), fsDenial("write_file", mine))}}
	ev := &recorder{}
	rep, err := New(Config{Sandbox: fake}).Run(context.Background(), w.caller, job(0), ev)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(w.caller.Home, ".config", "sandboxd", "policy.toml")
	want := map[string]*suggest.Suggestion{
		w.allowed: nil,
		w.denied:  {Rule: "fs write_file " + w.denied, TOML: suggest.TOML(file, []string{"fs write_file " + w.denied})},
		secret:    {Why: "a hard deny, decided before any allow rule: credential stores are never opened to a sandboxed command"},
		mine:      {Rule: `fs write_file ~/notes\ \*.txt`, TOML: suggest.TOML(file, []string{`fs write_file ~/notes\ \*.txt`})},
	}
	if len(rep.Boundaries) != len(want) {
		t.Fatalf("boundaries %q", boundaries(rep))
	}
	for _, b := range rep.Boundaries {
		if w, ok := want[b.Path]; !ok || !reflect.DeepEqual(b.Suggestion, w) {
			t.Errorf("%s: suggestion %+v, want %+v", b.Path, b.Suggestion, w)
		}
	}
	for _, e := range ev.events {
		if e.Boundary != nil && e.Boundary.Suggestion != nil {
			t.Fatalf("event %s carries a suggestion: %+v", e.Kind, e.Boundary.Suggestion)
		}
	}
}

// The policy file a rule is for is the one the run loads: --policy
// (relative to the caller's directory) or the default.
func TestPolicyFile(t *testing.T) {
	c := Caller{Home: "/home/u", ConfigHome: "/home/u/.config", Cwd: "/home/u/proj"}
	for explicit, want := range map[string]string{
		"":                   "/home/u/.config/sandboxd/policy.toml",
		"p.toml":             "/home/u/proj/p.toml",
		"../x/./p.toml":      "/home/u/x/p.toml",
		"/etc/sandboxd.toml": "/etc/sandboxd.toml",
	} {
		if got := c.PolicyFile(explicit); got != want {
			t.Errorf("PolicyFile(%q) = %q, want %q", explicit, got, want)
		}
	}
}

// The report's boundaries decode as the suggester's: the same keys, the
// same values (suggest sits below session, so it cannot use the type).
func TestBoundaryDecodesForSuggest(t *testing.T) {
	b := Boundary{Attempt: 2, Surface: boundary.Network, Operation: boundary.OpConnect, Path: "/p", Destination: "example.org:443",
		Decision: broker.Deny, Source: broker.SourceHuman, Rationale: "no", Grant: "issued", Held: true}
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var got suggest.Boundary
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got != b.suggestible() {
		t.Fatalf("decoded %+v, want %+v", got, b.suggestible())
	}
}
