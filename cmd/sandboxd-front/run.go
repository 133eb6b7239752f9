package main

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

// exitSandboxd is the status when sandboxd itself fails (session's
// ExitSandboxd).
const exitSandboxd = 125

// internalError is the sentence for a failure without a public one
// (session.Public's; a test holds them equal).
const internalError = "sandboxd could not run the command because of an internal error (run with -v to log the cause)"

// daemonRun is a run this process takes to the daemon: connected, its
// request made.
type daemonRun struct {
	f    *runflags.Flags
	argv []string
	req  client.ExecRequest
	c    *client.Client
	mark func(string)
}

// prepare is the run args (run's command line) describe, when this
// process takes it: the core would go through the daemon, and nothing
// failed before the request (a failure is the core's to say).
func prepare(ctx context.Context, args []string, getenv func(string) string) (*daemonRun, bool) {
	f, argv, _, err := runflags.Parse(args)
	if err != nil || f.Daemon && f.NoDaemon {
		return nil, false
	}
	socket := client.DefaultSocket
	if s := getenv("SANDBOXD_SOCKET"); filepath.IsAbs(s) {
		socket = filepath.Clean(s)
	}
	if !f.Daemon {
		// As the core's daemonToUse decides.
		if f.NoDaemon || f.Reviewer != runflags.ReviewOff && (f.Reviewer == runflags.ReviewHuman || ttyReachable()) {
			return nil, false
		}
		if _, err := os.Lstat(socket); err != nil {
			return nil, false
		}
	}
	mark := client.Phases(f.Verbose, os.Stderr)
	req, ok := request(f, argv, getenv)
	if !ok {
		return nil, false
	}
	c, err := client.Connect(ctx, socket, os.Getuid())
	if err != nil {
		return nil, false
	}
	mark("connected")
	return &daemonRun{f: f, argv: argv, req: req, c: c, mark: mark}, true
}

// request is the daemon's request for the run, as the core makes it,
// when it can be made.
func request(f *runflags.Flags, argv []string, getenv func(string) string) (client.ExecRequest, bool) {
	cwd, err := os.Getwd()
	if err != nil {
		return client.ExecRequest{}, false
	}
	env := client.CallerEnv(os.Environ(), getenv)
	home := getenv("HOME")
	if !filepath.IsAbs(home) {
		return client.ExecRequest{}, false
	}
	if _, err := os.Getgroups(); err != nil {
		return client.ExecRequest{}, false
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
			return client.ExecRequest{}, false
		}
	}
	return client.ExecRequest{
		Argv: argv, Command: f.Command,
		Context: client.Context{Env: env, Cwd: cwd, Umask: readUmask(), Workspace: abs(f.Workspace),
			Policy: abs(f.Policy), Session: f.Session, Agent: f.Agent, Intent: intent, Reviewer: f.Reviewer},
		TimeoutMS: f.Timeout.Milliseconds(), Retries: f.Retries, Text: true,
		NoTransaction: f.NoTransaction, NoDetect: f.Detect == "off", RequireIsolation: f.RequireIsolation,
	}, true
}

// run is the core's runViaDaemon from the connection on: the same
// output, events, report, failures and exit status.
func (r *daemonRun) run(ctx context.Context, getenv func(string) string, stdin *os.File, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	if tty := controllingTerminal(); tty != nil {
		defer tty.Close()
		r.c.PassTerminal(tty)
	}
	stdout, stderr = filtered(stdout), filtered(stderr)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := make(chan string, 1)
	go relaySignals(ctx, r.c, sigs, started, cancel)
	var in io.Reader
	if !isTerminal(stdin) {
		in = stdin
	}
	var rep json.RawMessage
	var runErr string
	err := r.c.Exec(ctx, r.req, in, func(l client.ExecLine) {
		switch l.Type {
		case "started":
			r.mark("started")
			started <- l.Exec
		case "stdout":
			stdout.Write(l.Data)
		case "stderr":
			stderr.Write(l.Data)
		case "event":
			if l.Text != "" {
				io.WriteString(stderr, l.Text)
			}
			if l.EventKind() == client.EventQuestionWaiting {
				desktopNotify(getenv)
			}
		case "report":
			rep, runErr = l.Report, l.Error
		}
	})
	r.mark("stream ended")
	code, hasCode := client.ExecLine{Report: rep}.ExitCode()
	switch {
	case err != nil && errors.Is(ctx.Err(), context.Canceled):
		return r.fail("the run was interrupted; the daemon ended every process of it", nil, stderr)
	case err != nil:
		return r.fail(publicerr.Message(err, internalError), nil, stderr)
	case !hasCode:
		return r.fail("the daemon sent no report", nil, stderr)
	case runErr != "":
		return r.fail(runErr, rep, stderr)
	}
	if !r.writeReport(rep, stderr) {
		return exitSandboxd
	}
	return code
}

