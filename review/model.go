package review

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/publicerr"
)

// Completion is a model's answer to one prompt.
type Completion struct {
	Content                        string
	PromptTokens, CompletionTokens int64
}

// Completer sends one prompt to a model (review/openai in production, a
// fake in tests). validate is applied to each answer; one it rejects is
// asked again within ctx's deadline, and the last error returned.
type Completer interface {
	Complete(ctx context.Context, system, user string, validate func(content string) error) (Completion, error)
}

// DefaultModelTimeout bounds one review, every retry included.
const DefaultModelTimeout = 30 * time.Second

// Model is the model reviewer: it shows a model the exact boundary, the
// user's request and static evidence, every value redacted and bounded,
// and turns a strictly parsed, consistent verdict into a decision. It
// never grants: the broker does, after hard denies and rules. Every
// fault is an error, which the broker turns into a deny with source
// error (or a question to a person when one is reachable).
type Model struct {
	Client Completer
	// Timeout bounds one review (0: DefaultModelTimeout); a held
	// connection's review also ends a second before the proxy's hold.
	Timeout time.Duration
	// MaxInputTokens is the prompt budget (0: 8192).
	MaxInputTokens int
	Redactor       *Redactor
	// Meter, if set, enforces the caps on calls and tokens.
	Meter *Meter
	// Denied says which paths inspection never reads, nor asks the view
	// about (secrets).
	Denied func(path string) bool
	// OpenView starts a view of the command, through which its scripts
	// are read (see InspectScripts); nil when the command is not run in
	// a sandbox: then no script is read at all.
	OpenView func(ctx context.Context) (View, error)
	// Earlier and Recent are the job's evidence: the user's earlier
	// messages and the agent's recent commands, oldest first.
	Earlier, Recent []string
	// Stated is the agent's own account of why it runs the command,
	// shown as such: never as the user's request.
	Stated string
	Log    *slog.Logger
	Stats  ModelStats
	// Observe, if set, hears each review when it ends (the daemon's
	// metrics).
	Observe func(Observation)

	// mu guards inspected: one inspection per command, working directory
	// and attempt, shared by the reviews of that attempt's boundaries.
	mu        sync.Mutex
	inspected map[inspectKey]*inspection
}

// inspectKey names what an inspection read: the attempt's command in
// its working directory (a later attempt reads again).
type inspectKey struct {
	command, cwd string
	attempt      int
}

// inspection is one InspectScripts, done once done is closed.
type inspection struct {
	done    chan struct{}
	scripts []Script
	skipped []string
}

// ModelStats are counters for the metrics issue.
type ModelStats struct {
	Reviews, Allows, Denies, Faults atomic.Int64
	TokensIn, TokensOut             atomic.Int64
	// LatencyNS is the sum of review latencies.
	LatencyNS atomic.Int64
}

// Observation is one review as Observe hears it.
type Observation struct {
	Took                time.Duration
	TokensIn, TokensOut int64
	// Fault is the class of a review that failed (FaultClass), "" for
	// one that answered.
	Fault string
}

// Fault classes of a review that failed before or without the client:
// its caps, its input budget, or a cause of no known class.
const (
	FaultCapped = "capped"
	FaultBudget = "budget"
	FaultOther  = "other"
)

// FaultClass is the class of a review's failure: the client's own class
// (review/openai's, when its fault says one), capped, budget, timeout, or
// other. The set is bounded: it labels counters.
func FaultClass(err error) string {
	var classed interface{ FaultClass() string }
	switch {
	case errors.Is(err, ErrCapped):
		return FaultCapped
	case errors.Is(err, ErrBudget):
		return FaultBudget
	case errors.As(err, &classed) && classed.FaultClass() != "":
		return classed.FaultClass()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "timeout"
	}
	return FaultOther
}

// Review reviews req.
func (m *Model) Review(ctx context.Context, req grants.Request) (broker.Decision, error) {
	start := time.Now()
	m.Stats.Reviews.Add(1)
	d, use, err := m.review(ctx, req)
	took := time.Since(start)
	m.Stats.LatencyNS.Add(int64(took))
	if m.Observe != nil {
		o := Observation{Took: took, TokensIn: use.PromptTokens, TokensOut: use.CompletionTokens}
		if err != nil {
			o.Fault = FaultClass(err)
		}
		m.Observe(o)
	}
	switch {
	case err != nil:
		m.Stats.Faults.Add(1)
		m.log().Debug("model review failed", "err", err)
	case d.Outcome == broker.Allow:
		m.Stats.Allows.Add(1)
	default:
		m.Stats.Denies.Add(1)
	}
	return d, err
}

