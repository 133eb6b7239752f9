package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/daemon/client"
	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/runtext"
	"github.com/sandboxd/sandboxd/session"
)

// ExecRequest is one run, as `sandboxd run` describes it
// (client.ExecRequest, whose package is the one definition of the
// wire's types).
type ExecRequest = client.ExecRequest

// Context is who a request is for and where (client.Context).
type Context = client.Context

// jobOf is the session.Job ctx describes, for argv and the exact command.
func jobOf(ctx Context, argv []string, command string) session.Job {
	j := session.Job{Argv: argv, Command: command, Workspace: ctx.Workspace, Policy: ctx.Policy, Session: ctx.Session,
		Agent: ctx.Agent, Intent: ctx.Intent, Reviewer: ctx.Reviewer}
	if j.Reviewer == "" {
		j.Reviewer = session.ReviewAuto
	}
	return j
}

// ExecLine is one line of /v1/exec's answer (client.ExecLine): its
// question, event and report are JSON.
type ExecLine = client.ExecLine

// Bounds on an exec request.
const (
	maxArgs   = 4096
	maxEnv    = 4096
	maxString = 128 << 10
)

// readExecRequest reads and checks the first line of the body.
func readExecRequest(br *bufio.Reader) (ExecRequest, error) {
	var req ExecRequest
	line, err := readLine(br)
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		if errors.Is(err, bufio.ErrBufferFull) {
			return req, fmt.Errorf("the request's first line is over %d KiB", MaxRequest>>10)
		}
		return req, errors.New("the request's first line is missing")
	}
	if err := strictJSON(line, &req); err != nil {
		return req, err
	}
	switch {
	case len(req.Argv) == 0 || req.Argv[0] == "":
		return req, errors.New("argv must name a command")
	case len(req.Argv) > maxArgs || len(req.Env) > maxEnv:
		return req, errors.New("too many arguments or variables")
	case !filepath.IsAbs(req.Cwd):
		return req, errors.New("cwd must be an absolute path")
	case req.Umask > 0o777:
		return req, errors.New("umask must be at most 0777")
	case req.TimeoutMS < 0 || req.Retries < 0 || req.Retries > 16:
		return req, errors.New("timeout_ms must not be negative, and retries must be 0 to 16")
	case req.Retry != "" && req.Retry != "daemon" && req.Retry != "client":
		return req, errors.New(`retry must be "daemon" or "client"`)
	case req.Retry == "client" && req.Retries == 0:
		return req, errors.New(`retry "client" needs retries of at least 1: with none, nothing is held`)
	}
	if err := checkTokens(req.Grants); err != nil {
		return req, err
	}
	for _, s := range append(append([]string{req.Command, req.Cwd, req.Workspace, req.Policy, req.Session, req.Agent, req.Intent, req.Reviewer}, req.Argv...), req.Env...) {
		if len(s) > maxString {
			return req, fmt.Errorf("a string of the request is over %d KiB", maxString>>10)
		}
	}
	return req, nil
}

// Bounds on the grants a request presents.
const (
	maxTokens   = 64
	maxTokenLen = 128
)

// checkTokens bounds presented grant tokens.
func checkTokens(tokens []string) error {
	if len(tokens) > maxTokens {
		return fmt.Errorf("at most %d grants may be presented at once", maxTokens)
	}
	for _, t := range tokens {
		if t == "" || len(t) > maxTokenLen {
			return errors.New("a grant token is empty or too long")
		}
	}
	return nil
}

// strictJSON decodes one JSON object of known fields.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New("the request is not a JSON object of the endpoint's fields")
	}
	if dec.More() {
		return errors.New("the request holds more than one JSON value")
	}
	return nil
}

