package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
)

const doctorUsage = `Usage: sandboxd doctor [--json]

Show what "sandboxd run" gets on this machine: the isolation, the
network mode and each check behind them. Exits 1 when run would be
degraded or refused.
`

// doctorCommand prints what `run` will get on this machine and exits
// non-zero when it would be degraded or refused.
func doctorCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandboxd doctor", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := parseFlags(fs, args, doctorUsage, stdout, stderr); !ok {
		return code
	}
	if msg := extraArgs("doctor", fs.Args()); msg != "" {
		return usageError(stderr, withFlags(doctorUsage, fs), msg)
	}
	caller, err := runcmd.CallerOf(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(session.Public(err)))
		return exitSandboxd
	}
	helper := runcmd.FindHelper()
	d := sandbox.Doctor(caller.UID, caller.GID, caller.Layout().State, helper.File)
	// Which program runs as the helper, after the kernel and the caller.
	d.Checks = slices.Insert(d.Checks, min(2, len(d.Checks)), sandbox.Check{Name: "helper", OK: !helper.Refused, Detail: helper.Describe()},
		sandbox.Check{Name: "front", OK: true, Detail: frontDetail()})
	if *asJSON {
		b, _ := json.MarshalIndent(d, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		for _, c := range d.Checks {
			mark := "ok  "
			if !c.OK {
				mark = "WARN"
			}
			fmt.Fprintf(stdout, "%s %-17s %s\n", mark, c.Name, c.Detail)
		}
		fmt.Fprintln(stdout)
		switch {
		case d.Refuses != "":
			fmt.Fprintf(stdout, "run: REFUSES: %s\n", d.Refuses)
		case len(d.Degraded) > 0:
			fmt.Fprintf(stdout, "run: isolation %s, network %s, DEGRADED:\n", d.Isolation, d.NetworkMode)
			for _, r := range d.Degraded {
				fmt.Fprintf(stdout, "  - %s\n", r)
			}
		default:
			fmt.Fprintf(stdout, "run: isolation %s, network %s, nothing degraded\n", d.Isolation, d.NetworkMode)
		}
	}
	if d.Refuses != "" || len(d.Degraded) > 0 {
		return 1
	}
	return 0
}
