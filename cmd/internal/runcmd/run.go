package runcmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/sandboxd/sandboxd/cmd/internal/daemonrun"
	"github.com/sandboxd/sandboxd/daemon/client"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/runflags"
	"github.com/sandboxd/sandboxd/runtext"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/termfilter"
)

// ExitSandboxd is the status when sandboxd itself fails
// (docs/ARCHITECTURE.md §3.1); 124, 126 and 127 come from the sandbox.
const ExitSandboxd = session.ExitSandboxd

// exitSandboxd is ExitSandboxd, as the rest of this package names it.
const exitSandboxd = ExitSandboxd

// esc shows a string that may come from the command (a path, a host, a
// rationale quoting one) without letting it control the terminal.
func esc(s string) string { return termfilter.Escape(s) }

const runUsage = `Usage:
  sandboxd run [flags] -- COMMAND [ARG...]
  sandboxd run [flags] -c 'shell command'

Run COMMAND, or the shell command with bash -c, in the sandbox.

Exit status: the command's own; 124 when --timeout fired; 125 when
sandboxd itself failed, cannot enforce the policy or cannot make sense of
its command line; 126/127 when the command is not executable / not
found; 128+N when it was killed by signal N.
`

// runFlags are the flags of `sandboxd run` (package runflags: the lean
// front parses them alike).
type runFlags = runflags.Flags

// parseRunFlags parses run's command line into its flags and the
// command's argv. When -h asks for help it writes run's usage to help
// and returns flag.ErrHelp.
func parseRunFlags(args []string, help io.Writer) (*runFlags, []string, error) {
	f, argv, fs, err := runflags.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(help, WithFlags(runUsage, fs))
	}
	return f, argv, err
}

// Options are what the program taking a run supplies: what differs
// between the core (cmd/sandboxd) and the lean sandboxd-run.
type Options struct {
	// Models builds the model reviewer a run's policy configures, logging
	// on log: the core's own client in the core, the core reached
	// through a pipe in sandboxd-run (CoreModels).
	Models func(log *slog.Logger) session.ModelFactory
	// EvidenceReader is the command that runs the reviewer's evidence
	// reader inside a run's sandbox (session.Config.EvidenceReader).
	EvidenceReader []string
	// Helper is the helper an embedded run starts (nil: FindHelper's).
	Helper *HelperChoice
	// Pipes are given to the command as descriptors 3, 4, ...
	// (session.Job.Pipes): the way a front end in this process learns
	// what only the command knows. A run with pipes stays here.
	Pipes []*os.File
}

// Command is sandboxd run (args: its command line, after "run"): through
// the daemon when it is asked for or there, else here, embedded.
func Command(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal, o Options) int {
	pipes := o.Pipes
	f, argv, err := parseRunFlags(args, stdout)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(err.Error())) // a flag's name is the caller's, maybe the command's
		return exitSandboxd
	}
	if f.Daemon && f.NoDaemon {
		fmt.Fprintln(stderr, "sandboxd: --daemon and --no-daemon contradict each other; give one")
		return exitSandboxd
	}
	if f.Daemon {
		return runViaDaemon(ctx, f, argv, getenv, stdin, stdout, stderr, sigs, pipes, nil)
	}
	if c := daemonToUse(ctx, f, getenv, stderr, pipes); c != nil {
		return runViaDaemon(ctx, f, argv, getenv, stdin, stdout, stderr, sigs, pipes, c)
	}
	return embedded(ctx, f, argv, getenv, stdin, stdout, stderr, sigs, o)
}

