package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/credstore"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/netproxy"
	"github.com/sandboxd/sandboxd/persist"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox"
)

// ExitSandboxd is the exit status when sandboxd itself failed
// (docs/ARCHITECTURE.md §3.1); 124, 126 and 127 come from the sandbox.
const ExitSandboxd = 125

// Sandbox runs one attempt. during decides a boundary met while the
// attempt runs (a connection the proxy holds); it is safe to call from
// any goroutine until Run returns.
type Sandbox interface {
	Run(ctx context.Context, spec sandbox.Spec, during During, log *slog.Logger) (sandbox.Result, error)
}

// During decides a boundary while its attempt runs: the decision is
// final, recorded in the report as held, and neither triggers nor blocks
// a retry. An allow's grant is consumed by the caller (the proxy).
type During func(ctx context.Context, d sandbox.Denial) broker.Result

// Real is the kernel sandbox.
type Real struct {
	// Audit is the reader of kernel audit records the runs share (nil:
	// each run reads its own).
	Audit *sandbox.AuditHub
	// Ready holds helpers started in advance (nil: each run starts its
	// own).
	Ready *sandbox.ReadyHelpers
	// Filters keeps the compiled seccomp programs the runs share (nil:
	// each run reads the caller's cache).
	Filters *sandbox.Filters
	// Helper is the separate helper binary every run executes
	// (sandbox.Spec.Helper; nil: the process's own executable).
	Helper *os.File
	// Releases takes over each run's release once its command has ended
	// (sandbox.Spec.Releases; nil: each run releases before it returns).
	Releases *sandbox.Releases
}

// Run runs spec with sandbox.Run, with the shared audit reader and the
// helper binary unless spec names its own.
func (r Real) Run(ctx context.Context, spec sandbox.Spec, _ During, log *slog.Logger) (sandbox.Result, error) {
	if spec.Audit == nil {
		spec.Audit = r.Audit
	}
	if spec.Ready == nil {
		spec.Ready = r.Ready
	}
	if spec.Filters == nil {
		spec.Filters = r.Filters
	}
	if spec.Helper == nil {
		spec.Helper = r.Helper
	}
	if spec.Releases == nil {
		spec.Releases = r.Releases
	}
	return sandbox.Run(ctx, spec, log)
}

