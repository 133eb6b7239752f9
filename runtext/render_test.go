package runtext

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/internal/golden"
	"github.com/sandboxd/sandboxd/layer"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
)

// Every line `sandboxd run` prints on stderr while it decides, for each
// kind of event: the sentences an agent reads.
func TestStderrGolden(t *testing.T) {
	ws := "/home/u/proj"
	var buf bytes.Buffer
	r := New(&buf)
	for _, e := range []session.Event{
		{Kind: session.KindRecovered, Recovered: &layer.Recovered{Workspace: ws, RunID: "r1", Action: "rolled back",
			Conflicts: []layer.Conflict{{Path: "a.txt", Why: "changed outside"}}}},
		{Kind: session.KindBoundary, Attempt: 1, Boundary: &session.Boundary{Attempt: 1, Surface: boundary.Filesystem, Operation: boundary.OpMakeReg,
			Path: "/opt/new", Decision: broker.Allow, Source: broker.SourcePolicy, Grant: "issued"}},
		{Kind: session.KindBoundary, Attempt: 1, Boundary: &session.Boundary{Attempt: 1, Surface: boundary.Filesystem, Operation: boundary.OpReadFile,
			Path: "/home/u/.ssh/id_rsa", Decision: broker.Deny, Source: broker.SourceHardDeny, Rationale: "credential stores are never opened to a sandboxed command"}},
		{Kind: session.KindBoundary, Attempt: 1, Boundary: &session.Boundary{Attempt: 1, Surface: boundary.Network, Operation: boundary.OpConnect,
			Destination: "evil.example:443\x1b[2J", Decision: broker.Deny, Source: broker.SourceNoReviewer, Rationale: "no reviewer", Held: true}},
		{Kind: session.KindPersisted, Workspace: ws, Persisted: []sandbox.Persisted{
			{Path: ".envrc", Action: "quarantined", Why: "direnv runs it", Quarantine: "/q/.envrc"},
			{Path: ".git/hooks/x", Action: "removed", Why: "git runs it"},
			{Path: "shared", Action: "narrowed", Why: "group write removed"},
			{Path: "AGENTS.md", Action: "listed", Why: "agent instructions"}}},
		{Kind: session.KindReviewed, Attempt: 1},
		{Kind: session.KindRetrying, Attempt: 1, Exceptions: []string{"make_reg /opt/new", "write_file /opt/old"}, Discarded: true},
		{Kind: session.KindNotRetrying, Attempt: 2, Reason: "the granted object changed between the review and the retry, so the grant no longer applies"},
		{Kind: session.KindTimedOut, Attempt: 1, Reason: "3s"},
		{Kind: session.KindWarning, Attempt: 1, Reason: "isolation is landlock-only: no namespaces"},
		{Kind: session.KindRefused, Attempt: 1, Refused: &sandbox.Refused{Class: "netlink", Count: 2,
			What: "a netlink socket (ip, ifconfig, ss, hostname -I)", Why: "netlink is closed to the command"}},
		{Kind: session.KindCommitted, Workspace: ws, Commit: &layer.Outcome{
			Refused:   []layer.Refused{{Path: ".git/hooks/pre-commit", Why: "git runs it"}},
			Skipped:   []layer.Refused{{Path: "fifo", Why: "a fifo is not committed"}},
			Conflicts: []layer.Conflict{{Path: "b.txt", Why: "changed outside", SavedAs: "b.txt.sandboxd"}},
			Stripped:  []string{"suid"},
			Modes:     []layer.Refused{{Path: "dir", Why: "without group write"}},
			Shared:    []string{ws + "/.git"},
			Listed:    []layer.Refused{{Path: "CLAUDE.md", Why: "agent instructions"}}}},
	} {
		r.Event(e)
	}
	// Many denials in one attempt: a few in full, the rest counted.
	for i := 0; i < 9; i++ {
		dir := "/usr/lib"
		if i%3 == 0 {
			dir = "/etc"
		}
		r.Event(session.Event{Kind: session.KindBoundary, Attempt: 2, Boundary: &session.Boundary{Attempt: 2, Surface: boundary.Filesystem,
			Operation: boundary.OpMakeReg, Path: filepath.Join(dir, fmt.Sprintf("f%d", i)), Decision: broker.Deny, Source: broker.SourceNoReviewer, Rationale: "no reviewer"}})
	}
	r.Event(session.Event{Kind: session.KindReviewed, Attempt: 2})
	golden.Check(t, "stderr.golden", buf.Bytes())
}

// TestPrintRefusedGroups: paths refused for one reason share one block,
// naming the first few and counting the rest.
func TestPrintRefusedGroups(t *testing.T) {
	var refused []layer.Refused
	for _, p := range []string{"a", "b", "c", "d", "e"} {
		refused = append(refused, layer.Refused{Path: p, Why: "the submodule add is rolled back"})
	}
	refused = append(refused, layer.Refused{Path: "hook", Why: "a new hook"})
	var b strings.Builder
	printRefused(&b, func(p string) string { return "/ws/" + p }, refused)
	out := b.String()
	if n := strings.Count(out, "sandboxd: not committed:"); n != 2 {
		t.Errorf("%d blocks, want 2:\n%s", n, out)
	}
	if !strings.Contains(out, "not committed: /ws/a, /ws/b, /ws/c and 2 more") || !strings.Contains(out, "not committed: /ws/hook\n") {
		t.Errorf("unexpected output:\n%s", out)
	}
}