// embedded is a run done by this process: the session's supervisor.
func embedded(ctx context.Context, f *runFlags, argv []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal, o Options) int {
	var err error
	// stderr is the agent's too: without -v nothing internal is logged
	// there (the public sentences are events), with -v everything is.
	level := slog.LevelError + 4
	if f.Verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	sandbox.LogPhase(log, "cli", "flags parsed", time.Now())
	if f.IntentFile != "" {
		if f.Intent, err = readIntent(f.IntentFile); err != nil {
			fmt.Fprintf(stderr, "sandboxd: %s\n", esc(err.Error()))
			return exitSandboxd
		}
	}
	job := session.Job{
		Argv: argv, Command: f.Command, Workspace: f.Workspace, Policy: f.Policy,
		Session: f.Session, Agent: f.Agent, Intent: f.Intent, Retries: f.Retries, Timeout: f.Timeout, Reviewer: f.Reviewer,
		NoTransaction: f.NoTransaction, NoDetect: f.Detect == "off", RequireIsolation: f.RequireIsolation,
		Stdin: stdin, Stdout: stdout, Stderr: stderr, Signals: sigs, Pipes: o.Pipes,
	}
	var rep *session.Report
	caller, err := CallerOf(getenv)
	if err == nil && f.Reviewer != session.ReviewOff && (f.Reviewer == session.ReviewHuman || daemonrun.TTYReachable()) {
		// A person at the terminal: the reviewer itself (human), or the
		// one asked when the model cannot be (auto, model).
		var stop func()
		if stop, err = humanReviewer(ctx, &job, stdin, stdout, stderr); err == nil {
			defer stop()
		}
	}
	if err == nil {
		helper := o.Helper
		if helper == nil {
			h := FindHelper()
			helper = &h
		}
		helper.Log(log)
		own := OwnAuditLog(caller, log)
		// One helper, started while the plan is finished (never refilled:
		// this process serves one run); the one a run did not claim is
		// stopped with the pool.
		ready := sandbox.NewReadyHelpers(sandbox.ReadyOptions{Max: 1, PerLaunch: 1}, log)
		rep, err = session.New(session.Config{Log: log, Models: o.Models(log), EvidenceReader: o.EvidenceReader,
			CrashAt: CrashAt(getenv), Hidden: HiddenPaths(getenv), Helper: helper.File, AuditLog: OwnRecorders(own),
			Ready: ready, PrepareHelper: true}).Run(ctx, caller, job, runtext.New(stderr))
		ready.Close()
		CloseAudit(own, log)
		suggestOnTerminal(rep, caller.PolicyFile(f.Policy))
	}
	if err != nil {
		if rep == nil {
			rep = &session.Report{ExitCode: exitSandboxd, Boundaries: []session.Boundary{}, Session: f.Session, Command: argv}
			rep.Error = session.Public(err)
			log.Debug("sandboxd failed", "err", publicerr.Internal(err))
		}
		// Errors can carry names the command chose (a path in the layer).
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(rep.Error))
		writeReport(f.Report, rep, stderr)
		return exitSandboxd
	}
	if !writeReport(f.Report, rep, stderr) {
		return exitSandboxd
	}
	return rep.ExitCode
}

// readIntent is the text of an intent file (runflags.ReadIntent).
func readIntent(path string) (string, error) { return runflags.ReadIntent(path) }

// CallerOf describes the user running sandboxd: its ids, environment,
// working directory and umask.
func CallerOf(getenv func(string) string) (session.Caller, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return session.Caller{}, publicerr.Wrap(err, "the current directory is gone or cannot be read; change to one that exists and run it again")
	}
	// getenv has the last word on what describes the caller (a variable
	// it does not set is unset, not empty).
	environ := client.CallerEnv(os.Environ(), getenv)
	c, err := session.NewCaller(os.Getuid(), os.Getgid(), environ, cwd, daemonrun.ReadUmask())
	if err != nil {
		return c, err
	}
	if c.Groups, err = os.Getgroups(); err != nil {
		return c, publicerr.Wrap(err, "sandboxd could not read its user's groups")
	}
	return c, nil
}

// humanReviewer fills the person's slot with the terminal: the command's
// output to it passes through a filter that keeps it from faking or
// hiding a prompt, and while a question is open its output is held back
// and its input (the terminal, relayed) is not read. stop ends the relay.
func humanReviewer(ctx context.Context, job *session.Job, stdin io.Reader, stdout, stderr io.Writer) (stop func(), err error) {
	hold := &termHold{}
	job.Stdout, job.Stderr = hold.filtered(stdout), hold.filtered(stderr)
	stop = func() {}
	if in, ok := stdin.(*os.File); ok && daemonrun.IsTerminal(in) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, publicerr.Wrap(err, "the terminal's input could not be relayed to the command (run with -v to log why)")
		}
		relay := termfilter.NewInput(in, w)
		hold.hs = append(hold.hs, relay)
		ictx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			relay.Run(ictx)
			w.Close()
		}()
		stop = func() { cancel(); <-done; r.Close() }
		job.Stdin = r
	}
	job.Reviewers.Person = &review.Human{Hold: hold}
	return stop, nil
}

// termHold holds the command's terminal output and input while a person
// answers a question.
type termHold struct {
	hs []review.Holder
}

func (t *termHold) Hold() {
	for _, h := range t.hs {
		h.Hold()
	}
}

func (t *termHold) Release() {
	for i := len(t.hs) - 1; i >= 0; i-- {
		t.hs[i].Release()
	}
}

// filtered wraps a terminal in termfilter (and holds it with t); other
// writers pass unchanged.
func (t *termHold) filtered(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && daemonrun.IsTerminal(f) {
		fw := termfilter.New(f)
		t.hs = append(t.hs, fw)
		return fw
	}
	return w
}

// writeReport writes rep to --report's file (path; "" writes none), as
// a run through the daemon writes its report (daemonrun.WriteReport).
func writeReport(path string, rep *session.Report, stderr io.Writer) bool {
	b, _ := json.Marshal(rep)
	return daemonrun.WriteReport(path, b, stderr)
}
