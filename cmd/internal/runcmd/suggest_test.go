package runcmd

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/suggest"
	"github.com/sandboxd/sandboxd/termfilter"
)

// What run shows the person at the terminal: each suggested rule once,
// in one TOML block, framed as sandboxd's own; nothing when no rule is
// suggested.
func TestSuggestionText(t *testing.T) {
	rep := &session.Report{Boundaries: []session.Boundary{
		{Path: "/etc/hosts", Suggestion: &suggest.Suggestion{Rule: "fs write_file /etc/hosts"}},
		{Path: "/etc/hosts", Suggestion: &suggest.Suggestion{Rule: "fs write_file /etc/hosts"}},
		{Path: "/home/u/.ssh/id_rsa", Suggestion: &suggest.Suggestion{Why: "a hard deny"}},
		{Path: "/etc/motd"},
		{Destination: "example.org:443", Suggestion: &suggest.Suggestion{Rule: "net connect example.org:443"}},
	}}
	got := suggestionText(rep, "/home/u/.config/sandboxd/policy.toml")
	want := "\r\n" + termfilter.FrameOn + "---- sandboxd: rules that would allow what was denied, next time ----" + termfilter.FrameOff + "\r\n" +
		strings.ReplaceAll(suggest.TOML("/home/u/.config/sandboxd/policy.toml", []string{"fs write_file /etc/hosts", "net connect example.org:443"}), "\n", "\r\n")
	if got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if got := suggestionText(&session.Report{Boundaries: rep.Boundaries[2:4]}, "/p"); got != "" {
		t.Fatalf("no rule, yet %q", got)
	}
}
