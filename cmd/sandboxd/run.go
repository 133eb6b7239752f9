package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/termfilter"
	"golang.org/x/sys/unix"
)

const (
	// exitSandboxd is the status when sandboxd itself fails (DESIGN.md
	// §3.1); 124, 126 and 127 come from the sandbox package.
	exitSandboxd = 125
	// workspaceFile is the workspace-local policy, which may only tighten.
	workspaceFile = ".sandboxd.toml"
)

// runFlags are the flags of `sandboxd run`.
type runFlags struct {
	workspace        string
	policy           string
	report           string
	reviewer         string
	intent           string
	session          string
	timeout          time.Duration
	retries          int
	requireIsolation bool
	noTransaction    bool
	command          string
	verbose          bool
	detect           string
}

func parseRunFlags(args []string, stderr io.Writer) (*runFlags, []string, error) {
	f := &runFlags{}
	fs := flag.NewFlagSet("sandboxd run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.workspace, "workspace", "", "writable root (default: the current directory)")
	fs.StringVar(&f.policy, "policy", "", "policy file (default: ~/.config/sandboxd/policy.toml)")
	fs.StringVar(&f.report, "report", "", "write a JSON report of the run to this file")
	fs.StringVar(&f.reviewer, "reviewer", "auto", "who reviews boundaries: auto|model|human|off")
	fs.StringVar(&f.intent, "intent", "", "the user's request, evidence for the reviewer")
	fs.StringVar(&f.session, "session", "", "session id")
	fs.DurationVar(&f.timeout, "timeout", 0, "end the command after this long (exit 124)")
	fs.IntVar(&f.retries, "retries", 2, "automatic retries after granted boundaries")
	fs.BoolVar(&f.requireIsolation, "require-isolation", false, "fail (exit 125) instead of running without namespaces")
	fs.BoolVar(&f.noTransaction, "no-transaction", false, "write straight to the workspace")
	fs.StringVar(&f.detect, "detect", "auto", "boundary detection: auto, or off (denials are enforced but not reported or reviewed)")
	fs.StringVar(&f.command, "c", "", "run this string with bash -c")
	fs.BoolVar(&f.verbose, "v", false, "log what sandboxd does to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fmt.Fprintln(stderr, "Usage: sandboxd run [flags] -- COMMAND [ARG...] | -c 'shell command'")
			fs.PrintDefaults()
			return nil, nil, err
		}
		return nil, nil, err
	}
	switch f.reviewer {
	case "auto", "off":
	case "human":
	case "model":
		return nil, nil, fmt.Errorf("--reviewer model is not available yet; use human or off")
	default:
		return nil, nil, fmt.Errorf("--reviewer must be auto, model, human or off, not %q", f.reviewer)
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
	rest := fs.Args()
	switch {
	case f.command != "" && len(rest) > 0:
		return nil, nil, errors.New("give either -c 'command' or -- COMMAND [ARG...], not both")
	case f.command == "" && len(rest) == 0:
		return nil, nil, errors.New("no command: use -c 'command' or -- COMMAND [ARG...]")
	case f.command != "":
		rest = []string{"bash", "-c", f.command}
	}
	return f, rest, nil
}

// report is the --report JSON (DESIGN.md §3.1).
type report struct {
	ExitCode    int                 `json:"exit_code"`
	Attempts    int                 `json:"attempts"`
	LandlockABI int                 `json:"landlock_abi"`
	NetworkMode string              `json:"network_mode"`
	Isolation   string              `json:"isolation"`
	Boundaries  []boundary          `json:"boundaries"`
	Detection   *sandbox.Detection  `json:"detection,omitempty"`
	Degraded    []string            `json:"degraded,omitempty"`
	Containment string              `json:"containment,omitempty"`
	TimedOut    bool                `json:"timed_out,omitempty"`
	Signal      int                 `json:"signal,omitempty"`
	Persistence []sandbox.Persisted `json:"persistence,omitempty"`
	Transaction *txnReport          `json:"transaction,omitempty"`
	Session     string              `json:"session,omitempty"`
	Workspace   string              `json:"workspace,omitempty"`
	Command     []string            `json:"command,omitempty"`
	SetupMS     float64             `json:"setup_ms,omitempty"`
	Error       string              `json:"error,omitempty"`
}

func runCommand(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	f, argv, err := parseRunFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitSandboxd
		}
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(err.Error())) // a flag's name is the caller's, maybe the command's
		return exitSandboxd
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	rep := report{Attempts: 0, Boundaries: []boundary{}, Session: f.session, Command: argv}
	fail := func(err error) int {
		// Errors can carry names the command chose (a path in the layer).
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(err.Error()))
		rep.ExitCode, rep.Error = exitSandboxd, err.Error()
		writeReport(f.report, rep, stderr)
		return exitSandboxd
	}

	env, err := loadEnv(getenv)
	if err != nil {
		return fail(err)
	}
	ws, cwd, err := resolveWorkspace(f.workspace, env)
	if err != nil {
		return fail(err)
	}
	rep.Workspace = ws
	userPolicy, explicit := f.policy, f.policy != ""
	if !explicit {
		userPolicy = filepath.Join(env.configDir, "sandboxd", "policy.toml")
	}
	pol, err := policy.Load(userPolicy, explicit, filepath.Join(ws, workspaceFile))
	if err != nil {
		return fail(err)
	}
	res, err := pol.Resolve(policy.Dirs{Home: env.home, ConfigDir: env.configDir, StateDir: env.stateBase, Root: os.Geteuid() == 0})
	if err != nil {
		return fail(err)
	}
	if f.requireIsolation {
		if res.Isolation == string(sandbox.LandlockOnly) {
			return fail(errors.New(`--require-isolation conflicts with the policy's isolation = "landlock-only"`))
		}
		res.Isolation = string(sandbox.Namespaces)
	}
	spec, err := buildSpec(argv, cwd, ws, env, res)
	if err != nil {
		return fail(err)
	}
	spec.Timeout = f.timeout
	spec.NoDetect = f.detect == "off"
	spec.Transaction = !f.noTransaction
	spec.LayerSize = int64(res.Limits.LayerSize)
	rep.Transaction = &txnReport{Mode: "none"}
	// A commit a crash interrupted is finished (or rolled back) before
	// anything new runs.
	rep.Transaction.Recovered = recoverCommits(spec.StateDir, stderr, log)
	spec.Stdin, spec.Stdout, spec.Stderr = stdin, stdout, stderr
	spec.Signals, spec.RuntimeDir = sigs, getenv("XDG_RUNTIME_DIR")
	var reviewer broker.Reviewer
	if f.reviewer == "human" {
		// A person reads this terminal: the command's output to it passes
		// through a filter that keeps it from faking or hiding a prompt,
		// and while a question is open its output is held back and its
		// input (the terminal, relayed) is not read.
		hold := &termHold{}
		spec.Stdout, spec.Stderr = hold.filtered(stdout), hold.filtered(stderr)
		if in, ok := stdin.(*os.File); ok && isTerminal(in) {
			r, w, err := os.Pipe()
			if err != nil {
				return fail(fmt.Errorf("stdin relay: %w", err))
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
			defer func() { cancel(); <-done; r.Close() }()
			spec.Stdin = r
		}
		reviewer = &review.Human{Hold: hold}
	}
	store := grants.NewStore()
	b, err := newBroker(env, ws, res, f, log, reviewer, store)
	if err != nil {
		return fail(err)
	}

	var out sandbox.Result
	var consumedAt []int // boundaries whose grants the current attempt uses
	// pending is the latest attempt's layer: dropped when a retry ran,
	// committed when no retry follows.
	var pending *sandbox.Layer
	defer func() { pending.Close() }()
	commit := func() error {
		if pending == nil {
			return nil
		}
		l := pending
		pending = nil
		outc, err := commitLayer(ctx, l, &spec, env, getenv, stderr, log)
		rep.Transaction.Committed = &outc
		for _, li := range outc.Listed {
			rep.Persistence = append(rep.Persistence, sandbox.Persisted{Path: li.Path, Action: "committed", Why: li.Why})
		}
		for _, r := range outc.Refused {
			rep.Boundaries = append(rep.Boundaries, boundary{Attempt: rep.Attempts, Surface: "filesystem", Operation: "persist",
				Path: filepath.Join(spec.Workspace, r.Path), Decision: "deny", Source: "hard-deny", Rationale: r.Why})
		}
		return err
	}
	for attempt := 1; ; attempt++ {
		prev := out
		out, err = sandbox.Run(ctx, spec, log)
		if out.Layer != nil {
			if pending != nil {
				pending.Close()
				rep.Transaction.Discarded++
			}
			pending = out.Layer
		}
		if out.Transaction.Mode != "" {
			rep.Transaction.Mode, rep.Transaction.Why = out.Transaction.Mode, out.Transaction.Why
			if out.Transaction.Mode == "layer" {
				rep.Transaction.LayerSize = spec.LayerSize
			}
		}
		if err != nil && errors.Is(err, sandbox.ErrGrantStale) {
			// Between the review and the retry the object changed: the
			// grant no longer applies, and nothing is retried.
			for _, i := range consumedAt {
				rep.Boundaries[i].Grant = "rejected"
				rep.Boundaries[i].Rationale = err.Error()
			}
			fmt.Fprintf(stderr, "sandboxd: not retrying: %s\n", esc(err.Error()))
			out = prev
			break
		}
		rep.LandlockABI = out.LandlockABI
		rep.Isolation, rep.NetworkMode = string(out.Isolation), string(out.NetworkMode)
		rep.Degraded, rep.Containment = out.Degraded, out.Containment
		if err != nil {
			// The attempt before this one, if any, is the final one.
			if cerr := commit(); cerr != nil {
				err = errors.Join(err, cerr)
			}
			if errors.Is(err, sandbox.ErrNoIsolation) && res.Isolation == string(sandbox.Namespaces) {
				return fail(fmt.Errorf("%w; refusing to run without isolation (--require-isolation or isolation = \"namespaces\")", err))
			}
			return fail(err)
		}
		rep.Attempts = attempt
		if attempt == 1 && out.Isolation == sandbox.LandlockOnly {
			fmt.Fprintf(stderr, "sandboxd: warning: isolation is landlock-only: %s\n", esc(strings.Join(out.Degraded, "; ")))
		}
		printPersisted(stderr, spec.Workspace, out.Persistence)
		rep.ExitCode, rep.TimedOut, rep.Signal = out.ExitCode, out.TimedOut, out.Signal
		rep.Persistence = append(rep.Persistence, out.Persistence...)
		rep.Detection = &out.Detection
		if out.Detection.Lost != 0 {
			fmt.Fprintf(stderr, "sandboxd: warning: some denials may not have been seen (%s)\n", esc(out.Detection.Why))
		}
		if out.TimedOut {
			fmt.Fprintf(stderr, "sandboxd: timed out after %s; every process of the command was ended\n", f.timeout)
		}

		// Review every boundary of this attempt.
		type allowed struct {
			req   grants.Request
			grant *grants.Grant
			at    int // index in rep.Boundaries
		}
		var granted []allowed
		allAllowed := len(out.Denials) > 0
		for _, d := range out.Denials {
			req := requestFor(d, f, cwd, argv, attempt)
			r := b.Decide(ctx, req)
			bd := boundary{Attempt: attempt, Surface: d.Surface, Operation: d.Operation, Path: d.Path,
				Destination: d.Destination, Decision: string(r.Decision.Outcome), Source: string(r.Decision.Source),
				Rationale: r.Decision.Rationale}
			if r.Grant != nil {
				bd.Grant = "issued"
				granted = append(granted, allowed{req: req, grant: r.Grant, at: len(rep.Boundaries)})
			} else {
				allAllowed = false
				printDenial(stderr, d, r.Decision)
			}
			rep.Boundaries = append(rep.Boundaries, bd)
		}
		if !allAllowed || attempt > f.retries {
			break
		}
		// Every boundary was allowed: consume each grant against the
		// object as it is now, and run the same command again with exactly
		// those exceptions.
		var exceptions []sandbox.Exception
		var names []string
		consumedAt = nil
		ok := true
		for _, g := range granted {
			now := currentRequest(g.req)
			err := store.Consume(g.grant.Token, now)
			switch {
			case err == nil:
				rep.Boundaries[g.at].Grant = "consumed"
				consumedAt = append(consumedAt, g.at)
				exceptions = append(exceptions, sandbox.Exception{Operation: now.Operation, Path: now.ResolvedPath, Ino: now.Ino, Born: now.Born})
				names = append(names, now.Operation+" "+now.ResolvedPath)
			case errors.Is(err, grants.ErrExpired):
				rep.Boundaries[g.at].Grant = "expired"
				ok = false
			default:
				rep.Boundaries[g.at].Grant = "rejected"
				rep.Boundaries[g.at].Rationale = "the grant no longer fits: " + err.Error()
				ok = false
			}
		}
		if !ok {
			fmt.Fprintln(stderr, "sandboxd: a grant no longer fits what it was given for (the object changed, or it expired); not retrying")
			break
		}
		fmt.Fprintf(stderr, "sandboxd: retrying the same command with exactly: %s\n", esc(strings.Join(names, ", ")))
		spec.Exceptions = exceptions
	}
	rep.SetupMS = float64(out.Setup.Microseconds()) / 1000
	if err := commit(); err != nil {
		return fail(err)
	}
	if !writeReport(f.report, rep, stderr) {
		return exitSandboxd
	}
	return out.ExitCode
}

