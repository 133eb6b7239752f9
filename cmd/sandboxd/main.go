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
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/adapters/agenthook"
	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/evidence"
	"github.com/sandboxd/sandboxd/runflags"
	"github.com/sandboxd/sandboxd/sandbox/confine"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/sibling"
	"golang.org/x/sys/unix"
)

func main() { os.Exit(start(os.Args)) }

// start is the process: the re-exec'd helpers first, then the CLI with
// this process's environment, streams and signals.
func start(args []string) int {
	// The front's stamp is read and removed before anything could pass
	// it on; a core run directly has none.
	if why := runcmd.FromFront("core " + coreName); why != "" {
		fmt.Fprintf(os.Stderr, "sandboxd: %s\n", why)
		return exitSandboxd
	}
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
	// Executed through a descriptor (the front's way), the process is
	// named after it; not before here: the helper, the probe and the
	// reader run inside a sandbox, whose ruleset would refuse the write.
	sibling.Named(args[0])
	if len(args) == 2 && args[1] == runcmd.ModelArg {
		// One prompt for the model, from sandboxd-run (which links no
		// model client).
		return runcmd.ServeModel(os.Stdin, os.Stdout, os.Stderr, completeCall)
	}
	// A run allocates a few megabytes and keeps little of them: at the
	// runtime's default (a collection each time the heap doubles, from
	// 4 MB) a command run embedded pays one collection and a daemon one
	// or two per command (measured: docs/BENCHMARKS.md). Four times the
	// live heap instead, 16 MB at the start; GOGC, when set, stands.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	// Only 0-2 of what sandboxd inherited reach a helper or a command.
	if filepath.Base(args[0]) == agenthook.ClaudeShellName {
		// Claude Code's shell prefix is one program: this binary, by a
		// link of that name.
		args = append([]string{args[0], "hook", "claude-code-shell"}, args[1:]...)
	}
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
  sandboxd mcp [flags]
  sandboxd serve [status] [--socket PATH]
  sandboxd hook install|status|uninstall claude-code|codex
  sandboxd doctor [--json]
  sandboxd recover [--json]
  sandboxd cache list|prune
  sandboxd session status|reset ID
  sandboxd approve --session ID
  sandboxd break-glass --session ID
  sandboxd suggest --report FILE [--policy FILE]
  sandboxd audit verify|show|report|export
  sandboxd review eval [--policy FILE] [--json] CORPUS.jsonl
  sandboxd version
  sandboxd help [COMMAND [SUBCOMMAND]]

"sandboxd COMMAND -h" or "sandboxd help COMMAND" shows a command's usage
and flags, on stdout. A command line sandboxd cannot make sense of is a
usage error, exit 2; run's are 125 (its other statuses are the command's).
`

// run is the whole program; main only supplies the process's environment.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	if len(args) == 0 {
		return usageError(stderr, usage, "")
	}
	switch args[0] {
	case "run":
		return runcmd.Command(ctx, args[1:], getenv, stdin, stdout, stderr, sigs, runOptions(nil))
	case "serve":
		return serveCommand(ctx, args[1:], getenv, stdout, stderr, sigs)
	case "mcp":
		return mcpCommand(ctx, args[1:], getenv, stdin, stdout, stderr, sigs)
	case "hook":
		return hookCommand(ctx, args[1:], getenv, stdin, stdout, stderr, sigs)
	case "session":
		return sessionCommand(ctx, args[1:], getenv, stdin, stdout, stderr)
	case "approve", "break-glass":
		return overrideCommand(args[0] == "break-glass", args[1:], getenv, stdout, stderr)
	case "suggest":
		return suggestCommand(args[1:], getenv, stdout, stderr)
	case "audit":
		return auditCommand(ctx, args[1:], getenv, stdout, stderr)
	case "recover":
		return recoverCommand(args[1:], getenv, stdout, stderr)
	case "cache":
		return cacheCommand(args[1:], getenv, stdout, stderr)
	case "review":
		return reviewCommand(ctx, args[1:], getenv, stdout, stderr, sigs)
	case "doctor":
		return doctorCommand(args[1:], getenv, stdout, stderr)
	case "version", "--version", "-version":
		return versionCommand(args[1:], stdout, stderr)
	case "help":
		words, code, ok := helpWords(args[1:], stdout, stderr)
		if !ok {
			return code
		}
		return run(ctx, words, getenv, stdin, stdout, stderr, sigs)
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	what := "command"
	if strings.HasPrefix(args[0], "-") {
		what = "flag"
	}
	return usageError(stderr, usage, fmt.Sprintf("unknown %s %q", what, args[0]))
}

// helpWords turns `help COMMAND [SUBCOMMAND]` into `COMMAND [SUBCOMMAND]
// -h`. Only the command groups take a subcommand: nothing after run's
// name may become a command to run. When ok is false help is done and
// exits with code (a bare help shows the usage).
func helpWords(words []string, stdout, stderr io.Writer) (cmd []string, code int, ok bool) {
	switch {
	case len(words) == 0 || len(words) == 1 && isHelp(words[0]):
		fmt.Fprint(stdout, usage)
		return nil, 0, false
	case len(words) > 2 || len(words) == 2 && !slices.Contains([]string{"cache", "session", "review"}, words[0]):
		return nil, usageError(stderr, usage, "help takes a command, and for cache, session and review a subcommand, not "+quoted(words)), false
	}
	return append(slices.Clone(words), "-h"), 0, true
}

// exitSandboxd is the status when sandboxd itself fails
// (docs/ARCHITECTURE.md §3.1); 124, 126 and 127 come from the sandbox.
const exitSandboxd = session.ExitSandboxd

// durationFlag is a duration whose parse error names the fix.
type durationFlag = runflags.Duration
