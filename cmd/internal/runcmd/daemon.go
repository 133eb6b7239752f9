package runcmd

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/sandboxd/sandboxd/cmd/internal/daemonrun"
	"github.com/sandboxd/sandboxd/daemon/client"
	"github.com/sandboxd/sandboxd/session"
)

// runViaDaemon is sandboxd run --daemon: the same run, done by the
// daemon for this user, its output, events and report streamed back and
// shown as an embedded run shows them (package daemonrun, which the lean
// front runs too). c is the client to use (nil: connect, or fail).
func runViaDaemon(ctx context.Context, f *runFlags, argv []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal, pipes []*os.File, c *client.Client) int {
	if len(pipes) > 0 {
		return daemonrun.Fail(f, argv, "a run with pipes (Claude Code's shell prefix) cannot go through the daemon yet", nil, stderr)
	}
	mark := client.Phases(f.Verbose, stderr)
	req, err := daemonrun.Request(f, argv, getenv)
	if err != nil {
		return daemonrun.Fail(f, argv, session.Public(err), nil, stderr)
	}
	if c == nil {
		if c, err = client.Connect(ctx, DaemonSocket(getenv), os.Getuid()); err != nil {
			return daemonrun.Fail(f, argv, session.Public(err), nil, stderr)
		}
	}
	mark("connected")
	r := &daemonrun.Run{Flags: f, Argv: argv, Request: req, Client: c, Mark: mark}
	return r.Do(ctx, getenv, stdin, stdout, stderr, sigs)
}

// daemonToUse is the daemon a run goes through when neither --daemon
// nor --no-daemon is given: the one at the socket, when it is there,
// trusted and answers, and the run needs nothing the daemon cannot do
// for it yet: pipes to this process, or a terminal, where a command may
// read the person's typing (a run through the daemon streams no stdin
// that is a terminal) and a person may be asked.
// A socket that is there but not trusted, or a daemon that refuses, is
// said, and the run stays here.
func daemonToUse(ctx context.Context, f *runFlags, getenv func(string) string, stderr io.Writer, pipes []*os.File) *client.Client {
	if f.NoDaemon || len(pipes) > 0 || (f.Reviewer != session.ReviewOff && (f.Reviewer == session.ReviewHuman || daemonrun.TTYReachable())) {
		return nil
	}
	socket := DaemonSocket(getenv)
	if _, err := os.Lstat(socket); err != nil {
		return nil // no daemon here (or, inside a sandbox, none to see)
	}
	c, err := client.Connect(ctx, socket, os.Getuid())
	if err != nil {
		fmt.Fprintf(stderr, "sandboxd: warning: not using the daemon: %s; running here\n", esc(session.Public(err)))
		return nil
	}
	return c
}
