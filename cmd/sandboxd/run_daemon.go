package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sandboxd/sandboxd/daemon/client"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/session"
	"golang.org/x/sys/unix"
)

// runViaDaemon is sandboxd run --daemon: the same run, done by the
// daemon for this user, its output, events and report streamed back and
// shown as an embedded run shows them.
// c is the client to use (nil: connect, or fail).
func runViaDaemon(ctx context.Context, f *runFlags, argv []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal, pipes []*os.File, c *daemon.Client) int {
	fail := func(msg string, rep *session.Report) int {
		if rep == nil {
			rep = &session.Report{ExitCode: exitSandboxd, Boundaries: []session.Boundary{}, Session: f.Session, Command: argv}
		}
		rep.Error = msg
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(msg))
		writeReport(f.Report, rep, stderr)
		return exitSandboxd
	}
	if len(pipes) > 0 {
		return fail("a run with pipes (Claude Code's shell prefix) cannot go through the daemon yet", nil)
	}
	mark := clientPhases(f.Verbose, stderr)
	req, err := execRequest(f, argv, getenv)
	if err != nil {
		return fail(session.Public(err), nil)
	}
	if c == nil {
		if c, err = daemon.Connect(ctx, daemonSocket(getenv), os.Getuid()); err != nil {
			return fail(session.Public(err), nil)
		}
	}
	mark("connected")
	if tty := controllingTerminal(); tty != nil {
		// The person is asked on it, by the daemon, as an embedded run
		// asks: this process relays nothing itself.
		defer tty.Close()
		c.PassTerminal(tty)
	}
	// The command's output to a terminal cannot fake or hide the
	// daemon's questions there (it holds the output while one is open).
	var hold termHold
	stdout, stderr = hold.filtered(stdout), hold.filtered(stderr)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := make(chan string, 1)
	go relaySignals(ctx, c, sigs, started, cancel)
	var in io.Reader
	if file, ok := stdin.(*os.File); !ok || !isTerminal(file) {
		in = stdin
	}
	var rep *session.Report
	var runErr string
	err = c.Exec(ctx, req, in, func(l daemon.ExecLine) {
		switch l.Type {
		case "started":
			mark("started")
			started <- l.Exec
		case "stdout":
			stdout.Write(l.Data)
		case "stderr":
			stderr.Write(l.Data)
		case "event":
			daemonEvent(stderr, l, getenv)
		case "report":
			rep, runErr = decodeReport(l.Report), l.Error
		}
	})
	mark("stream ended")
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
	if !writeReport(f.Report, rep, stderr) {
		return exitSandboxd
	}
	return rep.ExitCode
}

// clientPhases is the client's mark for -v: each logs a phase of the
// run through the daemon, as sandbox.LogPhase does (bench/launch -phases
// reads them beside the daemon's); without -v it logs nothing.
func clientPhases(verbose bool, stderr io.Writer) func(what string) {
	return client.Phases(verbose, stderr)
}

// decodeReport is the report an exec line carries (nil: none, or one
// that cannot be read, which fails the run as a missing one does).
func decodeReport(b json.RawMessage) *session.Report {
	if len(b) == 0 {
		return nil
	}
	var rep *session.Report
	if json.Unmarshal(b, &rep) != nil {
		return nil
	}
	return rep
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
	intent := f.Intent
	if f.IntentFile != "" {
		if intent, err = readIntent(f.IntentFile); err != nil {
			return daemon.ExecRequest{}, err
		}
	}
	return daemon.ExecRequest{
		Argv: argv, Command: f.Command,
		Context: daemon.Context{Env: caller.Env, Cwd: caller.Cwd, Umask: caller.Umask, Workspace: abs(f.Workspace),
			Policy: abs(f.Policy), Session: f.Session, Agent: f.Agent, Intent: intent, Reviewer: f.Reviewer},
		TimeoutMS: f.Timeout.Milliseconds(), Retries: f.Retries, Text: true,
		NoTransaction: f.NoTransaction, NoDetect: f.Detect == "off", RequireIsolation: f.RequireIsolation,
	}, nil
}

// relaySignals forwards the signals this process gets to the run, as an
// embedded run relays them to its command (a second SIGINT ends the
// whole tree there too). A signal before the run started, or one the
// daemon cannot be told, ends the request, which ends the run and every
// process of it.
func relaySignals(ctx context.Context, c *daemon.Client, sigs <-chan os.Signal, started <-chan string, cancel func()) {
	id := ""
	for {
		select {
		case <-ctx.Done():
			return
		case id = <-started:
		case s, ok := <-sigs:
			if !ok {
				return
			}
			sig, _ := s.(unix.Signal)
			if id == "" || c.Signal(ctx, id, sig) != nil {
				if sig != unix.SIGWINCH {
					cancel()
				}
			}
		}
	}
}

// daemonToUse is the daemon a run goes through when neither --daemon
// nor --no-daemon is given: the one at the socket, when it is there,
// trusted and answers, and the run needs nothing the daemon cannot do
// for it yet: pipes to this process, or a terminal, where a command may
// read the person's typing (a run through the daemon streams no stdin
// that is a terminal) and a person may be asked.
// A socket that is there but not trusted, or a daemon that refuses, is
// said, and the run stays here.
func daemonToUse(ctx context.Context, f *runFlags, getenv func(string) string, stderr io.Writer, pipes []*os.File) *daemon.Client {
	if f.NoDaemon || len(pipes) > 0 || (f.Reviewer != session.ReviewOff && (f.Reviewer == session.ReviewHuman || ttyReachable())) {
		return nil
	}
	socket := daemonSocket(getenv)
	if _, err := os.Lstat(socket); err != nil {
		return nil // no daemon here (or, inside a sandbox, none to see)
	}
	c, err := daemon.Connect(ctx, socket, os.Getuid())
	if err != nil {
		fmt.Fprintf(stderr, "sandboxd: warning: not using the daemon: %s; running here\n", esc(session.Public(err)))
		return nil
	}
	return c
}

// controllingTerminal is this process's controlling terminal, open, or
// nil when it has none.
func controllingTerminal() *os.File {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return f
}

// daemonEvent shows one of the run's events as the daemon rendered it
// (runtext's sentences), and notifies the person of a question waiting
// on the approvals page.
func daemonEvent(stderr io.Writer, l daemon.ExecLine, getenv func(string) string) {
	if l.Text != "" {
		io.WriteString(stderr, l.Text)
	}
	if l.EventKind() == client.EventQuestionWaiting {
		desktopNotify(getenv)
	}
}

// desktopNotify shows the person a desktop notification that a question
// waits on the approvals page, with notify-send where it is installed and
// this user has a desktop session: this process is the user's, so the
// notification goes where the user's own programs' go (the daemon, as
// root, never reaches into a user's session). Its text is fixed.
func desktopNotify(getenv func(string) string) {
	if getenv("DBUS_SESSION_BUS_ADDRESS") == "" && getenv("DISPLAY") == "" && getenv("WAYLAND_DISPLAY") == "" {
		return
	}
	bin, err := exec.LookPath("notify-send")
	if err != nil {
		return
	}
	cmd := exec.Command(bin, "--app-name=sandboxd", "sandboxd", "A question waits for your answer on the approvals page.")
	cmd.Env, cmd.Dir = os.Environ(), "/"
	if cmd.Start() == nil {
		go cmd.Wait()
	}
}
