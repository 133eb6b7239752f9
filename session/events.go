package session

import (
	"github.com/sandboxd/sandboxd/layer"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Events hears a run's progress. Event is called from the goroutine that
// calls Run, except for boundaries decided while an attempt runs (held
// connections), which may arrive from others: an implementation that
// keeps state locks it. It must not block for long; the run waits.
type Events interface {
	Event(Event)
}

// Kind names an event.
type Kind string

// Events, in the order a run can produce them.
const (
	// KindRecovered: a commit a crash interrupted was finished or rolled
	// back before this run (Recovered).
	KindRecovered Kind = "recovered"
	// KindBoundary: a boundary was decided (Boundary). Allowed ones are
	// retried; denied ones are final.
	KindBoundary Kind = "boundary"
	// KindReviewed: every boundary the attempt reported has been decided
	// (a front end that summarises many boundaries flushes here).
	KindReviewed Kind = "reviewed"
	// KindPersisted: what the persistence rules did after an attempt
	// written straight to the workspace (Persisted, Workspace).
	KindPersisted Kind = "persisted"
	// KindRetrying: every boundary was allowed; the same command runs
	// again with exactly Exceptions. Discarded says the attempt's changes
	// were dropped (its output, already shown, came to nothing).
	KindRetrying Kind = "retrying"
	// KindHeld: every boundary was allowed, and the front end drives
	// the retry: the attempt is held, uncommitted, for a run that
	// presents its grants (Report.Retry).
	KindHeld Kind = "held"
	// KindNotRetrying: a retry was possible but does not happen (Reason).
	KindNotRetrying Kind = "not_retrying"
	// KindTimedOut: the timeout ended every process of the command
	// (Reason says after how long).
	KindTimedOut Kind = "timed_out"
	// KindLimit: the command ran into a resource limit (Limit).
	KindLimit Kind = "limit"
	// KindCommitted: the final attempt's layer was committed (Commit,
	// Workspace): what was refused, skipped, in conflict or changed.
	KindCommitted Kind = "committed"
	// KindWarning: something the person should know (Reason).
	KindWarning Kind = "warning"
	// KindRefused: the command of a run that failed was refused something
	// the sandbox refuses by design (Refused), which nothing can grant;
	// once per class per run, after the last attempt.
	KindRefused Kind = "refused"
	// KindQuestionWaiting: a question for a person waits on the daemon's
	// approvals page (Reason: until when); the front end may notify its
	// person. Never the page's link.
	KindQuestionWaiting Kind = "question_waiting"
)

// Event is one step of a run. Every text in it is safe to show (names
// the command chose are not escaped here: a terminal front end escapes
// them).
type Event struct {
	Kind    Kind `json:"kind"`
	Attempt int  `json:"attempt,omitempty"`
	// Workspace is the run's workspace: Persisted and Commit paths are
	// relative to it.
	Workspace  string              `json:"workspace,omitempty"`
	Boundary   *Boundary           `json:"boundary,omitempty"`
	Exceptions []string            `json:"exceptions,omitempty"`
	Discarded  bool                `json:"discarded,omitempty"`
	Reason     string              `json:"reason,omitempty"`
	Persisted  []sandbox.Persisted `json:"persisted,omitempty"`
	Commit     *layer.Outcome      `json:"commit,omitempty"`
	Recovered  *layer.Recovered    `json:"recovered,omitempty"`
	Limit      *sandbox.LimitHit   `json:"limit,omitempty"`
	Refused    *sandbox.Refused    `json:"refused,omitempty"`
	// EndedAtLimit (Committed): the committed attempt ended at a limit;
	// Writing are the files it had open for writing then (workspace
	// paths), which may be cut short.
	EndedAtLimit []string `json:"ended_at_limit,omitempty"`
	Writing      []string `json:"writing,omitempty"`
}

// Discard is Events that hears nothing.
type Discard struct{}

// Event does nothing.
func (Discard) Event(Event) {}