func (m *Model) review(ctx context.Context, req grants.Request) (broker.Decision, Completion, error) {
	ctx, cancel := m.deadline(ctx, req)
	defer cancel()
	ev := Evidence{Intent: req.Intent, Stated: m.Stated, Earlier: m.Earlier, Recent: m.Recent}
	if (m.Denied != nil || m.OpenView != nil) && req.Command != "" {
		ev.Scripts, ev.Skipped = m.inspect(ctx, req)
	}
	max := m.MaxInputTokens
	if max <= 0 {
		max = 8192
	}
	red := m.Redactor
	if red == nil {
		red = NewRedactor(nil)
	}
	p, err := BuildPrompt(req, ev, red, max)
	if err != nil {
		return broker.Decision{}, Completion{}, publicerr.Wrap(err, "the request is too large for the model reviewer's input budget")
	}
	var reservation int64
	if m.Meter != nil {
		if reservation, err = m.Meter.Reserve(req.Session, int64(p.Tokens)); err != nil {
			if errors.Is(err, ErrCapped) {
				return broker.Decision{}, Completion{}, publicerr.Wrap(err, capWhy(err))
			}
			return broker.Decision{}, Completion{}, publicerr.Wrap(err, "the model reviewer's usage could not be counted")
		}
	}
	var verdict broker.Decision
	c, err := m.Client.Complete(ctx, p.System, p.User, func(content string) error {
		v, err := ParseVerdict(content)
		verdict = v
		return err
	})
	m.Stats.TokensIn.Add(c.PromptTokens)
	m.Stats.TokensOut.Add(c.CompletionTokens)
	if m.Meter != nil {
		m.Meter.Spend(req.Session, reservation, c.PromptTokens+c.CompletionTokens-int64(p.Tokens))
	}
	if err != nil {
		return broker.Decision{}, c, err
	}
	verdict.Source = broker.SourceReviewer
	if req.Intent == "" && (verdict.UserAuthorization == broker.AuthMedium || verdict.UserAuthorization == broker.AuthHigh) {
		// Without the user's own words nothing can show their
		// authorization: an agent's account of it is not one.
		verdict.UserAuthorization = broker.AuthLow
	}
	return verdict, c, nil
}

// inspect reads the scripts req's command invokes, once per attempt:
// the reviews of one attempt's boundaries, side by side or not, share
// one inspection (and one view of the command). A review whose context
// ends first goes on without the scripts; an inspection cut short that
// way is not kept.
func (m *Model) inspect(ctx context.Context, req grants.Request) ([]Script, []string) {
	key := inspectKey{req.Command, req.Cwd, req.Attempt}
	m.mu.Lock()
	if m.inspected == nil {
		m.inspected = map[inspectKey]*inspection{}
	}
	in, ok := m.inspected[key]
	if !ok {
		in = &inspection{done: make(chan struct{})}
		m.inspected[key] = in
	}
	m.mu.Unlock()
	if ok {
		select {
		case <-in.done:
			return in.scripts, in.skipped
		case <-ctx.Done():
			return nil, []string{"scripts: not read before the review's deadline"}
		}
	}
	denied := m.Denied
	if denied == nil {
		denied = func(string) bool { return false }
	}
	var open func() (View, error)
	if m.OpenView != nil {
		open = func() (View, error) { return m.OpenView(ctx) }
	}
	in.scripts, in.skipped = InspectScripts(req.Command, req.Cwd, denied, open)
	if ctx.Err() != nil {
		m.mu.Lock()
		delete(m.inspected, key)
		m.mu.Unlock()
	}
	close(in.done)
	return in.scripts, in.skipped
}

// deadline is the review's: Timeout from now, and for a held connection
// a second before the proxy gives up on it.
func (m *Model) deadline(ctx context.Context, req grants.Request) (context.Context, context.CancelFunc) {
	t := m.Timeout
	if t <= 0 {
		t = DefaultModelTimeout
	}
	end := time.Now().Add(t)
	if dl, ok := ctx.Deadline(); ok && req.Held && dl.Add(-time.Second).Before(end) {
		end = dl.Add(-time.Second)
	}
	return context.WithDeadline(ctx, end)
}

// capWhy is the sentence of a cap Reserve refused with: which cap.
func capWhy(err error) string {
	if why, ok := strings.CutPrefix(err.Error(), ErrCapped.Error()+": "); ok && why != "" {
		return why
	}
	return "the model reviewer's cap is reached"
}

func (m *Model) log() *slog.Logger {
	if m.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Log
}

// Room reports whether n reviews in session fit the caps together, each
// at the input budget's full size: only then may they run side by side
// (broker.DecideEach), so that which of them a cap stops never depends on
// which was faster.
func (m *Model) Room(session string, n int) bool {
	if m.Meter == nil {
		return true
	}
	max := m.MaxInputTokens
	if max <= 0 {
		max = 8192
	}
	return m.Meter.Room(session, int64(n), int64(max)+4096)
}

// Usage reports this reviewer's reviews and tokens so far.
func (m *Model) Usage() (reviews, faults, tokensIn, tokensOut int64) {
	return m.Stats.Reviews.Load(), m.Stats.Faults.Load(), m.Stats.TokensIn.Load(), m.Stats.TokensOut.Load()
}

// String names the reviewer in logs.
func (m *Model) String() string { return fmt.Sprintf("model reviewer (timeout %v)", m.Timeout) }
