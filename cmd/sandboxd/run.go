package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/envlist"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/termfilter"
	"golang.org/x/sys/unix"
)

// exitSandboxd is the status when sandboxd itself fails
// (docs/ARCHITECTURE.md §3.1); 124, 126 and 127 come from the sandbox.
const exitSandboxd = session.ExitSandboxd

// runFlags are the flags of `sandboxd run`.
type runFlags struct {
	workspace        string
	policy           string
	report           string
	reviewer         string
	intent           string
	intentFile       string
	agent            string
	session          string
	timeout          time.Duration
	retries          int
	requireIsolation bool
	noTransaction    bool
	command          string
	verbose          bool
	detect           string
	daemon           bool
	noDaemon         bool
}

// durationFlag is a duration whose parse error names the fix.
type durationFlag time.Duration

func (d *durationFlag) String() string { return time.Duration(*d).String() }

func (d *durationFlag) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return fmt.Errorf("%q needs a unit: %ss, %sm or %sh", s, s, s, s)
		}
		return fmt.Errorf("%q is not a duration (e.g. 90s, 5m, 1h30m)", s)
	}
	*d = durationFlag(v)
	return nil
}

const runUsage = `Usage:
  sandboxd run [flags] -- COMMAND [ARG...]
  sandboxd run [flags] -c 'shell command'

Run COMMAND, or the shell command with bash -c, in the sandbox.

Exit status: the command's own; 124 when --timeout fired; 125 when
sandboxd itself failed, cannot enforce the policy or cannot make sense of
its command line; 126/127 when the command is not executable / not
found; 128+N when it was killed by signal N.
`

// parseRunFlags parses run's command line into its flags and the
// command's argv. When -h asks for help it writes run's usage to help
// and returns flag.ErrHelp.
func parseRunFlags(args []string, help io.Writer) (*runFlags, []string, error) {
	f := &runFlags{}
	fs := runFlagSet(f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(help, withFlags(runUsage, fs))
		}
		return nil, nil, err
	}
	switch f.reviewer {
	case session.ReviewAuto, session.ReviewOff, session.ReviewHuman, session.ReviewModel:
	default:
		return nil, nil, fmt.Errorf("--reviewer must be auto, model, human or off, not %q", f.reviewer)
	}
	if f.intent != "" && f.intentFile != "" {
		return nil, nil, errors.New("give either --intent or --intent-file, not both")
	}
	if !validAgent(f.agent) {
		return nil, nil, fmt.Errorf("--agent must be 1 to 32 lowercase letters, digits or dashes, not %q", f.agent)
	}
	if f.detect != "auto" && f.detect != "off" {
		return nil, nil, fmt.Errorf("--detect must be auto or off, not %q", f.detect)
	}
	if f.retries < 0 {
		return nil, nil, fmt.Errorf("--retries must not be negative")
	}
	if f.timeout < 0 {
		return nil, nil, fmt.Errorf("--timeout must not be negative")
	}
	argv, err := commandArgv(args, fs, f.command)
	if err != nil {
		return nil, nil, err
	}
	return f, argv, nil
}

// commandArgv is the command run runs, from its parsed command line: -c's
// shell command with bash -c, else what follows the flags. Each mistake
// gets its own sentence.
func commandArgv(args []string, fs *flag.FlagSet, command string) ([]string, error) {
	rest := fs.Args()
	c := false
	fs.Visit(func(f *flag.Flag) { c = c || f.Name == "c" })
	// The flag package drops the "--" that ends the flags. There was one
	// when the arguments before rest end in "--" and parse on their own:
	// a "--" taken as a flag's value (--intent --) leaves that flag
	// without one.
	n := len(args) - len(rest)
	dashes := n > 0 && args[n-1] == "--" && runFlagSet(&runFlags{}).Parse(args[:n-1]) == nil
	switch {
	case !c && len(rest) > 0:
		return rest, nil
	case !c && dashes:
		return nil, errors.New("no command after --: use -- COMMAND [ARG...]")
	case !c:
		return nil, errors.New("no command: use -c 'command' or -- COMMAND [ARG...]")
	case command == "--":
		return nil, errors.New(`-c takes the shell command as its value, not "--": use -c 'command' or -- COMMAND [ARG...]`)
	case command == "":
		return nil, errors.New("-c needs a shell command, not an empty string")
	case len(rest) > 0 && dashes:
		return nil, errors.New("give either -c 'command' or -- COMMAND [ARG...], not both")
	case len(rest) > 0:
		what := "extra argument"
		if len(rest) > 1 {
			what += "s"
		}
		return nil, fmt.Errorf("%s %s after -c 'command': -c takes the whole shell command as one argument (quote it)", what, quoted(rest))
	}
	return []string{"bash", "-c", command}, nil
}