// exec answers POST /v1/exec: it runs the command for the caller, with
// the caller's ids (from the kernel) and the environment, directory and
// umask of the request, and streams the run as NDJSON. A client that
// goes away, or the daemon stopping, ends the run and every process of
// it; the report still goes out when the client is there to read it.
func (d *Daemon) exec(w http.ResponseWriter, r *http.Request, c caller) {
	t0 := time.Now()
	br := newBodyReader(r.Body)
	req, err := readExecRequest(br)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	d.mark(t0, "request read")
	who, err := d.callerOf(c, req.Context)
	if err != nil {
		writeError(w, http.StatusForbidden, "not_yours", publicerr.Message(err, "the request does not describe you"))
		return
	}
	if !d.admit(c.UID) {
		writeError(w, http.StatusTooManyRequests, "too_many", fmt.Sprintf("you have %d commands running through the daemon, its limit", d.cfg.MaxExecs))
		return
	}
	defer d.release(c.UID)
	d.seen.note(who, req.Context.Session)
	d.mark(t0, "caller checked")
	rc := http.NewResponseController(w)
	rc.EnableFullDuplex()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	id, sigs, forget := d.register(c.UID)
	defer forget()
	// The run ends with the client: its context, a line that cannot be
	// written, or its stdin cut short.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(d.stopping, cancel)()
	out := &lineWriter{w: w, rc: rc, gone: cancel}
	if req.Text {
		out.text = runtext.New(&out.textBuf)
	}
	// The client learns the run started, and its id, whatever it prints.
	out.send(ExecLine{Type: "started", Exec: id})
	defer context.AfterFunc(ctx, out.end)()
	addRecovered := d.tellRecovered(c.UID, out)
	job := jobOf(req.Context, req.Argv, req.Command)
	person, done := d.personFor(r, c, who, req, out)
	defer done()
	job.Reviewers.Person = person
	job.Retries, job.Timeout = req.Retries, time.Duration(req.TimeoutMS)*time.Millisecond
	job.NoTransaction, job.NoDetect, job.RequireIsolation = req.NoTransaction, req.NoDetect, req.RequireIsolation
	job.Hold, job.Present = req.Retry == "client", req.Grants
	job.Signals = sigs
	job.Stdout, job.Stderr = out.stream("stdout"), out.stream("stderr")
	if req.Stdin {
		// The rest of the body; it ends when the client's does.
		job.Stdin = readerFunc(func(p []byte) (int, error) {
			n, err := br.Read(p)
			if err != nil && !errors.Is(err, io.EOF) {
				cancel()
			}
			return n, err
		})
	}
	start := time.Now()
	rep, err := d.cfg.Runner.Run(ctx, who, job, out)
	d.mark(t0, "run returned")
	addRecovered(rep)
	d.cfg.Observer.Exec(rep, time.Since(start))
	line := ExecLine{Type: "report", Report: reportJSON(rep)}
	if err != nil {
		line.Error = session.Public(err)
		d.cfg.Log.Debug("exec failed", "uid", c.UID, "err", err)
	}
	out.send(line)
	d.mark(t0, "report sent")
	if d.cfg.AfterExec != nil {
		d.cfg.AfterExec()
	}
}

// callerOf is the session.Caller a request describes, checked against
// the peer: the ids are the kernel's, and HOME must be a directory the
// peer's uid owns (a caller names its own home, never another's).
func (d *Daemon) callerOf(c caller, req Context) (session.Caller, error) {
	who, err := session.NewCaller(c.UID, c.GID, req.Env, filepath.Clean(req.Cwd), req.Umask)
	if err != nil {
		return who, err
	}
	who.Groups = c.Groups
	// Looked at as the caller: the answer says nothing of a path the
	// caller could not reach itself (one the daemon, as root, could).
	var st os.FileInfo
	aerr := fsid.Do(who.ID(), func() error {
		st, err = os.Stat(who.Home)
		return nil
	})
	if aerr != nil {
		return who, publicerr.Wrap(aerr, fmt.Sprintf("the daemon cannot act as uid %d here", c.UID))
	}
	if err != nil || !st.IsDir() {
		return who, publicerr.New("HOME " + who.Home + " is not a directory of yours")
	}
	if s, ok := st.Sys().(*syscall.Stat_t); !ok || int(s.Uid) != c.UID {
		return who, publicerr.New("HOME " + who.Home + " is not a directory of yours")
	}
	return who, nil
}

// lineWriter writes an exec's NDJSON lines, one at a time, each flushed.
type lineWriter struct {
	mu     sync.Mutex
	w      io.Writer
	rc     *http.ResponseController
	gone   func()
	failed bool
	// held counts open questions: output waits while one is (holdCond,
	// on mu); ended, once the run's context is, frees it.
	held     int
	ended    bool
	holdCond *sync.Cond
	// evMu orders the events: each is rendered (text, when the client
	// asked for it, into textBuf) and sent before the next.
	evMu    sync.Mutex
	text    *runtext.Events
	textBuf bytes.Buffer
}

// send writes one line; once a write fails (the client went) the rest
// are dropped: the request's context ends the run.
func (l *lineWriter) send(line ExecLine) {
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed {
		return
	}
	if _, err := l.w.Write(append(b, '\n')); err != nil || l.rc.Flush() != nil {
		l.failed = true
		l.gone()
	}
}

// Event sends one of the run's events, with its text when the client
// asked for it.
func (l *lineWriter) Event(e session.Event) {
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	l.evMu.Lock()
	defer l.evMu.Unlock()
	line := ExecLine{Type: "event", Event: b}
	if l.text != nil {
		l.textBuf.Reset()
		l.text.Event(e)
		line.Text = l.textBuf.String()
	}
	l.send(line)
}

// reportJSON is rep as an exec line carries it (nil: none).
func reportJSON(rep *session.Report) json.RawMessage {
	if rep == nil {
		return nil
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return nil
	}
	return b
}

// stream is a writer of one output stream.
func (l *lineWriter) stream(name string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		l.waitHeld()
		l.send(ExecLine{Type: name, Data: append([]byte(nil), p...)})
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