// Config is what a Runner is built from.
type Config struct {
	// Sandbox runs attempts (nil: Real, with one reader of kernel audit
	// that the Runner's concurrent runs share, each given only the
	// records of its own Landlock domain).
	Sandbox Sandbox
	// Ready holds the sandbox helpers started in advance, for Real (a
	// daemon's; nil: none).
	Ready *sandbox.ReadyHelpers
	// Grants holds issued grants (nil: a store of the Runner's own).
	Grants *grants.Store
	// Auditor records every decision and grant event (nil: none).
	Auditor broker.Auditor
	// AuditLog opens the audit log's recorder for a caller's run (nil:
	// no audit log). Its records come before the Auditor's, and one it
	// cannot take denies what it would have allowed.
	AuditLog AuditFactory
	// Reserved are sandboxd's own listeners (the daemon's, metrics, the
	// approvals page): no run's proxy, resolver or model reviewer
	// connects to them, whatever the rules say, at any of the host's
	// own addresses (ownListener).
	Reserved []netip.AddrPort
	// Hidden are sandboxd's own paths outside the caller's directories
	// (the daemon's socket directory, where the callers' tokens are): no
	// run may read them, whatever the rules say; a boundary there is a
	// hard deny.
	Hidden []string
	// Models builds the model reviewer a job's policy configures (nil: no
	// model reviewer can be reached).
	Models ModelFactory
	// EvidenceReader is the command that runs the evidence reader inside
	// a sandbox (cmd/sandboxd: itself, with evidence.ReaderArg): the
	// model reviewer reads a command's scripts only through it, as the
	// command sees them. Nil: it reads none.
	EvidenceReader []string
	Log            *slog.Logger
	// MaxHeld and MaxHeldBytes bound the attempts held for one caller's
	// retries (Job.Hold), and the bytes their layers hold together (0:
	// DefaultMaxHeld, DefaultMaxHeldBytes).
	MaxHeld      int
	MaxHeldBytes int64
	// MachinePolicy is the machine's policy, which every caller's own
	// policy and workspace policies only tighten (policy.LoadUnder);
	// MachineReviewer the model reviewer the machine's operator sets for
	// a uid (reviewer.go). The daemon's machine configuration sets them;
	// nil: none (embedded runs have none: the caller is the operator).
	MachinePolicy   *policy.Machine
	MachineReviewer func(uid int) (MachineModel, bool)
	// CrashAt names a commit failpoint at which the process kills itself
	// (layer.Options.CrashAt): crash tests only. It is the process's
	// own setting, never a request's: only cmd/sandboxd built with the
	// failpoints tag sets it.
	CrashAt string
	// Commits records each commit while it is in flight (nil: none; a
	// caller's next run recovers an interrupted commit of its own).
	Commits Commits
	// Helper is the separate helper binary Real runs execute (nil: the
	// process's own executable); cmd/sandboxd finds and checks it.
	Helper *os.File
	// Audit is the reader of kernel audit Real runs share (nil: one of
	// the Runner's own).
	Audit *sandbox.AuditHub
	// PrepareHelper has Real start each run's helper (in Ready, which
	// must be set) as soon as its plan knows the caller and the policy,
	// so that the helper's start overlaps the rest of the plan: for a
	// process that serves one run (sandboxd run without a daemon), whose
	// pool is never refilled. A daemon's pool is filled after its runs
	// instead.
	PrepareHelper bool
	// Filters keeps the compiled seccomp programs Real runs share (nil:
	// sandbox.NewFilters, which may take a program from the caller's own
	// cache: right for a process that serves one caller; a daemon passes
	// sandbox.NewSharedFilters).
	Filters *sandbox.Filters
	// Releases takes over the release of Real runs' kernel objects
	// once their command has ended, after the attempt returned (a
	// process that serves many runs: its owner closes it, which waits
	// for them; nil: each attempt releases before it returns).
	Releases *sandbox.Releases
}

// Runner runs jobs. It is safe for concurrent use.
type Runner struct {
	sandbox  Sandbox
	grants   *grants.Store
	auditor  broker.Auditor
	auditLog AuditFactory
	reserved func(netip.AddrPort) bool
	hidden   []string
	models   ModelFactory
	reader   []string
	crashAt  string
	commits  Commits
	log      *slog.Logger
	// machine and machineModel are Config's MachinePolicy and
	// MachineReviewer.
	machine      *policy.Machine
	machineModel func(uid int) (MachineModel, bool)
	// held are the runs parked for a front end's retry (held.go).
	held heldSet
	// indexes keeps the callers' credential scan indexes decoded, each
	// for the uid that read it (credstore.IndexCache).
	indexes *credstore.IndexCache
	// policies keeps the callers' policy files parsed, each for the uid
	// that read it (policy.Cache).
	policies *policy.Cache
	// builtinNames matches the built-in persistence names (a fixed
	// list, indexed once; read only).
	builtinNames *persist.Matcher
	// prepare starts a run's helper early (Config.PrepareHelper; nil:
	// the run starts its own): the launch's spec, and whether the run
	// captures direct connects.
	prepare func(spec sandbox.Spec, capture bool)
}