// requestFor is the boundary request a denial makes.
func requestFor(d sandbox.Denial, f *runFlags, cwd string, argv []string, attempt int) grants.Request {
	return grants.Request{
		Session: sessionOf(f), Cwd: cwd, Command: commandString(f, argv), Surface: grants.Surface(d.Surface),
		Operation: d.Operation, Path: d.Path, ResolvedPath: d.Path, Ino: d.Ino, Born: d.Born, Destination: d.Destination,
		Agent: "cli", Intent: f.intent, Attempt: attempt,
	}
}

// sessionOf names the run's session; without --session each run is its
// own (grants need one).
func sessionOf(f *runFlags) string {
	if f.session != "" {
		return f.session
	}
	return "run-" + strconv.Itoa(os.Getpid())
}

// currentRequest is req with the object's identity as it is now, so a
// grant for a path that was replaced (a symlink swapped in, a file
// recreated, a file to create that appeared) no longer matches.
func currentRequest(req grants.Request) grants.Request {
	now := req
	now.ToolCallID, now.Attempt = "", req.Attempt+1
	if req.Surface != grants.Filesystem {
		return now
	}
	now.Ino, now.Born = 0, 0
	if ino, born, _, ok := sandbox.Identity(req.ResolvedPath); ok {
		now.Ino, now.Born = ino, born
	}
	return now
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

// boundary is one entry of the report's boundaries (DESIGN.md §3.1).
type boundary struct {
	Attempt     int    `json:"attempt"`
	Surface     string `json:"surface"`
	Operation   string `json:"operation"`
	Path        string `json:"path,omitempty"`
	Destination string `json:"destination,omitempty"`
	Decision    string `json:"decision"`
	Source      string `json:"source"`
	Rationale   string `json:"rationale,omitempty"`
	Grant       string `json:"grant,omitempty"`
}

// newBroker builds the decision pipeline for this run: policy and hard
// denies, then the reviewer (none for "off"/"auto", a person for "human").
func newBroker(env hostEnv, ws string, p policy.Resolved, f *runFlags, log *slog.Logger, reviewer broker.Reviewer, store *grants.Store) (*broker.Broker, error) {
	state := filepath.Join(env.stateBase, "sandboxd")
	var rules broker.Rules
	for _, set := range []struct {
		in  []string
		out *[]broker.Rule
	}{{p.BoundaryAllow, &rules.Allow}, {p.BoundaryAsk, &rules.Ask}, {p.BoundaryDeny, &rules.Deny}} {
		for _, s := range set.in {
			r, err := broker.ParseRule(s, env.home)
			if err != nil {
				return nil, fmt.Errorf("policy: boundaries: %w", err)
			}
			*set.out = append(*set.out, r)
		}
	}
	cfg := broker.Config{
		Rules: rules,
		Hard: broker.HardDenies{
			Secrets:   p.Secrets,
			Own:       []string{filepath.Join(env.configDir, "sandboxd"), state, filepath.Join(env.home, ".local", "share", "sandboxd")},
			Home:      env.home,
			Workspace: ws,
		},
		Grants:   store,
		Reviewer: reviewer,
		Log:      log,
		Grantable: func(r grants.Request) (bool, string) {
			return sandbox.Grantable(string(r.Surface), r.Operation)
		},
	}
	if f.session != "" {
		cfg.Breaker = broker.NewBreaker(filepath.Join(state, "breaker"))
	}
	return broker.New(cfg), nil
}

// commandString is the exact command a grant binds to.
func commandString(f *runFlags, argv []string) string {
	if f.command != "" {
		return f.command
	}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// printDenial tells the agent, in words safe to show a model, what was
// denied, why and by whom, and that another route to it will be denied
// too.
func printDenial(w io.Writer, d sandbox.Denial, dec broker.Decision) {
	target := d.Path
	if d.Surface == "network" {
		target = d.Destination
	}
	fmt.Fprintf(w, "sandboxd: denied %s %s\n  why: %s\n  decided by: %s\n  Retrying the same access another way (another path, tool or command) will be denied too.\n",
		esc(d.Operation), esc(target), esc(dec.Rationale), esc(string(dec.Source)))
}

func writeReport(path string, rep report, stderr io.Writer) bool {
	if path == "" {
		return true
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		fmt.Fprintf(stderr, "sandboxd: write report: %s\n", esc(err.Error()))
		return false
	}
	return true
}

// hostEnv is what sandboxd needs to know about the caller.
type hostEnv struct {
	home, configDir, stateBase string
	environ                    []string
	// gitConfigs are the caller's own git config files (system, global,
	// XDG): their hooksPath and includes reach into every repository.
	gitConfigs []string
	// umask is the caller's: the commit gives new files no more.
	umask uint32
}

func loadEnv(getenv func(string) string) (hostEnv, error) {
	e := hostEnv{home: getenv("HOME"), environ: os.Environ(), umask: readUmask()}
	if e.home == "" || !filepath.IsAbs(e.home) {
		return e, errors.New("HOME must be set to an absolute path")
	}
	e.home = filepath.Clean(e.home)
	e.configDir = filepath.Join(e.home, ".config")
	if x := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		e.configDir = filepath.Clean(x)
	}
	e.stateBase = filepath.Join(e.home, ".local", "state")
	if x := getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		e.stateBase = filepath.Clean(x)
	}
	if getenv("GIT_CONFIG_NOSYSTEM") == "" {
		e.gitConfigs = append(e.gitConfigs, "/etc/gitconfig")
	}
	xdg := filepath.Join(e.home, ".config")
	if x := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		xdg = filepath.Clean(x)
	}
	e.gitConfigs = append(e.gitConfigs, filepath.Join(xdg, "git", "config"), filepath.Join(e.home, ".gitconfig"))
	if x := getenv("GIT_CONFIG_GLOBAL"); filepath.IsAbs(x) {
		e.gitConfigs = append(e.gitConfigs, filepath.Clean(x))
	}
	return e, nil
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

