package main

import (
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
}
