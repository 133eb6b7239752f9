package daemonrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/daemon/client"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/runflags"
	"github.com/sandboxd/sandboxd/termfilter"
	"golang.org/x/sys/unix"
)

// ExitSandboxd is the status when sandboxd itself fails (session's
// ExitSandboxd; a test holds them equal).
const ExitSandboxd = 125

// InternalError is the sentence for a failure without a public one
// (session.Public's; a test holds them equal).
const InternalError = "sandboxd could not run the command because of an internal error (run with -v to log the cause)"

// Public is err's public sentence, or InternalError.
func Public(err error) string { return publicerr.Message(err, InternalError) }

// Request is the daemon's request for the run f and argv describe: the
// flags, and this process's environment (client.CallerEnv), working
// directory and umask. Its errors carry the sentences the core says of
// the same failures.
func Request(f *runflags.Flags, argv []string, getenv func(string) string) (client.ExecRequest, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return client.ExecRequest{}, publicerr.Wrap(err, "the current directory is gone or cannot be read; change to one that exists and run it again")
	}
	if home := getenv("HOME"); home == "" || !filepath.IsAbs(home) {
		return client.ExecRequest{}, publicerr.New("HOME must be set to an absolute path")
	}
	if _, err := os.Getgroups(); err != nil {
		return client.ExecRequest{}, publicerr.Wrap(err, "sandboxd could not read its user's groups")
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(cwd, p)
	}
	intent := f.Intent
	if f.IntentFile != "" {
		if intent, err = runflags.ReadIntent(f.IntentFile); err != nil {
			return client.ExecRequest{}, err
		}
	}
	return client.ExecRequest{
		Argv: argv, Command: f.Command,
		Context: client.Context{Env: client.CallerEnv(os.Environ(), getenv), Cwd: cwd, Umask: ReadUmask(),
			Workspace: abs(f.Workspace), Policy: abs(f.Policy), Session: f.Session, Agent: f.Agent,
			Intent: intent, Reviewer: f.Reviewer},
		TimeoutMS: f.Timeout.Milliseconds(), Retries: f.Retries, Text: true,
		NoTransaction: f.NoTransaction, NoDetect: f.Detect == "off", RequireIsolation: f.RequireIsolation,
	}, nil
}

// Run is a run taken to the daemon: connected, its request made.
type Run struct {
	Flags   *runflags.Flags
	Argv    []string
	Request client.ExecRequest
	Client  *client.Client
	// Mark logs the client's phases for -v (client.Phases).
	Mark func(string)
}

// Do runs it: the command's output onto stdout and stderr (filtered
// when they are terminals, so that it cannot fake or hide the daemon's
// questions there), the daemon's text for each event on stderr, stdin
// streamed unless it is a terminal, signals relayed; then the report
// file, and the command's exit status, or ExitSandboxd with the reason
// said.
func (r *Run) Do(ctx context.Context, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	if tty := ControllingTerminal(); tty != nil {
		// The person is asked on it, by the daemon, as an embedded run
		// asks: this process relays nothing itself.
		defer tty.Close()
		r.Client.PassTerminal(tty)
	}
	// The command's output to a terminal passes a filter, so that it
	// cannot fake or hide the daemon's questions or sandboxd's own lines
	// there; sandboxd's lines (the events' text, a failure) go past it,
	// as an embedded run writes them: a sequence the command left
	// unfinished, which the filter holds back, cannot swallow them.
	own := stderr
	stdout, stderr = Filtered(stdout), Filtered(stderr)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := make(chan string, 1)
	go relaySignals(ctx, r.Client, sigs, started, cancel)
	var in io.Reader
	if f, ok := stdin.(*os.File); !ok || !IsTerminal(f) {
		in = stdin
	}
	var rep json.RawMessage
	var runErr string
	err := r.Client.Exec(ctx, r.Request, in, func(l client.ExecLine) {
		switch l.Type {
		case "started":
			r.Mark("started")
			started <- l.Exec
		case "stdout":
			stdout.Write(l.Data)
		case "stderr":
			stderr.Write(l.Data)
		case "event":
			if l.Text != "" {
				io.WriteString(own, l.Text)
			}
			if l.EventKind() == client.EventQuestionWaiting {
				desktopNotify(getenv)
			}
		case "report":
			rep, runErr = l.Report, l.Error
		}
	})
	r.Mark("stream ended")
	code, hasCode := client.ExecLine{Report: rep}.ExitCode()
	switch {
	case err != nil && errors.Is(ctx.Err(), context.Canceled):
		return Fail(r.Flags, r.Argv, "the run was interrupted; the daemon ended every process of it", rep, own)
	case err != nil:
		return Fail(r.Flags, r.Argv, Public(err), rep, own)
	case !hasCode:
		return Fail(r.Flags, r.Argv, "the daemon sent no report", nil, own)
	case runErr != "":
		return Fail(r.Flags, r.Argv, runErr, rep, own)
	}
	if !WriteReport(r.Flags.Report, rep, own) {
		return ExitSandboxd
	}
	return code
}

