package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/daemon/client"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/session"
)

// MaxRequest bounds a request's body.
const MaxRequest = 1 << 20

// newBodyReader buffers a request's body for readLine: 16 KiB, which
// holds a usual request's line whole; a longer line grows as it comes.
func newBodyReader(body io.Reader) *bufio.Reader { return bufio.NewReaderSize(body, 16<<10) }

// readLine reads the body's first line from br, newline included (none
// at the body's end), into memory of its own. A line over MaxRequest is cut there, with
// bufio.ErrBufferFull. Only as much memory as the line takes is used: a
// buffer of MaxRequest for every request (cleared, and then collected)
// cost the daemon more than any other allocation of a run.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		if len(line)+len(part) > MaxRequest {
			return append(line, part[:MaxRequest-len(line)]...), bufio.ErrBufferFull
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return append(line, part...), err
		}
		line = append(line, part...)
	}
}

// Config is what a Daemon is built from.
type Config struct {
	// Tokens are the callers' second factor.
	Tokens *Tokens
	// Runner runs every caller's commands.
	Runner *session.Runner
	// MaxExecs bounds the commands one uid runs at once (0: 64).
	MaxExecs int
	// QuestionWait is how long a question for a person waits for an
	// answer before it denies (0: review.DefaultTimeout, as a terminal's).
	QuestionWait time.Duration
	// MaxQuestions bounds the questions one uid has waiting (0: 16).
	MaxQuestions int
	// Commits is the record of commits in flight, which holds what the
	// daemon recovered at start for each caller's next exec (nil: none).
	Commits *Commits
	// Allow says whether a caller with these ids may use the daemon at
	// all (the machine configuration's [access]); nil: everyone. A
	// caller it refuses gets 403 from every route, the token's first.
	Allow func(uid, gid int, groups []int) bool
	// Version is the daemon's, for /v1/version.
	Version string
	// Observer hears each exec and each answer to a question, for the
	// daemon's metrics (nil: nobody).
	Observer Observer
	// AfterExec, if set, is called once an exec's report is sent: work
	// the daemon does for later runs (starting helpers in advance) waits
	// until then, so it never competes with a run's own.
	AfterExec func()
	// Audit is the machine's audit log, which GET /v1/audit serves to
	// each caller as they may see it (nil: the daemon keeps none).
	Audit AuditLog
	// Questions is the queue of questions for a person, shared with the
	// approvals page (nil: the daemon makes its own).
	Questions *Questions
	// Page is the approvals page (nil: it is off).
	Page Page
	Log  *slog.Logger
}

// Observer hears what the daemon did, as counts: no caller, path or
// command reaches it beyond what a report carries.
type Observer interface {
	// Exec hears an exec's report (nil when there was none) and how
	// long it took.
	Exec(rep *session.Report, took time.Duration)
	// Answered hears that a question was answered, by whom (source
	// human or client) and how long after it was asked.
	Answered(source broker.Source, took time.Duration)
}

// nobody is the Observer that hears nothing.
type nobody struct{}

func (nobody) Exec(*session.Report, time.Duration)   {}
func (nobody) Answered(broker.Source, time.Duration) {}

// Daemon serves the API on a unix socket.
type Daemon struct {
	cfg Config
	pid int
	// stopping ends when the daemon stops (set by Serve).
	stopping context.Context
	// mu guards execs, the commands each uid runs now, and live, the
	// running execs by id.
	mu    sync.Mutex
	execs map[int]int
	live  map[string]*liveExec
	// questions is the one queue of questions for a person.
	questions *Questions
	// viewing: the callers being sent a view of the audit log.
	viewing uidLocks
	// seen: each uid's last caller and sessions, for the page's intents.
	seen seenCallers
}

// New returns a Daemon.
func New(cfg Config) *Daemon {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxExecs <= 0 {
		cfg.MaxExecs = 64
	}
	if cfg.QuestionWait <= 0 {
		cfg.QuestionWait = review.DefaultTimeout
	}
	if cfg.Observer == nil {
		cfg.Observer = nobody{}
	}
	qs := cfg.Questions
	if qs == nil {
		qs = NewQuestions(cfg.QuestionWait, cfg.MaxQuestions)
	}
	return &Daemon{cfg: cfg, pid: os.Getpid(), execs: map[int]int{}, live: map[string]*liveExec{}, stopping: context.Background(),
		questions: qs}
}

// Active is how many execs run now, for every caller.
func (d *Daemon) Active() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.live)
}

// Waiting is how many questions wait for a person now, for every caller.
func (d *Daemon) Waiting() int { return d.questions.Waiting() }

// admit counts one more command of uid, unless it has its limit.
func (d *Daemon) admit(uid int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.execs[uid] >= d.cfg.MaxExecs {
		return false
	}
	d.execs[uid]++
	return true
}

// release counts one command of uid less.
func (d *Daemon) release(uid int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.execs[uid]--; d.execs[uid] <= 0 {
		delete(d.execs, uid)
	}
}

// caller is an authenticated request's caller.
type caller struct {
	Peer
}

type peerKey struct{}

// Serve answers requests on ln until ctx ends, then stops taking new
// ones and waits up to grace for those running.
func (d *Daemon) Serve(ctx context.Context, ln *net.UnixListener, grace time.Duration) error {
	// Every exec ends with ctx: its command killed, its report sent,
	// before the server waits for the handlers to return.
	d.stopping = ctx
	srv := d.server()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(fdListener{ln}) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	srv.Shutdown(sctx)
	// No grant outlives the daemon, and no held attempt's changes are
	// lost: each is ended as declined.
	d.cfg.Runner.Release()
	return nil
}