// systemDirs may never be a workspace; those marked true may not contain one.
var systemDirs = map[string]bool{
	"/": false, "/bin": true, "/boot": true, "/dev": true, "/etc": true, "/lib": true,
	"/lib32": true, "/lib64": true, "/libx32": true, "/proc": true, "/run": true,
	"/sbin": true, "/sys": true, "/usr": true, "/var": false, "/tmp": false,
	"/var/tmp": false, "/home": false, "/root": false, "/opt": false, "/srv": false,
	"/mnt": false, "/media": false, "/snap": true, "/var/run": true, "/var/lib": false,
	"/var/log": true, "/var/cache": false,
}

// resolveWorkspace validates the workspace and picks the command's
// working directory (the current one when it lies inside the workspace).
func resolveWorkspace(flagWS string, env hostEnv) (ws, cwd string, err error) {
	here, err := os.Getwd()
	if err != nil {
		return "", "", fmt.Errorf("current directory: %w", err)
	}
	given := flagWS
	if given == "" {
		given = here
	}
	abs, err := filepath.Abs(given)
	if err != nil {
		return "", "", fmt.Errorf("workspace %s: %w", given, err)
	}
	ws, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return "", "", fmt.Errorf("workspace %s: %w", given, errors.Unwrap(err))
	}
	st, err := os.Stat(ws)
	if err != nil {
		return "", "", fmt.Errorf("workspace %s: %w", given, err)
	}
	if !st.IsDir() {
		return "", "", fmt.Errorf("workspace %s is not a directory", given)
	}
	if d, err := os.Open(ws); err != nil {
		return "", "", fmt.Errorf("workspace %s is not readable: %w", given, errors.Unwrap(err))
	} else {
		d.Close()
	}
	refuse := func(why string) (string, string, error) {
		if ws != abs {
			why += " (through the symlink " + abs + ")"
		}
		return "", "", fmt.Errorf("workspace %s is %s; choose a project directory", ws, why)
	}
	if _, ok := systemDirs[ws]; ok {
		return refuse("a system directory")
	}
	for dir := filepath.Dir(ws); ; dir = filepath.Dir(dir) {
		if systemDirs[dir] {
			return refuse("inside the system directory " + dir)
		}
		if dir == "/" {
			break
		}
	}
	home, _ := filepath.EvalSymlinks(env.home)
	for _, h := range []string{env.home, home} {
		if h == "" {
			continue
		}
		if ws == h {
			return refuse("your home directory")
		}
		if strings.HasPrefix(h, ws+"/") {
			return refuse("a parent of your home directory")
		}
	}
	for _, own := range []string{filepath.Join(env.configDir, "sandboxd"), filepath.Join(env.stateBase, "sandboxd")} {
		if ws == own || strings.HasPrefix(own, ws+"/") || strings.HasPrefix(ws, own+"/") {
			return refuse("sandboxd's own configuration or state")
		}
	}
	cwd = ws
	if real, err := filepath.EvalSymlinks(here); err == nil && (real == ws || strings.HasPrefix(real, ws+"/")) {
		cwd = real
	}
	return ws, cwd, nil
}

