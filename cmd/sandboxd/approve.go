package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/cmd/internal/daemonrun"
	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/overrides"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/termfilter"
	"golang.org/x/sys/unix"
)

const approveUsage = `Usage:
  sandboxd approve --session ID       allow one exact retry of one of the session's model denials
  sandboxd break-glass --session ID   the same for a denial the model judged critical (you type a phrase)
  sandboxd approve --session ID --scope 'RULE' [--for DURATION]
                                      allow, for this session, every request RULE covers (an intent;
                                      default 8h, at most 24h): shown in its normal form, issued on a typed yes
  sandboxd approve --session ID --revoke INTENT
                                      revoke one of the session's intents
  sandboxd approve --page             a one-time link to the daemon's approvals page, on your terminal

Both list the session's recent model denials and ask on your terminal
(/dev/tty); they refuse to run anywhere else, and never inside a sandbox.
The override is for exactly the denied request (command, cwd, path or
destination, session, agent, intent), is used once, and expires 60 s after
it is issued: run the same command again in the same session. Exit
status: 0 when an override was issued, 1 when none was, 125 when
sandboxd could not ask.

approve --page asks the daemon (serve --approvals-addr) for a link that
signs your browser in to its approvals page as you, once, within 2
minutes; it is written to your terminal (/dev/tty) only, never to
standard output or error, where an agent could read it.
`

// answerTime is how long a person has to answer each question.
const answerTime = 60 * time.Second

// promptEnd ends every question approve and break-glass ask.
const promptEnd = "(60 s to answer)"

// overrideCommand is `sandboxd approve` and, with breakGlass,
// `sandboxd break-glass`: a person turns one model denial of a session
// into one exact retry. It works only at a real terminal outside any
// sandbox: the controlling terminal is where it asks, and the state it
// writes is sandboxd's, out of a sandboxed command's reach (the SANDBOXD
// variable check only says so sooner). Exit status: 0 an override was
// issued, 1 none was (nothing chosen, refused), 2 the command line is
// wrong, 125 sandboxd could not ask.
func overrideCommand(breakGlass bool, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	name := map[bool]string{false: "approve", true: "break-glass"}[breakGlass]
	fs := flag.NewFlagSet("sandboxd "+name, flag.ContinueOnError)
	sess := fs.String("session", "", "the `ID` of the session whose model denials to show")
	scope := fs.String("scope", "", "approve an intent: every request the `RULE` covers, for the session")
	revoke := fs.String("revoke", "", "revoke the session's intent `INTENT`")
	dur := fs.Duration("for", 0, "how long the intent lasts (`DURATION`; default 8h, at most 24h)")
	page := fs.Bool("page", false, "print a one-time link to the daemon's approvals page on your terminal (no other flag)")
	if code, ok := parseFlags(fs, args, approveUsage, stdout, stderr); !ok {
		return code
	}
	if *page {
		return pageLink(fs, breakGlass, getenv, stdout, stderr)
	}
	if *scope != "" || *revoke != "" || *dur != 0 {
		return intentCommand(intentArgs{breakGlass: breakGlass, session: *sess, scope: *scope, revoke: *revoke, dur: *dur, rest: fs.Args()},
			fs, getenv, stdout, stderr)
	}
	if msg := extraArgs(name, fs.Args()); msg != "" {
		return usageError(stderr, withFlags(approveUsage, fs), msg)
	}
	if *sess == "" {
		return usageError(stderr, withFlags(approveUsage, fs), name+" needs --session ID")
	}
	fail := func(msg string) int {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(msg))
		return exitSandboxd
	}
	if getenv("SANDBOXD") != "" {
		return fail(name + " works only at your own terminal, never inside a sandbox")
	}
	tty, err := openTerminal()
	if err != nil {
		return fail(name + " asks on your terminal (/dev/tty), and there is none here: run it in a terminal of your own, outside any sandbox")
	}
	defer tty.close()
	caller, err := runcmd.CallerOf(getenv)
	if err != nil {
		return fail(session.Public(err))
	}
	store := overrides.New(caller.Layout().Overrides())
	id := session.Scoped(caller, *sess)
	denials, err := store.Denials(id)
	if err != nil {
		return fail(refusal(err, *sess, store.File(id)))
	}
	if len(denials) == 0 {
		fmt.Fprintf(stdout, "session %s has no model denials to approve\n", esc(*sess))
		return 1
	}
	d, why := tty.choose(*sess, denials, breakGlass)
	if why != "" {
		fmt.Fprintf(stderr, "sandboxd: nothing was approved: %s\n", esc(why))
		return 1
	}
	// The override is recorded in the caller's audit log before it
	// exists: one the log cannot take is not issued.
	quiet := slog.New(slog.DiscardHandler)
	own := runcmd.OwnAuditLog(caller, quiet)
	defer runcmd.CloseAudit(own, quiet)
	record := overrideRecord(own, caller, id, d, breakGlass)
	var o overrides.Override
	if breakGlass {
		o, err = tty.breakGlass(store, id, d, record)
	} else if err = record("approved once by a person at their terminal (sandboxd approve)"); err == nil {
		o, err = store.Approve(id, d.Hash)
	}
	if err != nil && !errors.Is(err, errUnrecorded) {
		record("not issued: " + refusal(err, *sess, store.File(id)))
	}
	if err != nil {
		fmt.Fprintf(stderr, "sandboxd: nothing was approved: %s\n", esc(refusal(err, *sess, store.File(id))))
		return 1
	}
	fmt.Fprintf(stdout, "session %s: one retry of %s %s is allowed until %s; run the same command again in this session within %d s\n",
		esc(*sess), esc(string(d.Operation)), esc(d.Target()), o.ExpiresAt.Local().Format("15:04:05"), int(overrides.TTL.Seconds()))
	return 0
}

