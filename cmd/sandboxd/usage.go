package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/termfilter"
)

// exitUsage is the status of a command line sandboxd cannot make sense
// of, as for any Unix tool. run's own usage errors are 125 instead: its
// other statuses are the command's, and 2 could be the command's too.
const exitUsage = 2

// isHelp reports an argument asking for help, spelled as the flag
// package accepts it.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help":
		return true
	}
	return false
}

// usageError says what is wrong with the command line (when msg is not
// empty), then shows the usage, both on stderr.
func usageError(stderr io.Writer, usage, msg string) int {
	if msg != "" {
		// The arguments are the caller's text, maybe a command's.
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(msg))
	}
	fmt.Fprint(stderr, usage)
	return exitUsage
}

// parseFlags parses a subcommand's flags. When it returns false the
// subcommand is done and exits with code: help was asked for (the
// usage on stdout, 0) or the flags are wrong (a usage error, 2).
func parseFlags(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, true
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, withFlags(usage, fs))
		return 0, false
	}
	return usageError(stderr, withFlags(usage, fs), err.Error()), false
}

// withFlags is usage followed by fs's flags, when it has any
// (runcmd.WithFlags: run's usage is shown alike).
func withFlags(usage string, fs *flag.FlagSet) string { return runcmd.WithFlags(usage, fs) }

// extraArgs is the message for arguments a subcommand does not take,
// naming them; "" when there are none.
func extraArgs(name string, args []string) string {
	if len(args) == 0 {
		return ""
	}
	return fmt.Sprintf("%s takes no arguments, not %s", name, quoted(args))
}

// quoted is args, each quoted, separated by spaces.
func quoted(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(q, " ")
}

// esc shows a string that may come from the command (a path, a host, a
// rationale quoting one) without letting it control the terminal.
func esc(s string) string { return termfilter.Escape(s) }
