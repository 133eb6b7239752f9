package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/session"
)

const sessionUsage = `Usage:
  sandboxd session status ID   say whether the session is locked down, and why
  sandboxd session reset ID    lift the session's lockdown (asks on your terminal)
`

// sessionCommand is `sandboxd session status|reset ID`. A lockdown is
// lifted only by a person: reset asks on the controlling terminal, and
// sandboxd's state, where the breaker lives, is out of a sandboxed
// command's reach (so a command cannot reset its own session, whatever
// terminal it fakes).
func sessionCommand(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 2 || (args[0] != "status" && args[0] != "reset") || args[1] == "" {
		fmt.Fprint(stderr, sessionUsage)
		return exitSandboxd
	}
	fail := func(msg string) int {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(msg))
		return exitSandboxd
	}
	caller, err := callerOf(getenv)
	if err != nil {
		return fail(session.Public(err))
	}
	name := args[1]
	id := session.Scoped(caller, name)
	br := broker.NewBreaker(filepath.Join(caller.StateDir(), "breaker"))
	if err := br.Adopt(id, name); err != nil {
		return fail("the session's state cannot be read here")
	}
	locked, why, err := br.Locked(id)
	if err != nil {
		return fail("the session's state cannot be read here")
	}
	if !locked {
		fmt.Fprintf(stdout, "session %s is not locked down\n", esc(name))
		return 0
	}
	if args[0] == "status" {
		fmt.Fprintf(stdout, "session %s is locked down: %s\n", esc(name), esc(why))
		return 1
	}
	if getenv("SANDBOXD") != "" {
		return fail("a lockdown is lifted from your own terminal, not from inside a sandbox")
	}
	if in, ok := stdin.(*os.File); !ok || !isTerminal(in) {
		return fail("sandboxd session reset asks on a terminal; run it in one")
	}
	yes, no := review.Confirm(ctx, "", fmt.Sprintf("sandboxd: session %s is locked down (%s). Lift the lockdown?", name, why), 0)
	if !yes {
		return fail("the lockdown stays: " + no)
	}
	if err := br.Lift(id); err != nil {
		return fail("the lockdown could not be lifted: sandboxd's state is not writable here")
	}
	fmt.Fprintf(stdout, "session %s: lockdown lifted\n", esc(name))
	return 0
}
