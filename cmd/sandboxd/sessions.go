package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/cmd/internal/daemonrun"
	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/intents"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/session"
)

const sessionUsage = `Usage:
  sandboxd session status ID   say whether the session is locked down, and why
                               (exit 1 when it is), and list its intents
  sandboxd session reset ID    lift the session's lockdown (asks on your terminal)
`

// sessionCommand is `sandboxd session status|reset ID`. A lockdown is
// lifted only by a person: reset asks on the controlling terminal, and
// sandboxd's state, where the breaker lives, is out of a sandboxed
// command's reach (so a command cannot reset its own session, whatever
// terminal it fakes).
func sessionCommand(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		return usageError(stderr, sessionUsage, "")
	case isHelp(args[0]):
		fmt.Fprint(stdout, sessionUsage)
		return 0
	case args[0] != "status" && args[0] != "reset":
		return usageError(stderr, sessionUsage, fmt.Sprintf("unknown session command %q", args[0]))
	}
	verb := args[0]
	fs := flag.NewFlagSet("sandboxd session "+verb, flag.ContinueOnError)
	if code, ok := parseFlags(fs, args[1:], sessionUsage, stdout, stderr); !ok {
		return code
	}
	switch {
	case fs.NArg() == 0 || fs.Arg(0) == "":
		return usageError(stderr, sessionUsage, "session "+verb+" needs a session ID")
	case fs.NArg() > 1:
		return usageError(stderr, sessionUsage, "session "+verb+" takes one session ID, not "+quoted(fs.Args()))
	}
	fail := func(msg string) int {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(msg))
		return exitSandboxd
	}
	caller, err := runcmd.CallerOf(getenv)
	if err != nil {
		return fail(session.Public(err))
	}
	name := fs.Arg(0)
	id := session.Scoped(caller, name)
	br := broker.NewBreaker(caller.Layout().Breaker())
	if err := br.Adopt(id, name); err != nil {
		return fail("the session's state cannot be read here")
	}
	locked, why, err := br.Locked(id)
	if err != nil {
		return fail("the session's state cannot be read here")
	}
	if verb == "status" {
		return sessionStatus(ctx, caller, name, locked, why, stdout, stderr)
	}
	if !locked {
		fmt.Fprintf(stdout, "session %s is not locked down\n", esc(name))
		return 0
	}
	if getenv("SANDBOXD") != "" {
		return fail("a lockdown is lifted from your own terminal, not from inside a sandbox")
	}
	if in, ok := stdin.(*os.File); !ok || !daemonrun.IsTerminal(in) {
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

// sessionStatus says whether the session is locked down, and lists a
// person's live intents for it. Exit status 1 when it is locked down.
func sessionStatus(ctx context.Context, caller session.Caller, name string, locked bool, why string, stdout, stderr io.Writer) int {
	if locked {
		fmt.Fprintf(stdout, "session %s is locked down: %s\n", esc(name), esc(why))
	} else {
		fmt.Fprintf(stdout, "session %s is not locked down\n", esc(name))
	}
	ins, err := intents.New(caller.Layout().Intents()).List(ctx, session.Scoped(caller, name))
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "sandboxd: the session's intents cannot be read here, and none is used\n")
	case len(ins) == 0:
		fmt.Fprintf(stdout, "no intents\n")
	}
	for _, in := range ins {
		fmt.Fprintf(stdout, "intent %s: %s, until %s (approved at the %s)\n", esc(in.ID), esc(in.Scope),
			in.ExpiresAt.Local().Format("2006-01-02 15:04:05"), esc(in.By))
	}
	if locked {
		return 1
	}
	return 0
}
