package audit

import (
	"fmt"
	"strings"
	"time"
)

// Line is r as one line for a person (unescaped: the caller escapes it
// for its terminal): when, which record, whose, about what, and what
// came of it.
func Line(r Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s #%d %s", r.Time.Local().Format(time.DateTime), r.Seq, r.Kind)
	if r.UID != nil {
		fmt.Fprintf(&b, " uid %d", *r.UID)
	}
	if r.Session != "" {
		fmt.Fprintf(&b, " session %q", r.Session)
	}
	if r.Surface != "" {
		fmt.Fprintf(&b, ": %s %s %s", r.Surface, r.Operation, r.Target)
	}
	if r.Outcome != "" {
		fmt.Fprintf(&b, ": %s by %s", r.Outcome, r.Source)
		if r.Risk != "" {
			fmt.Fprintf(&b, " (risk %s)", r.Risk)
		}
	}
	if r.ModelOutcome != "" && r.AnswerSource != "" {
		fmt.Fprintf(&b, ", the model had said %s", r.ModelOutcome)
	}
	if r.ReviewMS > 0 {
		fmt.Fprintf(&b, " after %s", (time.Duration(r.ReviewMS) * time.Millisecond).String())
	}
	for _, f := range []struct{ name, v string }{{"production marker", r.Production}, {"", r.Rationale}, {"why", r.Why}, {"", r.Note}, {"intent", r.Intent}, {"scope", r.Scope}, {"command", r.Command}} {
		switch {
		case f.v == "":
		case f.name == "":
			b.WriteString("; " + f.v)
		default:
			b.WriteString("; " + f.name + " " + f.v)
		}
	}
	if r.Count != 0 {
		fmt.Fprintf(&b, "; %d", r.Count)
	}
	if r.ExpiresAt != nil {
		b.WriteString("; expires " + r.ExpiresAt.Local().Format(time.DateTime))
	}
	return b.String()
}

// IsEvent reports whether r records an event: neither one of the log's
// own records (genesis, checkpoint, retention) nor a view's stub.
func (r Record) IsEvent() bool { return r.Kind != "" && !r.Kind.own() }