// buildSpec turns the resolved policy into a sandbox.Spec.
func buildSpec(argv []string, cwd, ws string, env hostEnv, p policy.Resolved) (sandbox.Spec, error) {
	state := filepath.Join(env.stateBase, "sandboxd")
	sum := sha256.Sum256([]byte(ws))
	cache := filepath.Join(state, "cache", hex.EncodeToString(sum[:8]))
	caches := map[string]string{
		"XDG_CACHE_HOME":   filepath.Join(cache, "xdg"),
		"GOCACHE":          filepath.Join(cache, "go-build"),
		"npm_config_cache": filepath.Join(cache, "npm"),
		"PIP_CACHE_DIR":    filepath.Join(cache, "pip"),
	}
	environ, _ := policy.FilterEnv(env.environ, p.EnvAllow, p.EnvDeny)
	environ = withEnv(environ, "TMPDIR", "/tmp")
	environ = withEnv(environ, "SANDBOXD", "1")
	for k, v := range caches {
		environ = withEnv(environ, k, v)
	}
	read := []string{"/"}
	deny := append([]string(nil), p.Secrets...)
	if p.Profile == "strict" {
		deny = append(deny, env.home)
		if real, err := filepath.EvalSymlinks(env.home); err == nil && real != env.home {
			deny = append(deny, real)
		}
		read = append(read, p.HomeAllow...)
	}
	spec := sandbox.Spec{
		Argv:       argv,
		Env:        environ,
		Dir:        cwd,
		Workspace:  ws,
		Writable:   p.Writable,
		Caches:     []string{cache},
		Read:       read,
		Deny:       deny,
		ListCarved: p.Profile != "strict",
		Protected:  p.Protected,
		GitConfigs: env.gitConfigs,
		Umask:      env.umask,
		Home:       env.home,
		StateDir:   state,
		Isolation:  p.Isolation,
		Limits: sandbox.Limits{
			Pids:     p.Limits.Pids,
			Memory:   int64(p.Limits.Memory),
			FileSize: int64(p.Limits.FileSize),
			TmpSize:  int64(p.Limits.TmpSize),
		},
	}
	for _, w := range p.Writable {
		if w == ws || strings.HasPrefix(ws, w+"/") {
			return spec, fmt.Errorf("writable root %s contains the workspace", w)
		}
	}
	return spec, nil
}

