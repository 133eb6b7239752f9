package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sandboxd/sandboxd/session"
)

// ToolName is the one tool the server offers.
const ToolName = "bash"

// Defaults a front end may change (Config).
const (
	DefaultTimeout  = 10 * time.Minute
	MaxTimeout      = time.Hour
	DefaultOutput   = 64 << 10
	DefaultProgress = 5 * time.Second
)

// Config is what a server is built from.
type Config struct {
	Runner *session.Runner
	// Caller is the user every command runs as and for; its Cwd is where
	// a call that names none runs.
	Caller session.Caller
	// Workspace is the workspace fixed when the server started
	// (resolved): every call runs in it, and its cwd must lie inside.
	Workspace string
	// Above are the policy files above a Workspace that was found
	// (session.Found.Above): every call applies them, as a run that
	// found the workspace would.
	Above []string
	// Session names the sandboxd session (breaker, grants) of every
	// connection; empty: each connection is a session of its own.
	Session string
	// Policy and Reviewer are run's --policy and --reviewer.
	Policy, Reviewer string
	// Timeout is a call's default, MaxTimeout the most one may ask for.
	Timeout, MaxTimeout time.Duration
	// MaxOutput bounds each output stream kept for the client.
	MaxOutput int
	// Progress is how often a call that asked for progress hears of it.
	Progress time.Duration
	// Notes renders a run's events as the sentences `sandboxd run`
	// prints, into w (nil: none).
	Notes   func(w io.Writer) session.Events
	Version string
	Log     *slog.Logger
}

// Server is the MCP server: one tool, bash.
type Server struct {
	srv *sdk.Server
	h   *handler
}

// Run serves one connection over t until the client goes or ctx ends.
// Then every call still running is cancelled, which ends its command's
// processes, and Run returns once each has returned.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	ctx, cancel := context.WithCancel(ctx)
	s.h.mu.Lock()
	s.h.stopped = ctx
	s.h.mu.Unlock()
	err := s.srv.Run(ctx, t)
	cancel()
	s.h.mu.Lock()
	s.h.closing = true // no call starts after this
	s.h.mu.Unlock()
	s.h.calls.Wait()
	return err
}

// New returns the server.
func New(cfg Config) *Server {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxTimeout <= 0 {
		cfg.MaxTimeout = MaxTimeout
	}
	cfg.Timeout = min(cfg.Timeout, cfg.MaxTimeout)
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = DefaultOutput
	}
	if cfg.Progress <= 0 {
		cfg.Progress = DefaultProgress
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	h := &handler{cfg: cfg, sessions: map[*sdk.ServerSession]string{}}
	srv := sdk.NewServer(&sdk.Implementation{Name: "sandboxd", Version: cfg.Version},
		&sdk.ServerOptions{Logger: cfg.Log, Instructions: instructions})
	destructive, open := true, true
	srv.AddTool(&sdk.Tool{
		Name:         ToolName,
		Title:        "Sandboxed bash",
		Description:  description,
		InputSchema:  inputSchema(cfg.MaxTimeout),
		OutputSchema: json.RawMessage(outputSchema),
		Annotations:  &sdk.ToolAnnotations{DestructiveHint: &destructive, OpenWorldHint: &open},
	}, h.call)
	return &Server{srv: srv, h: h}
}

// instructions and description are what the client's model reads.
const (
	instructions = "sandboxd's bash tool runs each shell command in a sandbox confined to one workspace. " +
		"When a command reaches past what the policy allows, sandboxd asks a reviewer and, on an allow, runs the same command once more with exactly that access. " +
		"A denial is final: another command, path or tool for the same access is denied too."
	description = "Run a shell command with bash -c in sandboxd's sandbox, in the workspace the server was started for. " +
		"Reading or writing outside the workspace, secrets and the network are boundaries that a reviewer decides; the result lists each boundary, its decision and who decided. " +
		"State the command's purpose in intent. Output is kept up to a bound (head and tail); stdin is empty. " +
		"In the text result sandboxd's own lines and the exit status come first, then the command's stdout and stderr under headers with their sizes."
)

// handler serves bash calls.
type handler struct {
	cfg Config
	// calls counts the calls running.
	calls sync.WaitGroup
	mu    sync.Mutex
	// stopped ends when the server stops (nil: not running); closing
	// is set once Run waits for the calls.
	stopped  context.Context
	closing  bool
	sessions map[*sdk.ServerSession]string
}

// session is the sandboxd session of a connection.
func (h *handler) session(ss *sdk.ServerSession) string {
	if h.cfg.Session != "" {
		return h.cfg.Session
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	name, ok := h.sessions[ss]
	if !ok {
		var b [8]byte
		rand.Read(b[:])
		name = "mcp-" + hex.EncodeToString(b[:])
		h.sessions[ss] = name
	}
	return name
}

// cwd is where a call runs: its cwd (relative to the workspace), else
// the server's.
func (h *handler) cwd(given string) string {
	switch {
	case given == "":
		return h.cfg.Caller.Cwd
	case filepath.IsAbs(given):
		return filepath.Clean(given)
	}
	return filepath.Join(h.cfg.Workspace, given)
}

// call runs one bash call. Every outcome is a tool result: a protocol
// error is left for what is not the tool's (an unknown tool).
func (h *handler) call(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	h.mu.Lock()
	stopped, closing := h.stopped, h.closing
	if !closing {
		h.calls.Add(1)
		defer h.calls.Done()
	}
	h.mu.Unlock()
	if closing {
		return failed("sandboxd: the server is stopping"), nil
	}
	if stopped != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(stopped, cancel)()
	}
	args, err := DecodeArgs(req.Params.Arguments, h.cfg.MaxTimeout)
	if err != nil {
		return failed("sandboxd: bad arguments: " + err.Error()), nil
	}
	c := h.cfg.Caller
	c.Cwd = h.cwd(args.Cwd)
	timeout := args.Timeout
	if timeout == 0 {
		timeout = h.cfg.Timeout
	}
	out, errOut := NewBounded(h.cfg.MaxOutput), NewBounded(h.cfg.MaxOutput)
	// sandboxd's own notes are bounded too: a command can make a commit
	// name many paths.
	notes := NewBounded(h.cfg.MaxOutput)
	prog := startProgress(ctx, req, h.cfg.Progress, out, errOut)
	defer prog.stop()
	var ev session.Events = session.Discard{}
	if h.cfg.Notes != nil {
		ev = h.cfg.Notes(notes)
	}
	sess := h.session(req.Session)
	job := session.Job{
		Argv: []string{"bash", "-c", args.Command}, Command: args.Command,
		Workspace: h.cfg.Workspace, Above: h.cfg.Above, RequireCwd: true, Policy: h.cfg.Policy, Session: sess,
		Agent: "mcp", Stated: args.Intent, Retries: 2, Timeout: timeout, Reviewer: h.cfg.Reviewer,
		RequireIsolation: true, Stdout: out, Stderr: errOut,
	}
	rep, err := h.cfg.Runner.Run(ctx, c, job, callEvents{ev, prog})
	if err != nil {
		h.cfg.Log.Debug("bash call failed", "err", err)
	}
	return result(rep, err, out, errOut, notes.String(), Result{Workspace: h.cfg.Workspace, Cwd: c.Cwd, Session: sess}), nil
}

// failed is a tool error with one sentence.
func failed(msg string) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: msg}}}
}