// refusal is the sentence for why no override was issued.
func refusal(err error, sess, file string) string {
	var none noAnswerError
	switch {
	case errors.As(err, &none):
		return none.why
	case errors.Is(err, overrides.ErrCritical):
		return "the model judged this request critical (or gave no risk level it can be held to), so it cannot be approved; only `sandboxd break-glass --session " + sess + "` can override it"
	case errors.Is(err, overrides.ErrReissue):
		return "this request was already approved once in session " + sess + ", and an override is never issued twice for the same request"
	case errors.Is(err, overrides.ErrNoDenial):
		return "that denial is no longer recorded in session " + sess
	case errors.Is(err, overrides.ErrPhrase):
		return "the phrase typed is not the one shown"
	case errors.Is(err, overrides.ErrPhraseExpired):
		return "the phrase was not typed within 60 s"
	case errors.Is(err, overrides.ErrCorrupt):
		return "the session's override state is damaged, and nothing is approved from it (remove " + file + " to start over)"
	}
	return "the session's override state cannot be read or written here"
}

// choose lists the denials (most recent first, numbered) and asks which
// one; why says, when none was chosen, why not.
func (t *terminal) choose(sess string, ds []overrides.Denial, breakGlass bool) (overrides.Denial, string) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "\r\n%s---- sandboxd: model denials in session %s (most recent first) ----%s\r\n", termfilter.FrameOn, esc(sess), termfilter.FrameOff)
	for i, d := range ds {
		note := ""
		switch {
		case d.Overridden:
			note = " (already approved once)"
		case d.Critical() && !breakGlass:
			note = " (critical: only break-glass)"
		}
		fmt.Fprintf(&b, "  %d. %s  %s %s  risk %s: %s%s\r\n", i+1, d.Time.Local().Format("2006-01-02 15:04:05"),
			esc(string(d.Operation)), esc(d.Target()), esc(d.Risk), esc(d.Rationale), note)
		fmt.Fprintf(&b, "       command: %s\r\n", esc(d.Command))
	}
	question := "Approve which one, once? Type its number, or Enter for none " + promptEnd
	if breakGlass {
		question = "Break glass for which one? Type its number, or Enter for none " + promptEnd
	}
	answer, err := t.ask(b.String(), question, time.Now().Add(answerTime))
	if err != nil {
		return overrides.Denial{}, review.NoAnswer(err)
	}
	answer = strings.TrimSpace(answer)
	if answer == "" {
		return overrides.Denial{}, "none was chosen"
	}
	n, err := strconv.Atoi(answer)
	if err != nil || n < 1 || n > len(ds) {
		return overrides.Denial{}, "the answer was not a number from the list"
	}
	return ds[n-1], ""
}