// server is the HTTP server of the routes: every answer JSON, an unknown
// path 404 and a known path's other methods 405, both with a JSON error.
func (d *Daemon) server() *http.Server {
	byPath := map[string]map[string]http.HandlerFunc{}
	var patterns []string
	for _, rt := range d.routes() {
		if strings.Contains(rt.path, "{id}") && !slices.Contains(patterns, rt.path) {
			patterns = append(patterns, rt.path)
		}
		if byPath[rt.path] == nil {
			byPath[rt.path] = map[string]http.HandlerFunc{}
		}
		byPath[rt.path][rt.method] = d.guard(rt)
	}
	mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		methods, ok := byPath[routePath(r, patterns)]
		if !ok {
			writeError(w, http.StatusNotFound, "not_found", "no such endpoint: the API is under /v1 (see GET /v1/version)")
			return
		}
		h, ok := methods[r.Method]
		if !ok {
			allowed := make([]string, 0, len(methods))
			for m := range methods {
				allowed = append(allowed, m)
			}
			slices.Sort(allowed)
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.URL.Path+" takes "+strings.Join(allowed, ", "))
			return
		}
		h(w, r)
	})
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(d.cfg.Log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			fc, ok := c.(*fdConn)
			if !ok {
				return ctx
			}
			// The handler takes the descriptors the peer passed from here.
			ctx = context.WithValue(ctx, connKey{}, fc)
			p, err := peerOf(fc.UnixConn)
			if err != nil {
				d.cfg.Log.Debug("peer unknown", "err", err)
				return ctx
			}
			return context.WithValue(ctx, peerKey{}, p)
		},
	}
}

// routePath is the route a request's path names: a path of the routes
// as it is, or a route with "{id}" whose place one path segment of the
// request's fills (set as the request's "id").
func routePath(r *http.Request, patterns []string) string {
	for _, p := range patterns {
		prefix, suffix, _ := strings.Cut(p, "{id}")
		rest, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok {
			continue
		}
		if id, ok := strings.CutSuffix(rest, suffix); ok && id != "" && !strings.Contains(id, "/") {
			r.SetPathValue("id", id)
			return p
		}
	}
	return r.URL.Path
}

// guard authenticates a request for rt, bounds its body and hands it on.
func (d *Daemon) guard(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, ok := r.Context().Value(peerKey{}).(Peer)
		switch {
		case !ok:
			writeError(w, http.StatusUnauthorized, "unknown_peer", "the kernel did not say who is calling")
			return
		case p.PID == d.pid:
			writeError(w, http.StatusForbidden, "own_process", "the daemon does not serve itself")
			return
		case p.Nested:
			writeError(w, http.StatusForbidden, "sandboxed_peer", "a process inside a sandbox (a nested pid namespace) may not use the daemon")
			return
		case d.cfg.Allow != nil && !d.cfg.Allow(p.UID, p.GID, p.Groups):
			d.cfg.Log.Debug("caller not in [access]", "uid", p.UID)
			writeError(w, http.StatusForbidden, "not_allowed", fmt.Sprintf("this machine's sandboxd configuration does not let uid %d use the daemon (ask its operator)", p.UID))
			return
		}
		if rt.auth == authToken {
			tok, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !found || !d.cfg.Tokens.Check(p.UID, tok) {
				writeError(w, http.StatusUnauthorized, "bad_token",
					"the request needs your token: POST /v1/token, then send the file it names as Authorization: Bearer TOKEN")
				return
			}
		}
		if !rt.stream {
			r.Body = http.MaxBytesReader(w, r.Body, MaxRequest)
		}
		rt.handle(w, r, caller{Peer: p})
	}
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// APIError is every error's body (client.APIError).
type APIError = client.APIError

// writeError answers an error.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	var e APIError
	e.Error.Code, e.Error.Message = code, msg
	writeJSON(w, status, e)
}

// token answers POST /v1/token.
func (d *Daemon) token(w http.ResponseWriter, r *http.Request, c caller) {
	p, err := d.cfg.Tokens.Ensure(c.UID, c.GID)
	if err != nil {
		d.cfg.Log.Error("token", "uid", c.UID, "err", err)
		writeError(w, http.StatusInternalServerError, "token", "the daemon could not write your token file")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": p})
}

// health answers GET /v1/health.
// Root is told what the daemon holds (goroutines, running execs, held
// retries): counts over every user's work, which no other user sees.
func (d *Daemon) health(w http.ResponseWriter, r *http.Request, c caller) {
	out := map[string]any{"status": "ok", "uid": c.UID, "gid": c.GID, "groups": c.Groups}
	if c.UID == 0 {
		d.mu.Lock()
		out["execs"] = len(d.live)
		d.mu.Unlock()
		out["goroutines"] = runtime.NumGoroutine()
		out["held_retries"] = d.cfg.Runner.Held()
	}
	writeJSON(w, http.StatusOK, out)
}

// version answers GET /v1/version.
func (d *Daemon) version(w http.ResponseWriter, r *http.Request, c caller) {
	writeJSON(w, http.StatusOK, map[string]any{"version": d.cfg.Version, "api": "v1"})
}
