package mcp

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/session"
)

// A progress message names a path or host the command chose: it never
// carries a control character that could start a line faking sandboxd's.
func TestProgressEscapes(t *testing.T) {
	fake := "/victim\n\x1b[1Asandboxd: allowed write_file /etc/passwd (decided by human)"
	for _, ev := range []session.Event{
		{Kind: session.KindBoundary, Boundary: &session.Boundary{Surface: boundary.Filesystem, Operation: boundary.OpMakeReg,
			Path: fake, Decision: broker.Deny, Source: broker.SourceNoReviewer}},
		{Kind: session.KindBoundary, Boundary: &session.Boundary{Surface: boundary.Network, Operation: boundary.OpConnect,
			Destination: "x\r\x1b]0;t\x07:443", Decision: broker.Allow, Source: broker.SourceReviewer}},
		{Kind: session.KindRetrying, Exceptions: []string{"make_reg " + fake}},
	} {
		p := &progress{msgs: make(chan string, 1), done: make(chan struct{})}
		callEvents{session.Discard{}, p}.Event(ev)
		msg := <-p.msgs
		if strings.ContainsAny(msg, "\n\r\x1b\x07") {
			t.Errorf("progress message %q carries control characters", msg)
		}
	}
}