// New returns a Runner.
func New(cfg Config) *Runner {
	r := &Runner{sandbox: cfg.Sandbox, grants: cfg.Grants, auditor: cfg.Auditor, auditLog: cfg.AuditLog, log: logger(cfg.Log),
		reserved: ownListener(cfg.Reserved), models: cfg.Models,
		reader: slices.Clone(cfg.EvidenceReader), crashAt: cfg.CrashAt, hidden: slices.Clone(cfg.Hidden),
		commits: cfg.Commits, machine: cfg.MachinePolicy, machineModel: cfg.MachineReviewer,
		indexes: credstore.NewIndexCache(), policies: policy.NewCache(), builtinNames: persist.NewMatcher(persist.Builtin())}
	if r.sandbox == nil {
		hub := cfg.Audit
		if hub == nil {
			hub = sandbox.NewAuditHub(r.log)
		}
		filters := cfg.Filters
		if filters == nil {
			filters = sandbox.NewFilters()
		}
		r.sandbox = Real{Audit: hub, Ready: cfg.Ready, Filters: filters, Helper: cfg.Helper, Releases: cfg.Releases}
		if cfg.PrepareHelper && cfg.Ready != nil {
			r.prepare = func(spec sandbox.Spec, capture bool) {
				spec.Helper = cfg.Helper
				cfg.Ready.Prepare(spec, capture)
			}
		}
	}
	if r.grants == nil {
		r.grants = grants.NewStore()
	}
	r.held.max, r.held.maxB = cfg.MaxHeld, cfg.MaxHeldBytes
	if r.held.max <= 0 {
		r.held.max = DefaultMaxHeld
	}
	if r.held.maxB <= 0 {
		r.held.maxB = DefaultMaxHeldBytes
	}
	return r
}

// run is one Run's state.
type run struct {
	r      *Runner
	t0     time.Time // when Run began (mark)
	ctx    context.Context
	caller Caller
	job    Job
	ev     Events
	plan   *plan
	// mu guards rep.Boundaries, which held decisions append to from the
	// proxy's goroutines while an attempt runs.
	mu  sync.Mutex
	rep *Report
	// pending is the latest attempt's layer: dropped when a retry ran,
	// committed when no retry follows.
	pending *sandbox.Layer
	attempt int
	// unused are grants issued in the last review that no retry consumed.
	unused []string
	// decided holds the boundaries this run has had decided (by their
	// boundary.Key, under mu): the breaker counts each once.
	decided map[boundary.Key]bool
	// netGrants are the network grants issued for this run (under mu),
	// revoked when it ends.
	netGrants []string
	// netAllowed are the destinations the policy allowed (under mu): no
	// boundary, listed in the report's egress.
	netAllowed []AllowedDest
	// netReviews and netReviewWait count the destinations a reviewer
	// answered and how long their connections waited (under mu).
	netReviews    int64
	netReviewWait time.Duration
	// offered are the grants a held retry waits on (Job.Hold): while
	// set, the run is parked in the Runner's held set with its layer,
	// which holds heldBytes.
	offered   []allowed
	heldBytes int64
}

// Run runs job for caller and returns its report. An error means
// sandboxd itself failed: the report then has exit status 125 and the
// error's public sentence, and the error carries the cause for the log.
// A job that presents held grants (Job.Present) continues the held
// attempt they were offered for instead (see held.go).
func (r *Runner) Run(ctx context.Context, c Caller, job Job, ev Events) (*Report, error) {
	if ev == nil {
		ev = Discard{}
	}
	if len(job.Present) > 0 {
		return r.resume(ctx, c, job, ev)
	}
	st := &run{r: r, t0: time.Now(), ctx: ctx, caller: c, job: job, ev: ev,
		rep: &Report{Boundaries: []Boundary{}, Session: job.Session, Command: job.Argv}}
	rep, err := st.start()
	defer st.mark("run returned")
	return r.settle(st, rep, err)
}