// Fail says msg, writes the report (rep with msg as its error, or, when
// rep is nil, the report of a run that did not happen) and returns
// ExitSandboxd.
func Fail(f *runflags.Flags, argv []string, msg string, rep json.RawMessage, stderr io.Writer) int {
	if rep == nil {
		rep = FailedReport(f.Session, argv)
	}
	fmt.Fprintf(stderr, "sandboxd: %s\n", termfilter.Escape(msg))
	WriteReport(f.Report, WithError(rep, msg), stderr)
	return ExitSandboxd
}

// FailedReport is the report of a run that did not happen, as the core
// writes one (a session.Report with only these fields set; a test holds
// the bytes equal).
func FailedReport(session string, argv []string) json.RawMessage {
	b, _ := json.Marshal(struct {
		ExitCode    int      `json:"exit_code"`
		Attempts    int      `json:"attempts"`
		LandlockABI int      `json:"landlock_abi"`
		NetworkMode string   `json:"network_mode"`
		Isolation   string   `json:"isolation"`
		Boundaries  []string `json:"boundaries"`
		Session     string   `json:"session,omitempty"`
		Command     []string `json:"command,omitempty"`
	}{ExitCode: ExitSandboxd, Boundaries: []string{}, Session: session, Command: argv})
	return b
}

// WithError is the report rep with its "error" member set to msg: in
// place when it has one, else last (where session.Report has it). A
// report that is not a JSON object is returned as it came.
func WithError(rep json.RawMessage, msg string) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(rep))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return rep
	}
	var b bytes.Buffer
	b.WriteByte('{')
	val, _ := json.Marshal(msg)
	set := false
	member := func(key string, v []byte) {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	for dec.More() {
		t, err := dec.Token()
		var v json.RawMessage
		if err != nil || dec.Decode(&v) != nil {
			return rep
		}
		key, _ := t.(string)
		if key == "error" {
			v, set = val, true
		}
		member(key, v)
	}
	if !set {
		member("error", val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// WriteReport writes the report to path (--report's; "" writes none),
// indented as the core writes it (json.MarshalIndent is json.Indent of
// what json.Marshal writes), in place rather than renamed over: the
// report may be a pipe or /dev/fd/N the caller reads.
func WriteReport(path string, rep json.RawMessage, stderr io.Writer) bool {
	if path == "" {
		return true
	}
	var b bytes.Buffer
	if err := json.Indent(&b, rep, "", "  "); err != nil {
		b.Reset()
		b.Write(rep)
	}
	b.WriteByte('\n')
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		fmt.Fprintf(stderr, "sandboxd: the report could not be written to %s%s\n", termfilter.Escape(path), termfilter.Escape(KernelReason(err)))
		return false
	}
	return true
}

// KernelReason is " (REASON)" for an error a syscall gave (its errno's
// text, never the path or operation of Go's wrapping), else "".
func KernelReason(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return " (" + errno.Error() + ")"
	}
	return ""
}

// relaySignals forwards the signals this process gets to the run, as an
// embedded run relays them to its command (a second SIGINT ends the
// whole tree there too). A signal before the run started, or one the
// daemon cannot be told, ends the request, which ends the run and every
// process of it.
func relaySignals(ctx context.Context, c *client.Client, sigs <-chan os.Signal, started <-chan string, cancel func()) {
	id := ""
	for {
		select {
		case <-ctx.Done():
			return
		case id = <-started:
		case s, ok := <-sigs:
			if !ok {
				return
			}
			sig, _ := s.(unix.Signal)
			if id == "" || c.Signal(ctx, id, sig) != nil {
				if sig != unix.SIGWINCH {
					cancel()
				}
			}
		}
	}
}

// Filtered wraps a terminal in termfilter; other writers pass
// unchanged.
func Filtered(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && IsTerminal(f) {
		return termfilter.New(f)
	}
	return w
}

// IsTerminal reports whether f is a terminal.
func IsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// ControllingTerminal is this process's controlling terminal, open, or
// nil when it has none.
func ControllingTerminal() *os.File {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return f
}

// TTYReachable reports whether there is a controlling terminal a person
// could answer on.
func TTYReachable() bool {
	fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// ReadUmask is the process's umask, read without changing it:
// /proc/self/status says it; unknown is 077.
func ReadUmask() uint32 {
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return uint32(n) & 0o777
				}
			}
		}
	}
	return 0o077
}

// desktopNotify shows the person a desktop notification that a question
// waits on the approvals page, with notify-send where it is installed and
// this user has a desktop session: this process is the user's, so the
// notification goes where the user's own programs' go (the daemon, as
// root, never reaches into a user's session). Its text is fixed.
func desktopNotify(getenv func(string) string) {
	if getenv("DBUS_SESSION_BUS_ADDRESS") == "" && getenv("DISPLAY") == "" && getenv("WAYLAND_DISPLAY") == "" {
		return
	}
	bin, err := exec.LookPath("notify-send")
	if err != nil {
		return
	}
	cmd := exec.Command(bin, "--app-name=sandboxd", "sandboxd", "A question waits for your answer on the approvals page.")
	cmd.Env, cmd.Dir = os.Environ(), "/"
	if cmd.Start() == nil {
		go cmd.Wait()
	}
}
