package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/session"
	"golang.org/x/sys/unix"
)

const serveUsage = `Usage:
  sandboxd serve [--socket PATH] [--question-wait DURATION]
  sandboxd serve status [--socket PATH]

serve runs the daemon, as root, one per machine: its API listens on a
unix socket (default /run/sandboxd/sandboxd.sock) in a directory of
root's, and each caller's token file is written beside it, in tokens/.
status asks the daemon, as you, whether it is up and who it takes you
for; it checks the socket is root's first (SANDBOXD_SOCKET names another).
`

// serveCommand is `sandboxd serve` and `sandboxd serve status`.
func serveCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	status := len(args) > 0 && args[0] == "status"
	if status {
		args = args[1:]
	}
	fs := flag.NewFlagSet("sandboxd serve", flag.ContinueOnError)
	socket := fs.String("socket", "", "the daemon's socket (default: $SANDBOXD_SOCKET, else "+daemon.DefaultSocket+")")
	verbose := fs.Bool("v", false, "log what the daemon does to stderr")
	maxExecs := fs.Int("max-execs", 64, "the commands one user may run through the daemon at once")
	questionWait := fs.Duration("question-wait", review.DefaultTimeout, "how long a question for a person waits for an answer before it denies")
	if code, ok := parseFlags(fs, args, serveUsage, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, withFlags(serveUsage, fs), fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	if *socket == "" {
		*socket = daemonSocket(getenv)
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(publicerr.Message(err, "sandboxd could not finish because of an internal error (run with -v to see it)")))
		if *verbose {
			fmt.Fprintf(stderr, "sandboxd: cause: %s\n", esc(publicerr.Internal(err)))
		}
		return 1
	}
	if status {
		return serveStatus(ctx, *socket, stdout, fail)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ln, tokens, err := daemon.Listen(*socket, os.Geteuid())
	if err != nil {
		return fail(err)
	}
	defer os.Remove(*socket)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for s := range sigs {
			if s == unix.SIGTERM || s == unix.SIGINT {
				cancel()
				return
			}
		}
	}()
	log.Info("sandboxd serve: listening", "socket", *socket)
	runner := session.New(session.Config{Log: log, Models: modelFactory(log), EvidenceReader: evidenceReader(),
		Hidden: []string{filepath.Dir(*socket)}})
	d := daemon.New(daemon.Config{Tokens: tokens, Runner: runner, Version: version(), Log: log, MaxExecs: *maxExecs, QuestionWait: *questionWait})
	if err := d.Serve(ctx, ln, 10*time.Second); err != nil && !errors.Is(err, net.ErrClosed) {
		return fail(err)
	}
	return 0
}

// serveStatus is `sandboxd serve status`.
func serveStatus(ctx context.Context, socket string, stdout io.Writer, fail func(error) int) int {
	c, err := daemon.Connect(ctx, socket, os.Getuid())
	if err != nil {
		return fail(err)
	}
	var h struct {
		UID    int   `json:"uid"`
		GID    int   `json:"gid"`
		Groups []int `json:"groups"`
	}
	var v struct {
		Version string `json:"version"`
		API     string `json:"api"`
	}
	if err := c.Do(ctx, "GET", "/v1/health", nil, &h); err != nil {
		return fail(err)
	}
	if err := c.Do(ctx, "GET", "/v1/version", nil, &v); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "daemon: up at %s (%s, API %s)\nyou are: uid %d, gid %d, groups %v\n", esc(socket), esc(v.Version), esc(v.API), h.UID, h.GID, h.Groups)
	return 0
}

// daemonSocket is the daemon's socket a client uses: $SANDBOXD_SOCKET,
// else the default.
func daemonSocket(getenv func(string) string) string {
	if s := getenv("SANDBOXD_SOCKET"); filepath.IsAbs(s) {
		return filepath.Clean(s)
	}
	return daemon.DefaultSocket
}

// hiddenPaths are sandboxd's paths no run may read: the daemon's socket
// directory, where every caller's token is (session.Config.Hidden).
func hiddenPaths(getenv func(string) string) []string {
	return []string{filepath.Dir(daemonSocket(getenv))}
}
