// Command sandboxd runs an AI agent's shell commands in a kernel-enforced
// sandbox. This file only dispatches: the re-exec'd sandbox helper first,
// then the subcommands, each of which wires packages together.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"

	"github.com/sandboxd/sandboxd/evidence"
	"github.com/sandboxd/sandboxd/sandbox/confine"
	"golang.org/x/sys/unix"
)

func main() { os.Exit(start(os.Args)) }

// start is the process: the re-exec'd helpers first, then the CLI with
// this process's environment, streams and signals.
func start(args []string) int {
	// The helper must run before anything else touches the process.
	if confine.IsHelper(args) {
		confine.Main()
	}
	if confine.IsProbe(args) {
		confine.ProbeMain()
	}
	if evidence.IsReader(args) {
		// The reviewer's reader, run as a command inside a sandbox.
		return evidence.Reader(os.Stdin, os.Stdout)
	}
	// Only 0-2 of what sandboxd inherited reach a helper or a command.
	unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	// The signals a person sends sandboxd go to the command's tree.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH)
	defer signal.Stop(sigs)
	return run(context.Background(), args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr, sigs)
}

const usage = `sandboxd runs shell commands in a kernel-enforced sandbox.

Usage:
  sandboxd run [flags] -- COMMAND [ARG...]
  sandboxd run [flags] -c 'shell command'
  sandboxd doctor [--json]
  sandboxd recover [--json]
  sandboxd cache list|prune
  sandboxd session status|reset ID
  sandboxd approve --session ID
  sandboxd break-glass --session ID
  sandboxd review eval [--policy FILE] [--json] CORPUS.jsonl
  sandboxd version

Run "sandboxd run -h" for the run flags.
`

// run is the whole program; main only supplies the process's environment.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitSandboxd
	}
	switch args[0] {
	case "run":
		return runCommand(ctx, args[1:], getenv, stdin, stdout, stderr, sigs)
	case "session":
		return sessionCommand(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "approve", "break-glass":
		return overrideCommand(args[0] == "break-glass", args[1:], getenv, stdout, stderr)
	case "recover":
		return recoverCommand(args[1:], getenv, stdout, stderr)
	case "cache":
		return cacheCommand(args[1:], getenv, stdout, stderr)
	case "review":
		return reviewCommand(ctx, args[1:], getenv, stdout, stderr, sigs)
	case "doctor":
		return doctorCommand(args[1:], getenv, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, version())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "sandboxd: unknown command \"%s\" (see sandboxd help)\n", esc(args[0]))
		return exitSandboxd
	}
}
