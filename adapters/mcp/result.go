package mcp

import (
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/session"
)

// faultNote follows the notes of a call a reviewer fault denied.
const faultNote = "sandboxd: a reviewer failed, which is not a judgement of the command: tell the user rather than working around it; the same request may be allowed once the reviewer works."

// result is a call's tool result: the structured Result and the same as
// text. A denied boundary, a path the persistence rules moved away and a
// run sandboxd could not do are error results; a command's own failure
// (a non-zero exit) is not.
func result(rep *session.Report, err error, out, errOut *Bounded, notes string, r Result) *sdk.CallToolResult {
	r.Stdout, r.Stderr = out.String(), errOut.String()
	r.StdoutBytes, r.StderrBytes = out.Total(), errOut.Total()
	r.Truncated = out.Truncated() || errOut.Truncated()
	r.Notes = notes
	r.Boundaries = []Boundary{}
	isError := false
	if rep == nil {
		rep = &session.Report{ExitCode: session.ExitSandboxd}
	}
	r.ExitCode, r.TimedOut, r.Attempts = rep.ExitCode, rep.TimedOut, rep.Attempts
	fault := false
	for _, b := range rep.Boundaries {
		nb := Boundary{Attempt: b.Attempt, Surface: string(b.Surface), Operation: string(b.Operation), Target: target(b),
			Decision: string(b.Decision), DecidedBy: string(b.Source), ReviewerFault: b.Source == broker.SourceError,
			Rationale: b.Rationale, Held: b.Held}
		if b.Decision != broker.Allow {
			isError = true
			fault = fault || nb.ReviewerFault
		}
		r.Boundaries = append(r.Boundaries, nb)
	}
	for _, p := range rep.Persistence {
		// What a run written straight to the workspace left and the
		// persistence rules then moved away is denied as a commit's
		// refusal is, though no boundary records it.
		if p.Action == "quarantined" || p.Action == "removed" {
			isError = true
		}
	}
	if err != nil {
		r.Error = rep.Error
		if r.Error == "" {
			r.Error = session.Public(err)
		}
		isError = true
	}
	if fault {
		r.Notes += faultNote + "\n"
	}
	return &sdk.CallToolResult{IsError: isError, StructuredContent: r, Content: []sdk.Content{&sdk.TextContent{Text: text(r)}}}
}

// text is the result for a client that reads only text. sandboxd's own
// lines and the exit status come first and the command's output after,
// each stream under a header with its size: whatever the command prints
// (a "[sandboxd]" line of its own) comes after sandboxd's, inside a
// stream whose size is said.
func text(r Result) string {
	var b strings.Builder
	if notes := strings.TrimSuffix(r.Notes, "\n"); notes != "" {
		fmt.Fprintf(&b, "[sandboxd]\n%s\n", notes)
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "[sandboxd]\nsandboxd: %s\n", r.Error)
	}
	fmt.Fprintf(&b, "[exit status %d]", r.ExitCode)
	stream := func(name, s string, n int64) {
		if n == 0 {
			return
		}
		fmt.Fprintf(&b, "\n[%s: %d bytes]\n%s", name, n, s)
	}
	stream("stdout", r.Stdout, r.StdoutBytes)
	stream("stderr", r.Stderr, r.StderrBytes)
	return b.String()
}
