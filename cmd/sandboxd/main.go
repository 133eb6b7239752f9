// Command sandboxd runs an AI agent's shell commands in a kernel-enforced
// sandbox. This file only dispatches: the re-exec'd sandbox helper first,
// then the subcommands, each of which wires packages together.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/sandboxd/sandboxd/sandbox"
)

func main() {
	// The helper must run before anything else touches the process.
	if sandbox.IsHelper(os.Args) {
		sandbox.HelperMain()
	}
	if sandbox.IsProbe(os.Args) {
		sandbox.ProbeMain()
	}
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

const usage = `sandboxd runs shell commands in a kernel-enforced sandbox.

Usage:
  sandboxd run [flags] -- COMMAND [ARG...]
  sandboxd run [flags] -c 'shell command'
  sandboxd doctor [--json]
  sandboxd recover [--json]
  sandboxd version

Run "sandboxd run -h" for the run flags.
`

// run is the whole program; main only supplies the process's environment.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitSandboxd
	}
	switch args[0] {
	case "run":
		return runCommand(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "recover":
		return recoverCommand(args[1:], getenv, stdout, stderr)
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
