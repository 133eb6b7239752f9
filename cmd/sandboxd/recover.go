package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/layer"
	"github.com/sandboxd/sandboxd/runtext"
	"github.com/sandboxd/sandboxd/session"
)

const recoverUsage = `Usage: sandboxd recover [--json]

Finish, or roll back, every commit of a run's writes to its workspace
that a crash of sandboxd interrupted. Exits 1 when one could not be.
`

// recoverCommand is `sandboxd recover [--json]`.
func recoverCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandboxd recover", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	if code, ok := parseFlags(fs, args, recoverUsage, stdout, stderr); !ok {
		return code
	}
	if msg := extraArgs("recover", fs.Args()); msg != "" {
		return usageError(stderr, withFlags(recoverUsage, fs), msg)
	}
	caller, err := runcmd.CallerOf(getenv)
	if err != nil {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(session.Public(err)))
		return exitSandboxd
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rec, err := layer.Recover(caller.Layout().State, caller.ID(), log)
	if *asJSON {
		b, _ := json.MarshalIndent(struct {
			Recovered []layer.Recovered `json:"recovered"`
		}{append([]layer.Recovered{}, rec...)}, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else {
		for _, r := range rec {
			fmt.Fprintf(stdout, "%s: commit %s %s (%d ops)\n", esc(r.Workspace), esc(r.RunID), esc(r.Action), r.Ops)
			runtext.RecoveryConflicts(stdout, r)
		}
		if len(rec) == 0 {
			fmt.Fprintln(stdout, "nothing to recover")
		}
	}
	if err != nil {
		log.Error("recover", "err", err)
		fmt.Fprintln(stderr, "sandboxd: recover: not every interrupted commit could be finished or rolled back; each one left is kept for the next `sandboxd recover` (the cause is logged above)")
		return 1
	}
	return 0
}