// start plans the run and runs its attempts.
func (st *run) start() (*Report, error) {
	defer st.closePending()
	p, err := st.r.newPlan(st.ctx, st.caller, st.job)
	st.mark("planned")
	if p != nil {
		st.rep.Workspace, st.rep.WorkspaceFrom, st.rep.WorkspaceNote = p.ws, p.wsFrom, p.wsNote
		st.rep.CredentialScan = p.storesNote
		st.r.log.Info("workspace", "root", p.ws, "from", p.wsFrom, "cwd", p.cwd, "note", p.wsNote)
	}
	if err != nil {
		return st.failed(err)
	}
	st.plan = p
	st.rep.Reviewer = &p.reviewer
	return st.execute(func() error {
		st.rep.Transaction = &Transaction{Mode: "none"}
		// A commit a crash interrupted is finished (or rolled back)
		// before anything new runs.
		st.rep.Transaction.Recovered = st.recover()
		st.mark("journal checked")
		return st.attempts(nil)
	})
}

// execute runs body, which runs attempts, with the run's cache marked in
// use and its egress proxy serving them.
func (st *run) execute(body func() error) (*Report, error) {
	defer st.useCache()()
	// Deferred before the proxy's end, so they run after it: every
	// decision is final by then.
	defer st.auditFailures()
	defer st.suggestRules()
	if e := st.plan.spec.Egress; e != nil {
		px, err := st.newProxy()
		if err != nil {
			return st.failed(err)
		}
		e.Serve = func(ctx context.Context, ln net.Listener, inside sandbox.Dialer) error {
			return px.Serve(ctx, ln, netproxy.Dialer(inside))
		}
		e.SOCKS = func(ctx context.Context, ln net.Listener, inside sandbox.Dialer) error {
			return px.ServeSOCKS(ctx, ln, netproxy.Dialer(inside))
		}
		if st.plan.policy.Network.Capture {
			e.Capture = func(ctx context.Context, ln net.Listener, inside sandbox.Dialer) error {
				return px.ServeCapture(ctx, ln, netproxy.Dialer(inside))
			}
			e.DNS = px.ServeDNS
		}
		defer st.endEgress(px)
		st.mark("proxy made")
	}
	var toldWatch sync.Once
	st.plan.spec.OnWatch = func() { toldWatch.Do(st.tellWatch) }
	err := body()
	st.noteReviewer()
	if err != nil {
		return st.failed(err)
	}
	return st.rep, nil
}

// closePending closes the latest attempt's layer, unless a held retry
// keeps it.
func (st *run) closePending() {
	if st.offered == nil {
		st.pending.Close()
		st.pending = nil
	}
}

// watchNotice is told, once per run, to a command that watches files
// behind the copy-on-write layer.
const watchNotice = "this command watches files. Behind the copy-on-write layer (the default) its writes reach the workspace only when it exits, and its watchers do not see edits made outside the sandbox meanwhile. For a dev server or a watcher, run it with --no-transaction, or list it in your own policy: [transaction] no_transaction = [\"PATTERN\"]"

// tellWatch tells the person that the command watches files (called
// from the sandbox's observer while the attempt runs).
func (st *run) tellWatch() {
	st.ev.Event(Event{Kind: KindWarning, Attempt: st.attempt, Reason: watchNotice})
	st.mu.Lock()
	st.rep.Watched = true
	st.mu.Unlock()
}

// failed ends a run sandboxd could not complete.
func (st *run) failed(err error) (*Report, error) {
	st.rep.ExitCode = ExitSandboxd
	st.rep.Error = Public(err)
	if internal := publicerr.Internal(err); internal != st.rep.Error {
		// The cause the public sentence stands for, or the whole error
		// when it has none: for -v, never for the report.
		st.r.log.Debug("sandboxd failed", "err", internal)
	}
	return st.rep, err
}

// Public is the sentence a front end shows for a run's error: its public
// message, or a fixed one when it has none (the cause is in the log).
func Public(err error) string {
	return publicerr.Message(err, "sandboxd could not run the command because of an internal error (run with -v to log the cause)")
}