// fail says msg, writes the report (rep with msg as its error, or one
// of a run that did not happen) and is the failure's status.
func (r *daemonRun) fail(msg string, rep json.RawMessage, stderr io.Writer) int {
	if rep == nil {
		rep = failedReport(r.f.Session, r.argv)
	}
	fmt.Fprintf(stderr, "sandboxd: %s\n", termfilter.Escape(msg))
	r.writeReport(withError(rep, msg), stderr)
	return exitSandboxd
}

// failedReport is the report of a run that did not happen, as the core
// writes one (a session.Report with only these fields set; a test holds
// the bytes equal).
func failedReport(session string, argv []string) json.RawMessage {
	b, _ := json.Marshal(struct {
		ExitCode    int      `json:"exit_code"`
		Attempts    int      `json:"attempts"`
		LandlockABI int      `json:"landlock_abi"`
		NetworkMode string   `json:"network_mode"`
		Isolation   string   `json:"isolation"`
		Boundaries  []string `json:"boundaries"`
		Session     string   `json:"session,omitempty"`
		Command     []string `json:"command,omitempty"`
	}{ExitCode: exitSandboxd, Boundaries: []string{}, Session: session, Command: argv})
	return b
}

// withError is the report rep with its "error" member set to msg: in
// place when it has one, else last (where session.Report has it).
func withError(rep json.RawMessage, msg string) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(rep))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return rep
	}
	var b bytes.Buffer
	b.WriteByte('{')
	val, _ := json.Marshal(msg)
	set := false
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
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	if !set {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(`"error":`)
		b.Write(val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// writeReport writes the report to --report's file, indented as the
// core writes it (json.MarshalIndent is json.Indent of what
// json.Marshal writes).
func (r *daemonRun) writeReport(rep json.RawMessage, stderr io.Writer) bool {
	if r.f.Report == "" {
		return true
	}
	var b bytes.Buffer
	if err := json.Indent(&b, rep, "", "  "); err != nil {
		b.Reset()
		b.Write(rep)
	}
	b.WriteByte('\n')
	if err := os.WriteFile(r.f.Report, b.Bytes(), 0o600); err != nil {
		reason := ""
		var errno unix.Errno
		if errors.As(err, &errno) {
			reason = " (" + errno.Error() + ")"
		}
		fmt.Fprintf(stderr, "sandboxd: the report could not be written to %s%s\n", termfilter.Escape(r.f.Report), termfilter.Escape(reason))
		return false
	}
	return true
}

// relaySignals forwards the signals this process gets to the run, as
// the core does: a signal before the run started, or one the daemon
// cannot be told, ends the request, which ends the run.
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

// filtered wraps a terminal in termfilter, as the core's termHold does;
// other writers pass unchanged.
func filtered(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		return termfilter.New(f)
	}
	return w
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// controllingTerminal is this process's controlling terminal, open, or
// nil when it has none.
func controllingTerminal() *os.File {
	f, err := os.OpenFile("/dev/tty", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return f
}

// ttyReachable reports whether there is a controlling terminal a person
// could answer on.
func ttyReachable() bool {
	fd, err := unix.Open("/dev/tty", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// readUmask is the process's umask, read without changing it, as the
// core reads it: /proc/self/status says it; unknown is 077.
func readUmask() uint32 {
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

// desktopNotify is the core's: notify-send, when this user has a
// desktop session, that a question waits on the approvals page.
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
