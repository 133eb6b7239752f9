package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/sandboxd/sandboxd/adapters/agenthook"
	"github.com/sandboxd/sandboxd/daemon/client"
	"github.com/sandboxd/sandboxd/runflags"
	"github.com/sandboxd/sandboxd/session"
)

// What the front says of a run in the core's words, the core's own
// definitions say (the front links none of them).
func TestSameAsTheCore(t *testing.T) {
	for _, tc := range []struct{ name, front, core string }{
		{"shell prefix name", claudeShellName, agenthook.ClaudeShellName},
		{"internal error", internalError, session.Public(errors.New("x"))},
		{"question waiting", client.EventQuestionWaiting, string(session.KindQuestionWaiting)},
		{"review auto", runflags.ReviewAuto, session.ReviewAuto},
		{"review off", runflags.ReviewOff, session.ReviewOff},
		{"review human", runflags.ReviewHuman, session.ReviewHuman},
		{"review model", runflags.ReviewModel, session.ReviewModel},
	} {
		if tc.front != tc.core {
			t.Errorf("%s: the front has %q, the core %q", tc.name, tc.front, tc.core)
		}
	}
	if exitSandboxd != session.ExitSandboxd {
		t.Errorf("exit status %d, the core's %d", exitSandboxd, session.ExitSandboxd)
	}
}

// The report of a run that failed is byte for byte the core's, indented
// as the core indents it.
func TestFailedReport(t *testing.T) {
	for _, tc := range []struct {
		session string
		argv    []string
		rep     *session.Report // a report that came, or nil
	}{
		{"", []string{"true"}, nil},
		{"s1", []string{"sh", "-c", "echo <&>"}, nil},
		{"s2", []string{"x"}, &session.Report{ExitCode: 125, Boundaries: []session.Boundary{}, Session: "s2", Command: []string{"x"}, Workspace: "/w"}},
		{"s3", []string{"x"}, &session.Report{ExitCode: 125, Boundaries: []session.Boundary{}, Error: "an earlier sentence", Signal: 9}},
	} {
		msg := "the daemon sent no <report> & \"more\""
		var raw json.RawMessage
		want := tc.rep
		if want == nil {
			want = &session.Report{ExitCode: exitSandboxd, Boundaries: []session.Boundary{}, Session: tc.session, Command: tc.argv}
		} else {
			raw, _ = json.Marshal(tc.rep)
		}
		if raw == nil {
			raw = failedReport(tc.session, tc.argv)
		}
		want.Error = msg
		wantb, _ := json.MarshalIndent(want, "", "  ")
		var ind bytes.Buffer
		json.Indent(&ind, withError(raw, msg), "", "  ")
		if ind.String() != string(wantb) {
			t.Errorf("the front writes\n%s\nthe core\n%s", ind.String(), wantb)
		}
	}
}