// attempts runs the command until no retry follows, then commits.
// consumed are the boundaries whose grants the next attempt uses (a
// resumed run's); st.attempt is the attempt before it.
func (st *run) attempts(consumed []int) error {
	for st.attempt++; ; st.attempt++ {
		out, err := st.r.sandbox.Run(st.ctx, st.plan.spec, st.during, st.r.log)
		st.mark("attempt returned")
		if err != nil && out.Layer != nil {
			// sandboxd failed during the attempt: what it wrote is
			// nobody's to commit.
			out.Layer.Close()
			out.Layer = nil
		}
		st.keepLayer(out)
		if why := grantRefused(err); why != "" {
			// Between the review and the retry the object changed, or
			// the grant asks what a retry cannot give: nothing is
			// retried, and the attempt before stands.
			st.staleGrants(consumed, why)
			break
		}
		st.noteIsolation(out)
		if err != nil {
			// The attempt before this one, if any, is the final one.
			if cerr := st.commit(); cerr != nil {
				err = errors.Join(err, cerr)
			}
			return st.sandboxFailed(err)
		}
		st.rep.SetupMS = float64(out.Setup.Microseconds()) / 1000
		st.noteAttempt(out)
		granted, allAllowed := st.review(out.Denials)
		if !allAllowed || st.attempt > st.job.Retries {
			break
		}
		if st.job.Hold {
			if st.offer(granted) {
				return nil // the layer waits for the front end's retry
			}
			break
		}
		var ok bool
		if consumed, ok = st.consume(granted); !ok {
			break
		}
	}
	return st.finish()
}

// finish ends a run no retry follows: what it was refused is told, the
// grants no retry used are revoked, and the final layer is committed.
func (st *run) finish() error {
	st.tellRefused()
	st.revokeUnused()
	defer st.mark("committed")
	return st.commit()
}

// grantRefused says why a retry's grants could not be applied (the
// sandbox refused them before the command started), or "".
func grantRefused(err error) string {
	switch {
	case errors.Is(err, sandbox.ErrGrantStale):
		return staleReason
	case errors.Is(err, sandbox.ErrGrantTooLarge):
		return tooLargeReason
	case errors.Is(err, sandbox.ErrGrantBeyondCaller):
		return beyondCallerReason
	}
	return ""
}

// sandboxFailed gives a sandbox error its public sentence. A run an
// agent asked for that cannot have namespaces, or finds sandboxd's own
// state read-only, is most often inside the agent's own sandbox (Codex's
// read-only and workspace-write modes, Claude Code's sandbox): the
// sentence says so.
func (st *run) sandboxFailed(err error) error {
	hint := ""
	if st.job.Agent != "" && st.job.Agent != "cli" {
		hint = "; if " + st.job.Agent + "'s own sandbox is on, turn it off: sandboxd is the sandbox (sandboxd hook install " + st.job.Agent + " sets it)"
	}
	switch {
	case errors.Is(err, sandbox.ErrNoIsolation) && st.plan.policy.Isolation == string(sandbox.Namespaces):
		return publicerr.Wrap(err, Public(err)+`; refusing to run without isolation (--require-isolation or isolation = "namespaces")`+hint)
	case errors.Is(err, syscall.EROFS) && hint != "":
		return publicerr.Wrap(err, Public(err)+hint)
	}
	return err
}

// sweepExposed is what a run written straight to the workspace cannot
// guard (the report's transaction.exposed).
const sweepExposed = "protected names that did not exist when the run started are checked only after the command exits: until the sweep, a program on the host (a shell entering the directory, an editor, an agent) may run one the command created, and if sandboxd itself is killed (SIGKILL) before then, nothing sweeps"

