package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"os"

	"github.com/sandboxd/sandboxd/cmd/internal/daemonrun"
	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/suggest"
)

const suggestUsage = `Usage: sandboxd suggest --report FILE [--policy FILE]

For each boundary the report of a run (sandboxd run --report FILE) shows
denied, prints the rule that would allow exactly that boundary next time,
as TOML for your own policy file: --policy FILE, or the one run loads by
default (~/.config/sandboxd/policy.toml), whose path it names. A denial no
allow rule can lift (a hard deny, a policy deny rule, a lockdown, a
failure) gets only why. Nothing is written: you add the rules you want.

Exit status: 0 printed, 1 the report could not be read, 2 usage.
`

// maxReport bounds the report suggest reads.
const maxReport = 64 << 20

// suggestCommand is `sandboxd suggest`: the rules a person could add to
// their own policy for a report's denials (the logic is suggest.Text).
func suggestCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandboxd suggest", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	report := fs.String("report", "", "the report of a run (sandboxd run --report FILE)")
	policyFile := fs.String("policy", "", "your policy file (default: ~/.config/sandboxd/policy.toml)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, suggestUsage)
			return 0
		}
		fmt.Fprintf(stderr, "sandboxd: %s\n%s", esc(err.Error()), suggestUsage)
		return 2
	}
	if *report == "" || fs.NArg() != 0 {
		fmt.Fprint(stderr, suggestUsage)
		return 2
	}
	fail := func(msg string) int {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(msg))
		return 1
	}
	bs, ws, err := readReport(*report)
	if err != nil {
		return fail(publicerr.Message(err, "the report cannot be read"))
	}
	caller, err := runcmd.CallerOf(getenv)
	if err != nil {
		return fail(session.Public(err))
	}
	// The hard denies are checked under the policy a run would load; a
	// --policy file that does not exist yet (the rules are for it) is
	// none, and the default one's deny rules count instead.
	checkWith := *policyFile
	if _, err := os.Stat(caller.PolicyFile(checkWith)); checkWith != "" && errors.Is(err, iofs.ErrNotExist) {
		checkWith = ""
	}
	log := slog.New(slog.DiscardHandler)
	before, err := session.New(session.Config{Log: log}).BeforeAllow(context.Background(), caller, checkWith, ws)
	if err != nil {
		return fail("cannot load your policy to check the report against it: " + session.Public(err))
	}
	fmt.Fprint(stdout, suggest.Text(bs, caller.Home, caller.PolicyFile(*policyFile), before))
	return 0
}

// readReport reads the boundaries and the workspace of a run's report.
// Its errors are public: the file is the caller's, and what is wrong
// with it is said in sandboxd's words (a syscall's reason in
// parentheses), never in os's or encoding/json's.
func readReport(file string) ([]suggest.Boundary, string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, "", publicerr.Errorf(err, "the report %s cannot be read%s", file, daemonrun.KernelReason(err))
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxReport+1))
	switch {
	case err != nil:
		return nil, "", publicerr.Errorf(err, "the report %s cannot be read%s", file, daemonrun.KernelReason(err))
	case len(b) > maxReport:
		return nil, "", publicerr.Errorf(nil, "%s is over %d MiB: not a report of sandboxd run", file, maxReport>>20)
	}
	var rep struct {
		Boundaries *[]suggest.Boundary `json:"boundaries"`
		Workspace  string              `json:"workspace"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, "", publicerr.Errorf(err, "%s is not a report of sandboxd run: it is not valid JSON (at byte %d)", file, syn.Offset)
		}
		return nil, "", publicerr.Errorf(err, "%s is not a report of sandboxd run: its JSON does not have a report's fields and types", file)
	}
	if rep.Boundaries == nil {
		return nil, "", publicerr.Errorf(nil, "%s is not a report of sandboxd run: it has no boundaries", file)
	}
	return *rep.Boundaries, rep.Workspace, nil
}