// runFlagSet is run's flags, parsed into f.
func runFlagSet(f *runFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("sandboxd run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.workspace, "workspace", "", "the writable root (default: the top level of the git repository the\n"+
		"current directory is in, else the nearest directory at or above it\n"+
		"holding a .sandboxd.toml, else the current directory; a root that is\n"+
		"not yours, /, a temporary directory, your home or above is passed over)")
	fs.StringVar(&f.policy, "policy", "", "policy file (default: ~/.config/sandboxd/policy.toml)")
	fs.StringVar(&f.report, "report", "", "write a JSON report of the run to this file")
	fs.StringVar(&f.reviewer, "reviewer", "auto", "who reviews boundaries: auto (the model when configured, else a person at the terminal, else off), model, human or off")
	fs.StringVar(&f.intent, "intent", "", "the user's request, evidence for the reviewer")
	fs.StringVar(&f.intentFile, "intent-file", "", "read the user's request from this file (at most 64 KiB), as an agent's hook leaves it")
	fs.StringVar(&f.agent, "agent", "cli", "the agent asking, for the reviewer and the report")
	fs.StringVar(&f.session, "session", "", "session id")
	fs.Var((*durationFlag)(&f.timeout), "timeout", "end the command after this long: a `duration` such as 90s or 5m (exit 124)")
	fs.IntVar(&f.retries, "retries", 2, "automatic retries after granted boundaries")
	fs.BoolVar(&f.requireIsolation, "require-isolation", false, "fail (exit 125) instead of running without namespaces")
	fs.BoolVar(&f.daemon, "daemon", false, "run through the daemon (sandboxd serve; its socket: $SANDBOXD_SOCKET, else "+daemon.DefaultSocket+"), and fail when it cannot be reached (without it or --no-daemon: through the daemon when its socket is there and trusted)")
	fs.BoolVar(&f.noDaemon, "no-daemon", false, "run here, never through the daemon")
	fs.BoolVar(&f.noTransaction, "no-transaction", false, "write straight to the workspace")
	fs.StringVar(&f.detect, "detect", "auto", "boundary detection: auto, or off (denials are enforced but not reported or reviewed)")
	fs.StringVar(&f.command, "c", "", "run this string with bash -c")
	fs.BoolVar(&f.verbose, "v", false, "log what sandboxd does, and the internal cause of any failure, to stderr")
	return fs
}

func runCommand(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	return runWithPipes(ctx, args, getenv, stdin, stdout, stderr, sigs, nil)
}

// runWithPipes is sandboxd run, whose command also gets pipes as
// descriptors 3, 4, ... (session.Job.Pipes): the way a front end in this
// process learns what only the command knows.
func runWithPipes(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal, pipes []*os.File) int {
	f, argv, err := parseRunFlags(args, stdout)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(err.Error())) // a flag's name is the caller's, maybe the command's
		return exitSandboxd
	}
	if f.daemon && f.noDaemon {
		fmt.Fprintln(stderr, "sandboxd: --daemon and --no-daemon contradict each other; give one")
		return exitSandboxd
	}
	if f.daemon {
		return runViaDaemon(ctx, f, argv, getenv, stdin, stdout, stderr, sigs, pipes, nil)
	}
	if c := daemonToUse(ctx, f, getenv, stderr, pipes); c != nil {
		return runViaDaemon(ctx, f, argv, getenv, stdin, stdout, stderr, sigs, pipes, c)
	}
	// stderr is the agent's too: without -v nothing internal is logged
	// there (the public sentences are events), with -v everything is.
	level := slog.LevelError + 4
	if f.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	sandbox.LogPhase(log, "cli", "flags parsed", time.Now())
	if f.intentFile != "" {
		if f.intent, err = readIntent(f.intentFile); err != nil {
			fmt.Fprintf(stderr, "sandboxd: %s\n", esc(err.Error()))
			return exitSandboxd
		}
	}
	job := session.Job{
		Argv: argv, Command: f.command, Workspace: f.workspace, Policy: f.policy,
		Session: f.session, Agent: f.agent, Intent: f.intent, Retries: f.retries, Timeout: f.timeout, Reviewer: f.reviewer,
		NoTransaction: f.noTransaction, NoDetect: f.detect == "off", RequireIsolation: f.requireIsolation,
		Stdin: stdin, Stdout: stdout, Stderr: stderr, Signals: sigs, Pipes: pipes,
	}
	var rep *session.Report
	caller, err := callerOf(getenv)
	if err == nil && f.reviewer != session.ReviewOff && (f.reviewer == session.ReviewHuman || ttyReachable()) {
		// A person at the terminal: the reviewer itself (human), or the
		// one asked when the model cannot be (auto, model).
		var stop func()
		if stop, err = humanReviewer(ctx, &job, stdin, stdout, stderr); err == nil {
			defer stop()
		}
	}
	if err == nil {
		helper := findHelper()
		helper.log(log)
		own := ownAuditLog(caller, log)
		rep, err = session.New(session.Config{Log: log, Models: modelFactory(log, nil), EvidenceReader: evidenceReader(),
			CrashAt: crashAt(getenv), Hidden: hiddenPaths(getenv), Helper: helper.File, AuditLog: ownRecorders(own)}).Run(ctx, caller, job, &stderrEvents{w: stderr})
		closeAudit(own, log)
		suggestOnTerminal(rep, caller.PolicyFile(f.policy))
	}
	if err != nil {
		if rep == nil {
			rep = &session.Report{ExitCode: exitSandboxd, Boundaries: []session.Boundary{}, Session: f.session, Command: argv}
			rep.Error = session.Public(err)
			log.Debug("sandboxd failed", "err", publicerr.Internal(err))
		}
		// Errors can carry names the command chose (a path in the layer).
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(rep.Error))
		writeReport(f.report, rep, stderr)
		return exitSandboxd
	}
	if !writeReport(f.report, rep, stderr) {
		return exitSandboxd
	}
	return rep.ExitCode
}

