package session

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/envlist"
	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/statedir"
)

// Caller is who asks for a run, as the front end authenticated it: the
// CLI describes its own user; a daemon the peer on its socket.
type Caller struct {
	// UID and GID are the caller's ids. The session a request belongs to
	// is scoped by UID, so no caller can name another user's session.
	UID, GID int
	// Groups are the caller's supplementary groups. Whatever sandboxd
	// reads, writes or creates for the caller it does with these ids
	// (package fsid): the kernel decides what the caller may use.
	Groups []int
	// Home is the caller's home directory (absolute).
	Home string
	// ConfigHome and StateHome are XDG_CONFIG_HOME and XDG_STATE_HOME
	// (or their defaults under Home): sandboxd's policy and state live in
	// their "sandboxd" directories.
	ConfigHome, StateHome string
	// DataHome is XDG_DATA_HOME (or its default under Home).
	DataHome string
	// Env is the caller's environment, before the policy filters it.
	Env []string
	// Cwd is the caller's working directory (absolute).
	Cwd string
	// Umask is the caller's: a commit gives new files no more.
	Umask uint32
	// GitConfigs are the caller's own git config files (system, global,
	// XDG): their hooksPath and includes reach into every repository.
	GitConfigs []string
	// RuntimeDir is XDG_RUNTIME_DIR, masked inside.
	RuntimeDir string
}

// NewCaller describes a caller from its ids, environment, working
// directory and umask, deriving the rest as a login shell would.
func NewCaller(uid, gid int, env []string, cwd string, umask uint32) (Caller, error) {
	get := func(k string) string { return envlist.Get(env, k) }
	c := Caller{UID: uid, GID: gid, Env: env, Cwd: cwd, Umask: umask, RuntimeDir: get("XDG_RUNTIME_DIR")}
	home := get("HOME")
	if home == "" || !filepath.IsAbs(home) {
		return c, publicerr.New("HOME must be set to an absolute path")
	}
	c.Home = filepath.Clean(home)
	c.ConfigHome = filepath.Join(c.Home, ".config")
	if x := get("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		c.ConfigHome = filepath.Clean(x)
	}
	c.StateHome = filepath.Join(c.Home, ".local", "state")
	if x := get("XDG_STATE_HOME"); filepath.IsAbs(x) {
		c.StateHome = filepath.Clean(x)
	}
	c.DataHome = filepath.Join(c.Home, ".local", "share")
	if x := get("XDG_DATA_HOME"); filepath.IsAbs(x) {
		c.DataHome = filepath.Clean(x)
	}
	if get("GIT_CONFIG_NOSYSTEM") == "" {
		c.GitConfigs = append(c.GitConfigs, "/etc/gitconfig")
	}
	c.GitConfigs = append(c.GitConfigs, filepath.Join(c.ConfigHome, "git", "config"), filepath.Join(c.Home, ".gitconfig"))
	if x := get("GIT_CONFIG_GLOBAL"); filepath.IsAbs(x) {
		c.GitConfigs = append(c.GitConfigs, filepath.Clean(x))
	}
	return c, nil
}

// Getenv is the caller's value of the environment variable k ("" when
// unset).
func (c Caller) Getenv(k string) string { return envlist.Get(c.Env, k) }

// ID is the caller's file-system identity.
func (c Caller) ID() fsid.ID {
	return fsid.ID{UID: c.UID, GID: c.GID, Groups: c.Groups, Umask: c.Umask}
}

// Layout is where sandboxd keeps this caller's configuration and state
// (caches, breaker, overrides, quarantine, journals); never readable
// from inside.
func (c Caller) Layout() statedir.Layout { return statedir.For(c.ConfigHome, c.StateHome) }

// Job is one command to run.
type Job struct {
	// Argv is the command; Command is the exact string a grant binds to
	// (empty: Argv, shell-quoted).
	Argv    []string
	Command string
	// Workspace is the writable root (empty: the caller's Cwd).
	Workspace string
	// RequireCwd refuses a run whose caller's Cwd is not inside the
	// workspace, instead of starting it at the workspace's root: for a
	// front end whose caller names a directory per command.
	RequireCwd bool
	// Above are .sandboxd.toml files above Workspace that apply to the
	// run: Runner.Workspace's, for a front end that fixed a workspace it
	// found (a run that finds its workspace finds them itself).
	Above []string
	// Policy is an explicit policy file (empty: the caller's own
	// policy.toml, if there is one).
	Policy string
	// Session names the agent session (empty: the run is its own session
	// and has no circuit breaker). It is scoped by the caller's uid.
	Session string
	// Agent, ToolCallID and Intent describe the request for the reviewer:
	// which agent asks, its tool call, and the user's request, as the
	// front end read it from the person (a terminal, a transcript).
	Agent, ToolCallID, Intent string
	// Stated is the agent's own account of why it runs the command (an
	// MCP tool's intent argument): the model reviewer is told the agent
	// wrote it, so it never stands for the user's words.
	Stated string
	// Earlier are the user's earlier messages and Recent the agent's
	// recent commands, oldest first, as an adapter supplies them:
	// evidence for the model reviewer (trimmed first when the prompt is
	// over budget; the Intent never is).
	Earlier, Recent []string
	// Retries bounds the retries after granted boundaries.
	Retries int
	// Hold has the front end drive the retry (the daemon's retry
	// "client"): when a retry would follow, the report carries the
	// grants (Report.Retry) and the attempt's layer is held for a run
	// that presents them (held.go).
	Hold bool
	// Present are the grants of a held attempt this run continues: all
	// of them, for the same caller and job (the streams, signals and
	// timeout may differ).
	Present []string
	// Timeout, if non-zero, ends the command (exit 124).
	Timeout time.Duration
	// NoTransaction writes straight to the workspace; NoDetect turns
	// boundary detection off; RequireIsolation refuses to run without
	// namespaces.
	NoTransaction, NoDetect, RequireIsolation bool
	// Reviewer is the review mode: ReviewAuto, ReviewModel, ReviewHuman
	// or ReviewOff ("": the Reviewers slots as given).
	Reviewer string
	// Reviewers fill the broker's reviewer slots: Person is the person
	// the front end can ask (nil: nobody); Model, if set, stands in for
	// the model the policy configures (tests).
	Reviewers Reviewers
	// Stdin, Stdout and Stderr are the command's streams.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Pipes are write ends of pipes every attempt of the command gets as
	// descriptors 3, 4, ... (sandbox.Spec.Pipes); the front end reads
	// them, as it would any output of the command.
	Pipes []*os.File
	// Signals, if set, are forwarded to the command while it runs.
	Signals <-chan os.Signal
}

// Reviewers are the broker's reviewer slots for one job.
type Reviewers struct {
	Model  broker.Reviewer // nil: no model
	Person broker.Person   // nil: nobody to ask
}

// commandString is the exact command a grant binds to.
func (j Job) commandString() string {
	if j.Command != "" {
		return j.Command
	}
	quoted := make([]string, len(j.Argv))
	for i, a := range j.Argv {
		quoted[i] = shellQuote(a)
	}
	return strings.Join(quoted, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