func withEnv(env []string, key, val string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, key+"="+val)
}

// esc shows a string that may come from the command (a path, a host, a
// rationale quoting one) without letting it control the terminal.
func esc(s string) string { return termfilter.Escape(s) }

// maxListed is how many listed paths stderr names one by one; the report
// has them all.
const maxListed = 10

// printPersisted tells the agent what the persistence rules did after a
// run written straight to the workspace.
func printPersisted(w io.Writer, ws string, done []sandbox.Persisted) {
	listed := 0
	for _, r := range done {
		path := esc(filepath.Join(ws, r.Path))
		switch r.Action {
		case "quarantined", "removed":
			where := "it was removed"
			if r.Quarantine != "" {
				where = "it was moved to " + esc(r.Quarantine)
			}
			fmt.Fprintf(w, "sandboxd: not kept: %s\n  why: %s\n  decided by: hard-deny\n  %s. Writing it another way will be refused too.\n", path, esc(r.Why), where)
		case "narrowed":
			fmt.Fprintf(w, "sandboxd: %s: %s\n", path, esc(r.Why))
		case "listed", "committed":
			listed++
			if listed <= maxListed {
				fmt.Fprintf(w, "sandboxd: note: the command wrote %s (%s)\n", path, esc(r.Why))
			}
		}
	}
	if listed > maxListed {
		fmt.Fprintf(w, "sandboxd: note: and %d more such files; the report's persistence list names them all\n", listed-maxListed)
	}
}