// keepLayer makes an attempt's layer the pending one.
func (st *run) keepLayer(out sandbox.Result) {
	if out.Layer != nil {
		if st.pending != nil {
			st.pending.Close()
			st.rep.Transaction.Discarded++
		}
		st.pending = out.Layer
	}
	if out.Transaction.Mode != "" {
		st.rep.Transaction.Mode, st.rep.Transaction.Why = out.Transaction.Mode, out.Transaction.Why
		if pat := st.plan.directBy; pat != "" && out.Transaction.Mode == "none" {
			st.rep.Transaction.Why = fmt.Sprintf("turned off by your policy's transaction.no_transaction entry %q", pat)
		}
		st.rep.Transaction.PersistenceGuard, st.rep.Transaction.Exposed = "commit", ""
		if out.Transaction.Mode == "layer" {
			st.rep.Transaction.LayerSize = st.plan.spec.LayerSize
		} else {
			st.rep.Transaction.PersistenceGuard, st.rep.Transaction.Exposed = "sweep", sweepExposed
		}
	}
}

// noteIsolation records how the attempt was contained.
func (st *run) noteIsolation(out sandbox.Result) {
	st.rep.LandlockABI = out.LandlockABI
	st.rep.Isolation, st.rep.NetworkMode = string(out.Isolation), string(out.NetworkMode)
	st.rep.Degraded, st.rep.Containment = out.Degraded, out.Containment
	st.rep.Caches = out.Caches
	if out.Egress != "" {
		if st.rep.Egress == nil {
			st.rep.Egress = &Egress{}
		}
		st.rep.Egress.Mode, st.rep.Egress.Why = out.Egress, out.EgressWhy
		st.rep.Egress.Capture, st.rep.Egress.CaptureWhy = out.Capture, out.CaptureWhy
		if out.Egress == "proxy" && !st.plan.policy.Network.Capture {
			st.rep.Egress.Capture, st.rep.Egress.CaptureWhy = "off", "turned off (network.capture = false)"
		}
	}
}

// noteAttempt records an attempt's outcome and tells the front end what
// it should know about it.
func (st *run) noteAttempt(out sandbox.Result) {
	st.rep.Attempts = st.attempt
	if st.attempt == 1 && out.Isolation == sandbox.LandlockOnly {
		st.warn("isolation is landlock-only: " + strings.Join(out.Degraded, "; "))
	}
	if len(out.Persistence) > 0 {
		st.ev.Event(Event{Kind: KindPersisted, Attempt: st.attempt, Workspace: st.plan.ws, Persisted: out.Persistence})
	}
	st.rep.ExitCode, st.rep.TimedOut, st.rep.Signal = out.ExitCode, out.TimedOut, out.Signal
	st.rep.Persistence = append(st.rep.Persistence, out.Persistence...)
	det := out.Detection
	st.rep.Detection = &det
	if out.Detection.Lost != 0 {
		st.warn("some denials may not have been seen (" + out.Detection.Why + ")")
		st.plan.audit.lost(st.ctx, st.plan.session, strings.Join(st.job.Argv, " "), out.Detection.Lost)
	}
	if out.TimedOut {
		st.ev.Event(Event{Kind: KindTimedOut, Attempt: st.attempt, Reason: st.job.Timeout.String()})
	}
	st.rep.Limits = out.Limits
	st.rep.Refused = addRefused(st.rep.Refused, out.Refused)
	for _, w := range out.Warnings {
		st.warn(w)
	}
	for i := range out.Limits {
		st.ev.Event(Event{Kind: KindLimit, Attempt: st.attempt, Limit: &out.Limits[i]})
	}
}

// mark logs a phase of the run for -v (sandbox.LogPhase).
func (st *run) mark(what string) { sandbox.LogPhase(st.r.log, "session", what, st.t0) }

// auditFailures reports the records the audit log could not take.
func (st *run) auditFailures() {
	n := st.plan.audit.failures()
	if n == 0 {
		return
	}
	st.rep.AuditFailures = n
	st.warn(fmt.Sprintf("%d records could not be written to the audit log; what they would have allowed was denied", n))
}

func (st *run) warn(msg string) {
	st.ev.Event(Event{Kind: KindWarning, Attempt: st.attempt, Reason: msg})
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
