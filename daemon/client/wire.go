package client

import (
	"encoding/json"

	"github.com/sandboxd/sandboxd/envlist"
	"golang.org/x/sys/unix"
)

// DefaultSocket is where the daemon listens unless told otherwise; a
// client also reads SANDBOXD_SOCKET.
const DefaultSocket = "/run/sandboxd/sandboxd.sock"

// MaxAnswer bounds an answer a client reads whole (a JSON object), as
// the daemon bounds a request's body.
const MaxAnswer = 1 << 20

// ExecRequest is one run, as `sandboxd run` describes it: the command,
// and the caller's environment, working directory and umask (the
// daemon checks them against the peer; its ids come from the kernel).
// It is the first line of POST /v1/exec's body; with Stdin, the
// command's standard input follows it, to the end of the body.
type ExecRequest struct {
	Argv []string `json:"argv"`
	// Command is the exact string a grant binds to (-c's).
	Command string `json:"command,omitempty"`
	Context
	// TimeoutMS ends the command after this many milliseconds (0: none).
	TimeoutMS        int64 `json:"timeout_ms,omitempty"`
	Retries          int   `json:"retries"`
	NoTransaction    bool  `json:"no_transaction,omitempty"`
	NoDetect         bool  `json:"no_detect,omitempty"`
	RequireIsolation bool  `json:"require_isolation,omitempty"`
	Stdin            bool  `json:"stdin,omitempty"`
	// Retry is who retries after allowed boundaries: "daemon" (or ""),
	// or "client": the daemon holds the attempt's layer and answers the
	// allows' grants in the report's "retry", for an exec that presents
	// them (Grants) or a decline (POST /v1/retries/decline).
	Retry string `json:"retry,omitempty"`
	// Grants are a held attempt's grants, all of them: this exec is its
	// retry, for the same command, caller and context.
	Grants []string `json:"grants,omitempty"`
	// Questions: the client relays questions for a person (they come as
	// "question" lines; answers go to /v1/questions/{id}/answer).
	Questions bool `json:"questions,omitempty"`
	// Text: the client shows the run's events as `sandboxd run` prints
	// them on stderr; each "event" line carries those lines (Text),
	// rendered by the daemon, which keeps the count of the denials an
	// attempt shows in full.
	Text bool `json:"text,omitempty"`
}

// Context is who a request is for and where, as every request that
// acts for a caller carries it: the caller's environment, working
// directory and umask (checked against the peer, whose ids are the
// kernel's), and the workspace, policy, session, agent, intent and
// reviewer mode, as sandboxd run's flags give them ("" reviewer: auto).
type Context struct {
	Env       []string `json:"env"`
	Cwd       string   `json:"cwd"`
	Umask     uint32   `json:"umask"`
	Workspace string   `json:"workspace,omitempty"`
	Policy    string   `json:"policy,omitempty"`
	Session   string   `json:"session,omitempty"`
	Agent     string   `json:"agent,omitempty"`
	Intent    string   `json:"intent,omitempty"`
	Reviewer  string   `json:"reviewer,omitempty"`
}

// ExecLine is one line of /v1/exec's answer (NDJSON): output as it
// comes, the run's events, and last the report (or the public sentence
// for a run sandboxd could not do). Question, Event and Report are
// JSON: a daemon.Question, a session.Event and a session.Report.
type ExecLine struct {
	// Type is "started" (first, with Exec), "stdout", "stderr", "event",
	// "question" or "report".
	Type string `json:"type"`
	// Exec is the run's id, for POST /v1/execs/{id}/signal.
	Exec     string          `json:"exec,omitempty"`
	Question json.RawMessage `json:"question,omitempty"`
	Data     []byte          `json:"data,omitempty"`
	Event    json.RawMessage `json:"event,omitempty"`
	// Text is the event as `sandboxd run` shows it on stderr, when the
	// request asked for text (ExecRequest.Text); "" when it shows
	// nothing of it.
	Text   string          `json:"text,omitempty"`
	Report json.RawMessage `json:"report,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// EventQuestionWaiting is the kind of the event (session's
// KindQuestionWaiting) that says a question waits on the approvals page.
const EventQuestionWaiting = "question_waiting"

// EventKind is an event line's kind ("" when it has none).
func (l ExecLine) EventKind() string {
	var e struct {
		Kind string `json:"kind"`
	}
	if json.Unmarshal(l.Event, &e) != nil {
		return ""
	}
	return e.Kind
}

// SignalRequest names a signal to forward: INT, TERM, HUP, QUIT, USR1,
// USR2 or WINCH.
type SignalRequest struct {
	Signal string `json:"signal"`
}

// APIError is every error's body.
type APIError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Forwardable are the signals a client may forward to its run, by the
// names it gives them: those a person sends a command from a terminal
// or a service manager (sandboxd run relays the same ones embedded).
func Forwardable() map[string]unix.Signal {
	return map[string]unix.Signal{
		"INT": unix.SIGINT, "TERM": unix.SIGTERM, "HUP": unix.SIGHUP, "QUIT": unix.SIGQUIT,
		"USR1": unix.SIGUSR1, "USR2": unix.SIGUSR2, "WINCH": unix.SIGWINCH,
	}
}

// SignalName is sig's name as a SignalRequest gives it.
func SignalName(sig unix.Signal) (string, bool) {
	for name, s := range Forwardable() {
		if s == sig {
			return name, true
		}
	}
	return "", false
}

// described are the variables that describe the caller: the front end's
// getenv has the last word on them (one it does not set is unset, not
// empty).
func described() []string {
	return []string{"HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL"}
}

// CallerEnv is the environment a run's request carries for a front end
// whose process environment is environ and whose getenv describes the
// caller: the describing variables getenv sets, then every other
// variable of environ, in its order.
func CallerEnv(environ []string, getenv func(string) string) []string {
	var env []string
	skip := map[string]bool{}
	for _, k := range described() {
		skip[k] = true
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	for _, kv := range environ {
		if !skip[envlist.Key(kv)] {
			env = append(env, kv)
		}
	}
	return env
}

// ExitCode is the exit status a report line's report gives, and whether
// it has a report that says one.
func (l ExecLine) ExitCode() (int, bool) {
	var r struct {
		ExitCode *int `json:"exit_code"`
	}
	if len(l.Report) == 0 || json.Unmarshal(l.Report, &r) != nil || r.ExitCode == nil {
		return 0, false
	}
	return *r.ExitCode, true
}
