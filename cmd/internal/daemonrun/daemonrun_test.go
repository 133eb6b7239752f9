package daemonrun_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/sandboxd/sandboxd/cmd/internal/daemonrun"
	"github.com/sandboxd/sandboxd/session"
)

// What a run through the daemon says in the core's words, the core's own
// definitions say (the front links none of them).
func TestSameAsTheCore(t *testing.T) {
	if daemonrun.InternalError != session.Public(errors.New("x")) {
		t.Errorf("internal error: %q, the core's %q", daemonrun.InternalError, session.Public(errors.New("x")))
	}
	if daemonrun.ExitSandboxd != session.ExitSandboxd {
		t.Errorf("exit status %d, the core's %d", daemonrun.ExitSandboxd, session.ExitSandboxd)
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
			want = &session.Report{ExitCode: daemonrun.ExitSandboxd, Boundaries: []session.Boundary{}, Session: tc.session, Command: tc.argv}
		} else {
			raw, _ = json.Marshal(tc.rep)
		}
		if raw == nil {
			raw = daemonrun.FailedReport(tc.session, tc.argv)
		}
		want.Error = msg
		wantb, _ := json.MarshalIndent(want, "", "  ")
		var ind bytes.Buffer
		json.Indent(&ind, daemonrun.WithError(raw, msg), "", "  ")
		if ind.String() != string(wantb) {
			t.Errorf("the front writes\n%s\nthe core\n%s", ind.String(), wantb)
		}
	}
}