// breakGlass shows what a break-glass override allows and has the person
// type a random phrase back within a minute.
func (t *terminal) breakGlass(store *overrides.Store, id string, d overrides.Denial, record func(note string) error) (overrides.Override, error) {
	ch, err := store.Challenge(id, d.Hash)
	if err != nil {
		return overrides.Override{}, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "\r\n%s---- sandboxd: break glass ----%s\r\n", termfilter.FrameOn, termfilter.FrameOff)
	fmt.Fprintf(&b, "  boundary:    %s %s %s\r\n", esc(string(d.Surface)), esc(string(d.Operation)), esc(d.Target()))
	fmt.Fprintf(&b, "  command:     %s\r\n", esc(d.Command))
	fmt.Fprintf(&b, "  the model:   risk %s: %s\r\n", esc(d.Risk), esc(d.Rationale))
	fmt.Fprintf(&b, "  request:     %s (fingerprint of the request hash)\r\n", overrides.Fingerprint(d.Hash))
	fmt.Fprintf(&b, "This allows exactly that request once, against the model's judgement.\r\n")
	fmt.Fprintf(&b, "To confirm, type:  %s\r\n", ch.Phrase)
	typed, err := t.ask(b.String(), "Type the phrase exactly "+promptEnd, ch.Deadline())
	if err != nil {
		return overrides.Override{}, noAnswerError{review.NoAnswer(err)}
	}
	if err := record("a person typed the break-glass phrase at their terminal (sandboxd break-glass)"); err != nil {
		return overrides.Override{}, err
	}
	return store.BreakGlass(ch, typed)
}

// noAnswerError is a question nobody answered; its text is a fixed
// sentence.
type noAnswerError struct{ why string }

func (e noAnswerError) Error() string { return e.why }

// terminal is the person's controlling terminal: written and read
// directly, never through sandboxd's standard streams.
type terminal struct {
	// wfd writes the questions; rfd, non-blocking, reads the answers.
	wfd, rfd int
}

// openTerminal opens the controlling terminal for reading and writing.
func openTerminal() (*terminal, error) {
	wfd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/tty: %w", err)
	}
	rfd, err := unix.Open("/dev/tty", unix.O_RDONLY|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		unix.Close(wfd)
		return nil, fmt.Errorf("open /dev/tty: %w", err)
	}
	return &terminal{wfd: wfd, rfd: rfd}, nil
}

// close closes both descriptors.
func (t *terminal) close() {
	unix.Close(t.rfd)
	unix.Close(t.wfd)
}

// ask shows text and the framed question, dropping anything typed
// before, and reads one line by deadline.
func (t *terminal) ask(text, question string, deadline time.Time) (string, error) {
	unix.IoctlSetInt(t.wfd, unix.TCFLSH, unix.TCIFLUSH)
	out := text + termfilter.FrameOn + question + termfilter.FrameOff + " "
	if _, err := unix.Write(t.wfd, []byte(out)); err != nil {
		return "", fmt.Errorf("write the terminal: %w", err)
	}
	line, err := review.ReadAnswer(context.Background(), t.rfd, time.Until(deadline))
	if err != nil {
		unix.Write(t.wfd, []byte("\r\n"))
	}
	return line, err
}

// pageLink is `sandboxd approve --page`: the daemon's one-time link to
// its approvals page, for the caller, written to the controlling
// terminal only. The link is a secret that signs a browser in as the
// caller: on stdout or stderr an agent running this command could read
// it, so there it is never written.
func pageLink(fs *flag.FlagSet, breakGlass bool, getenv func(string) string, stdout, stderr io.Writer) int {
	others := fs.NArg()
	fs.Visit(func(f *flag.Flag) {
		if f.Name != "page" {
			others++
		}
	})
	if breakGlass || others > 0 {
		return usageError(stderr, withFlags(approveUsage, fs), "--page takes no other flag or argument, and break-glass has no page")
	}
	fail := func(msg string) int {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(msg))
		return exitSandboxd
	}
	if getenv("SANDBOXD") != "" {
		return fail("approve --page works only at your own terminal, never inside a sandbox")
	}
	tty := daemonrun.ControllingTerminal()
	if tty == nil {
		return fail("approve --page has the daemon write the link to your terminal (/dev/tty), and there is none here: run it in a terminal of your own, outside any sandbox")
	}
	defer tty.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := daemon.Connect(ctx, runcmd.DaemonSocket(getenv), os.Getuid())
	if err != nil {
		return fail(publicerr.Message(err, "the daemon cannot be reached"))
	}
	// The daemon writes the link to the terminal itself, after checking
	// it is this process's controlling terminal: no answer carries it.
	if _, err := c.PageLink(ctx, tty); err != nil {
		return fail(publicerr.Message(err, "the daemon gave no link"))
	}
	fmt.Fprintln(stdout, "the link to the approvals page is on your terminal")
	return 0
}