// maxIntent bounds an intent file: the request is evidence for a model
// whose prompt has a budget, and the file is read whole.
const maxIntent = 64 << 10

// readIntent is the text of an intent file, which must be a regular file
// of at most maxIntent bytes; text that is not UTF-8 is made so.
func readIntent(path string) (string, error) {
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("the intent file %s does not exist", path)
	case errors.Is(err, fs.ErrPermission):
		return "", fmt.Errorf("the intent file %s may not be read", path)
	case err != nil:
		return "", fmt.Errorf("the intent file %s cannot be read", path)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("the intent file %s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxIntent+1))
	switch {
	case err != nil:
		return "", fmt.Errorf("cannot read the intent file: %w", err)
	case len(b) > maxIntent:
		return "", fmt.Errorf("the intent file %s is larger than %d KiB", path, maxIntent>>10)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), nil
}

// validAgent: an agent's name is a short lowercase word.
func validAgent(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// callerOf describes the user running sandboxd: its ids, environment,
// working directory and umask.
func callerOf(getenv func(string) string) (session.Caller, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return session.Caller{}, publicerr.Wrap(err, "the current directory is gone or cannot be read; change to one that exists and run it again")
	}
	// getenv has the last word on what describes the caller (a variable
	// it does not set is unset, not empty).
	var environ []string
	described := map[string]bool{}
	for _, k := range []string{"HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL"} {
		described[k] = true
		if v := getenv(k); v != "" {
			environ = append(environ, k+"="+v)
		}
	}
	for _, kv := range os.Environ() {
		if !described[envlist.Key(kv)] {
			environ = append(environ, kv)
		}
	}
	c, err := session.NewCaller(os.Getuid(), os.Getgid(), environ, cwd, readUmask())
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
	if in, ok := stdin.(*os.File); ok && isTerminal(in) {
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
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		fw := termfilter.New(f)
		t.hs = append(t.hs, fw)
		return fw
	}
	return w
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func writeReport(path string, rep *session.Report, stderr io.Writer) bool {
	if path == "" {
		return true
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	// Written in place, not renamed over: the report may be a pipe or
	// /dev/fd/N the caller reads.
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		// The path is the caller's; the syscall's reason goes in
		// parentheses, as sandboxd gives a kernel's.
		fmt.Fprintf(stderr, "sandboxd: the report could not be written to %s%s\n", esc(path), esc(kernelReason(err)))
		return false
	}
	return true
}

// readUmask is the process's umask, read without changing it (umask(2)
// would, for every thread): /proc/self/status says it. Unknown means the
// strictest usual one.
func readUmask() uint32 {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return uint32(n) & 0o777
				}
			}
		}
	}
	return 0o077
}

// ttyReachable reports whether sandboxd has a controlling terminal a
// person could answer on.
func ttyReachable() bool {
	fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// kernelReason is " (REASON)" for an error a syscall gave (its errno's
// text, never the path or operation of Go's wrapping), else "".
func kernelReason(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return " (" + errno.Error() + ")"
	}
	return ""
}
