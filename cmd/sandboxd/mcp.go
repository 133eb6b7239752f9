package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sandboxd/sandboxd/adapters/mcp"
	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/runtext"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
	"golang.org/x/sys/unix"
)

const mcpUsage = `Usage:
  sandboxd mcp [flags]

Serve the Model Context Protocol on stdin and stdout for one client: a
tool, bash, that runs each command as sandboxd run would, in the
workspace fixed now (--workspace, else the one found from the current
directory), with review, grants and one retry per round. A call's cwd
must lie inside the workspace. One connection is one sandboxd session
(its circuit breaker and grants) unless --session names one. Nobody can
be asked at a terminal: boundaries go to the model reviewer when one is
configured, else they are denied.
`

// mcpCommand is `sandboxd mcp`.
func mcpCommand(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	fs := flag.NewFlagSet("sandboxd mcp", flag.ContinueOnError)
	cfg := mcp.Config{Timeout: mcp.DefaultTimeout, MaxTimeout: mcp.MaxTimeout, MaxOutput: mcp.DefaultOutput, Progress: mcp.DefaultProgress}
	workspace := fs.String("workspace", "", "the workspace every call runs in (default: found from the current directory, as for run)")
	fs.StringVar(&cfg.Policy, "policy", "", "policy file (default: ~/.config/sandboxd/policy.toml)")
	fs.StringVar(&cfg.Session, "session", "", "the sandboxd session of every call (default: one of its own for this connection)")
	fs.StringVar(&cfg.Reviewer, "reviewer", session.ReviewAuto, "who reviews boundaries: auto (the model when configured, else off), model or off")
	fs.Var((*durationFlag)(&cfg.Timeout), "timeout", "a call's timeout when it names none: a `duration`")
	fs.Var((*durationFlag)(&cfg.MaxTimeout), "max-timeout", "the longest timeout a call may ask for: a `duration`")
	fs.IntVar(&cfg.MaxOutput, "max-output", mcp.DefaultOutput, "bytes of each output stream kept for the client (its head and tail)")
	fs.Var((*durationFlag)(&cfg.Progress), "progress", "how often a long call reports progress: a `duration`")
	verbose := fs.Bool("v", false, "log what sandboxd does to stderr")
	if code, ok := parseFlags(fs, args, mcpUsage, stdout, stderr); !ok {
		return code
	}
	switch {
	case fs.NArg() > 0:
		return usageError(stderr, withFlags(mcpUsage, fs), fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	case cfg.Reviewer != session.ReviewAuto && cfg.Reviewer != session.ReviewModel && cfg.Reviewer != session.ReviewOff:
		return usageError(stderr, withFlags(mcpUsage, fs), fmt.Sprintf("--reviewer must be auto, model or off, not %q", cfg.Reviewer))
	case cfg.Timeout <= 0 || cfg.MaxTimeout <= 0 || cfg.Progress <= 0:
		return usageError(stderr, withFlags(mcpUsage, fs), "--timeout, --max-timeout and --progress must be positive")
	case cfg.MaxOutput < 1024:
		return usageError(stderr, withFlags(mcpUsage, fs), "--max-output must be at least 1024")
	}
	level := slog.LevelError + 4
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(publicerr.Message(err, "sandboxd mcp could not start (run with -v to see why)")))
		log.Debug("sandboxd mcp failed", "err", publicerr.Internal(err))
		return exitSandboxd
	}
	caller, err := runcmd.CallerOf(getenv)
	if err != nil {
		return fail(err)
	}
	cfg.Log, cfg.Version, cfg.Caller = log, version(), caller
	helper := runcmd.FindHelper()
	helper.Log(log)
	own := runcmd.OwnAuditLog(caller, log)
	defer runcmd.CloseAudit(own, log)
	releases := sandbox.NewReleases() // closed (waited for) before the process exits
	defer releases.Close()
	cfg.Runner = session.New(session.Config{Log: log, Models: modelFactory(log, nil), EvidenceReader: runcmd.EvidenceReader(),
		Hidden: runcmd.HiddenPaths(getenv), Helper: helper.File, AuditLog: runcmd.OwnRecorders(own), Releases: releases})
	found, err := cfg.Runner.Workspace(caller, *workspace)
	if err != nil {
		return fail(err)
	}
	root, from := found.Root, found.From
	cfg.Workspace, cfg.Above = root, found.Above
	if cwd, err := filepath.EvalSymlinks(caller.Cwd); err != nil || !pathtree.Within(root, cwd) {
		cfg.Caller.Cwd = root
	}
	cfg.Notes = func(w io.Writer) session.Events { return runtext.New(w) }
	fmt.Fprintf(stderr, "sandboxd mcp: the bash tool runs in %s (from %s)\n", esc(root), from)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// A person's or the client's signal ends every running command.
		for s := range sigs {
			if s != unix.SIGWINCH {
				cancel()
				return
			}
		}
	}()
	t := &sdk.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}}
	if err := mcp.New(cfg).Run(ctx, t); err != nil && ctx.Err() == nil {
		// The client sent what the protocol cannot read: the connection
		// ends (every running command with it), and says so.
		fmt.Fprintln(stderr, "sandboxd mcp: the client sent a message that is not JSON-RPC; the connection is closed and its commands were ended")
		log.Debug("the MCP connection ended", "err", err)
		return 1
	}
	return 0
}

// nopWriteCloser is stdout, which the server never closes.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
