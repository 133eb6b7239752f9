package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/cmd/internal/daemonrun"
	"github.com/sandboxd/sandboxd/daemon/client"
	"github.com/sandboxd/sandboxd/runflags"
)

// prepare is the run args (run's command line) describe, when this
// process takes it: the core would go through the daemon, and nothing
// failed before the request (a failure is the core's to say).
func prepare(ctx context.Context, args []string, getenv func(string) string) (*daemonrun.Run, bool) {
	f, argv, _, err := runflags.Parse(args)
	if err != nil || f.Daemon && f.NoDaemon {
		return nil, false
	}
	socket := client.DefaultSocket
	if s := getenv("SANDBOXD_SOCKET"); filepath.IsAbs(s) {
		socket = filepath.Clean(s)
	}
	if !f.Daemon {
		// As the core's daemonToUse decides.
		if f.NoDaemon || f.Reviewer != runflags.ReviewOff && (f.Reviewer == runflags.ReviewHuman || daemonrun.TTYReachable()) {
			return nil, false
		}
		if _, err := os.Lstat(socket); err != nil {
			return nil, false
		}
	}
	mark := client.Phases(f.Verbose, os.Stderr)
	// Connected first: the daemon takes the connection's peer while
	// this process describes its caller.
	c, err := client.Connect(ctx, socket, os.Getuid())
	if err != nil {
		return nil, false
	}
	mark("connected")
	req, err := daemonrun.Request(f, argv, getenv)
	if err != nil {
		return nil, false
	}
	return &daemonrun.Run{Flags: f, Argv: argv, Request: req, Client: c, Mark: mark}, true
}
