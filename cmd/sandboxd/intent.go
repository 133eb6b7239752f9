package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/intents"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/termfilter"
)

// intentArgs are approve's flags for an intent.
type intentArgs struct {
	breakGlass             bool
	session, scope, revoke string
	dur                    time.Duration
	rest                   []string
}

// intentCommand is `sandboxd approve --scope RULE` and `--revoke ID`: a
// person approves, at their own terminal, every request one scope covers
// for one session, or revokes such an intent. Approving asks on
// /dev/tty, never inside a sandbox, shows the scope in its normal form
// and what it could allow, and issues it only on a typed "yes";
// revoking only narrows, and asks nothing. Exit status: 0 done, 1
// refused or not confirmed, 2 the command line is wrong, 125 sandboxd
// could not ask.
func intentCommand(a intentArgs, fs *flag.FlagSet, getenv func(string) string, stdout, stderr io.Writer) int {
	switch {
	case a.breakGlass:
		return usageError(stderr, withFlags(approveUsage, fs), "break-glass takes no --scope, --revoke or --for: an intent is approved with sandboxd approve")
	case len(a.rest) > 0:
		return usageError(stderr, withFlags(approveUsage, fs), extraArgs("approve", a.rest))
	case a.session == "":
		return usageError(stderr, withFlags(approveUsage, fs), "approve needs --session ID")
	case a.scope != "" && a.revoke != "":
		return usageError(stderr, withFlags(approveUsage, fs), "approve takes --scope or --revoke, not both")
	case a.scope == "" && a.revoke == "":
		return usageError(stderr, withFlags(approveUsage, fs), "--for goes with --scope")
	case a.dur < 0 || a.dur > intents.MaxTTL:
		return usageError(stderr, withFlags(approveUsage, fs), "--for is a duration of at most 24h")
	}
	fail := func(msg string) int {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(msg))
		return exitSandboxd
	}
	caller, err := runcmd.CallerOf(getenv)
	if err != nil {
		return fail(session.Public(err))
	}
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	runner := session.New(session.Config{Log: quiet})
	own := runcmd.OwnAuditLog(caller, quiet)
	defer runcmd.CloseAudit(own, quiet)
	id := session.Scoped(caller, a.session)
	if a.revoke != "" {
		in, err := runner.RevokeIntent(ctx, caller, a.session, a.revoke, intentRecord(own, caller.UID, id, "revoked (sandboxd approve --revoke)"))
		if in.ID == "" {
			fmt.Fprintf(stderr, "sandboxd: nothing was revoked: %s\n", esc(session.Public(err)))
			return 1
		}
		fmt.Fprintf(stdout, "session %s: intent %s (%s) is revoked\n", esc(a.session), esc(in.ID), esc(in.Scope))
		if err != nil {
			fmt.Fprintf(stderr, "sandboxd: the revocation could not be recorded in your audit log\n")
		}
		return 0
	}
	if getenv("SANDBOXD") != "" {
		return fail("approve works only at your own terminal, never inside a sandbox")
	}
	tty, err := openTerminal()
	if err != nil {
		return fail("approve asks on your terminal (/dev/tty), and there is none here: run it in a terminal of your own, outside any sandbox")
	}
	defer tty.close()
	return approveIntent(ctx, runner, caller, tty, a, intentRecord(own, caller.UID, id, "issued by a person at their terminal (sandboxd approve --scope)"), stdout, stderr)
}

// approveIntent shows the scope and what it could allow, and issues the
// intent on a typed yes.
func approveIntent(ctx context.Context, runner *session.Runner, caller session.Caller, tty *terminal, a intentArgs, record func(intents.Intent) error, stdout, stderr io.Writer) int {
	sc, err := runner.PreviewIntent(ctx, caller, a.scope)
	if err != nil {
		fmt.Fprintf(stderr, "sandboxd: nothing was approved: %s\n", esc(session.Public(err)))
		return 1
	}
	ttl := a.dur
	if ttl == 0 {
		ttl = intents.DefaultTTL
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "\r\n%s---- sandboxd: an intent for session %s ----%s\r\n", termfilter.FrameOn, esc(a.session), termfilter.FrameOff)
	fmt.Fprintf(&b, "  scope:   %s\r\n", esc(sc.Text))
	for _, line := range sc.Allows {
		fmt.Fprintf(&b, "  allows:  %s\r\n", esc(line))
	}
	fmt.Fprintf(&b, "  for:     %s (until %s), unless revoked\r\n", ttl, time.Now().Add(ttl).Local().Format("2006-01-02 15:04"))
	fmt.Fprintf(&b, "  (fingerprint %s)\r\n", sc.Hash[:12])
	answer, err := tty.ask(b.String(), "Approve exactly this scope? Type yes "+promptEnd, time.Now().Add(answerTime))
	if err != nil {
		fmt.Fprintf(stderr, "sandboxd: nothing was approved: %s\n", esc(review.NoAnswer(err)))
		return 1
	}
	if strings.TrimSpace(answer) != "yes" {
		fmt.Fprintf(stderr, "sandboxd: nothing was approved: the answer was not yes\n")
		return 1
	}
	in, err := runner.GrantIntent(ctx, caller, a.session, sc.Text, sc.Hash, ttl, "terminal", record)
	if err != nil {
		msg := session.Public(err)
		if errors.Is(err, errUnrecorded) {
			msg = "the audit log could not be written, so nothing is issued"
		}
		fmt.Fprintf(stderr, "sandboxd: nothing was approved: %s\n", esc(msg))
		return 1
	}
	fmt.Fprintf(stdout, "session %s: intent %s allows %s until %s; revoke it with: sandboxd approve --session %s --revoke %s\n",
		esc(a.session), esc(in.ID), esc(in.Scope), in.ExpiresAt.Local().Format("2006-01-02 15:04:05"), esc(a.session), esc(in.ID))
	return 0
}
