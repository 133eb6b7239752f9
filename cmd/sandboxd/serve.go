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
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/session"
	"golang.org/x/sys/unix"
)

const serveUsage = `Usage:
  sandboxd serve [--socket PATH]
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
	ln, tokens, err := listen(*socket)
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
	d := daemon.New(daemon.Config{Tokens: tokens, Runner: runner, Version: version(), Log: log})
	if err := d.Serve(ctx, ln, 10*time.Second); err != nil && !errors.Is(err, net.ErrClosed) {
		return fail(err)
	}
	return 0
}

// listen makes the socket's directory root's (0755), replaces a socket
// left by an earlier daemon, listens, and opens every user to connect
// (0666): the peer's credentials and token decide, not the mode.
func listen(socket string) (*net.UnixListener, *daemon.Tokens, error) {
	if os.Geteuid() != 0 {
		return nil, nil, publicerr.New("sandboxd serve runs as root: it acts for every user of the machine, each with that user's rights")
	}
	if !filepath.IsAbs(socket) {
		return nil, nil, publicerr.New("--socket must be an absolute path")
	}
	dir := filepath.Dir(socket)
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, publicerr.Wrap(err, "the socket's directory "+dir+" cannot be made")
		}
	}
	// A directory that was there is never taken over: it must already be
	// one only root may write, as every client checks.
	if st, err := os.Lstat(dir); err != nil || !st.IsDir() || owner(st) != 0 || st.Mode().Perm()&0o022 != 0 {
		return nil, nil, publicerr.New("the socket's directory " + dir + " must be a directory of root's that nobody else may write")
	}
	if st, err := os.Lstat(socket); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, nil, publicerr.New(socket + " exists and is not a socket")
		}
		os.Remove(socket)
	}
	tokens, err := daemon.NewTokens(filepath.Join(dir, "tokens"))
	if err != nil {
		return nil, nil, publicerr.Wrap(err, "the token directory cannot be made")
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return nil, nil, publicerr.Wrap(err, "cannot listen on "+socket)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(socket, 0o666); err != nil {
		ln.Close()
		return nil, nil, publicerr.Wrap(err, "cannot open "+socket+" to callers")
	}
	return ln, tokens, nil
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

// owner is the uid that owns a file.
func owner(st os.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}
