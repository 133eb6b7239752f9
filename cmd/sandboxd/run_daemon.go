package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/session"
	"golang.org/x/sys/unix"
)

// runViaDaemon is sandboxd run --daemon: the same run, done by the
// daemon for this user, its output, events and report streamed back and
// shown as an embedded run shows them.
func runViaDaemon(ctx context.Context, f *runFlags, argv []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal, pipes []*os.File) int {
	fail := func(msg string, rep *session.Report) int {
		if rep == nil {
			rep = &session.Report{ExitCode: exitSandboxd, Boundaries: []session.Boundary{}, Session: f.session, Command: argv}
		}
		rep.Error = msg
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(msg))
		writeReport(f.report, rep, stderr)
		return exitSandboxd
	}
	if len(pipes) > 0 {
		return fail("a run with pipes (Claude Code's shell prefix) cannot go through the daemon yet", nil)
	}
	req, err := execRequest(f, argv, getenv)
	if err != nil {
		return fail(session.Public(err), nil)
	}
	c, err := daemon.Connect(ctx, daemonSocket(getenv), os.Getuid())
	if err != nil {
		return fail(session.Public(err), nil)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// Ending the request ends the run, and every process of it.
		for s := range sigs {
			if s == unix.SIGINT || s == unix.SIGTERM || s == unix.SIGHUP {
				cancel()
				return
			}
		}
	}()
	var in io.Reader
	if file, ok := stdin.(*os.File); !ok || !isTerminal(file) {
		in = stdin
	}
	ev := &stderrEvents{w: stderr}
	var rep *session.Report
	var runErr string
	err = c.Exec(ctx, req, in, func(l daemon.ExecLine) {
		switch l.Type {
		case "stdout":
			stdout.Write(l.Data)
		case "stderr":
			stderr.Write(l.Data)
		case "event":
			if l.Event != nil {
				ev.Event(*l.Event)
			}
		case "report":
			rep, runErr = l.Report, l.Error
		}
	})
	switch {
	case err != nil && errors.Is(ctx.Err(), context.Canceled):
		return fail("the run was interrupted; the daemon ended every process of it", rep)
	case err != nil:
		return fail(session.Public(err), rep)
	case rep == nil:
		return fail("the daemon sent no report", nil)
	case runErr != "":
		return fail(runErr, rep)
	}
	if !writeReport(f.report, rep, stderr) {
		return exitSandboxd
	}
	return rep.ExitCode
}

// execRequest is the daemon's request for a run: the flags, and this
// user's environment, working directory and umask (the daemon takes the
// ids from the kernel).
func execRequest(f *runFlags, argv []string, getenv func(string) string) (daemon.ExecRequest, error) {
	caller, err := callerOf(getenv)
	if err != nil {
		return daemon.ExecRequest{}, err
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(caller.Cwd, p)
	}
	intent := f.intent
	if f.intentFile != "" {
		if intent, err = readIntent(f.intentFile); err != nil {
			return daemon.ExecRequest{}, err
		}
	}
	return daemon.ExecRequest{
		Argv: argv, Command: f.command,
		Context: daemon.Context{Env: caller.Env, Cwd: caller.Cwd, Umask: caller.Umask, Workspace: abs(f.workspace),
			Policy: abs(f.policy), Session: f.session, Agent: f.agent, Intent: intent, Reviewer: f.reviewer},
		TimeoutMS: f.timeout.Milliseconds(), Retries: f.retries,
		NoTransaction: f.noTransaction, NoDetect: f.detect == "off", RequireIsolation: f.requireIsolation,
	}, nil
}
