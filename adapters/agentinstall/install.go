package agentinstall

import (
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/adapters/agenthook"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/statedir"
)

// Agents are the agents the installer knows, in the order status shows
// them.
var Agents = []string{agenthook.ClaudeCode, agenthook.Codex}

// Env is where the installer works, as the front end found it: nothing
// here reads the process's own environment.
type Env struct {
	// Sandboxd is the absolute path of the sandboxd binary the agents
	// will run (symbolic links resolved).
	Sandboxd string
	// Layout is the caller's sandboxd configuration and state
	// directories: the install record lives there, and Claude Code's
	// file tools are denied both.
	Layout statedir.Layout
	// Home is the caller's home, for showing paths as ~/...
	Home string
	// ClaudeDir is Claude Code's configuration directory
	// ($CLAUDE_CONFIG_DIR, else ~/.claude).
	ClaudeDir string
	// CodexHome is Codex's ($CODEX_HOME, else ~/.codex).
	CodexHome string
	// ShellPrefixEnv is CLAUDE_CODE_SHELL_PREFIX in the caller's
	// environment ("" when unset): status says when it differs from the
	// one the settings give.
	ShellPrefixEnv string
}

// Options change what Install and Uninstall do.
type Options struct {
	// DryRun: say what would change, write nothing.
	DryRun bool
}

// Change is one thing install or uninstall did (or, in a dry run,
// would do).
type Change struct {
	// File is the file it is in, as the agent names it; "" for a
	// remark about the whole agent.
	File string
	// Did is what changed, a plain phrase.
	Did string
}

// Check is one piece of an agent's wiring, as status found it.
type Check struct {
	Piece  string
	OK     bool
	Detail string
}

// Install wires sandboxd into agent's configuration (see the package
// doc). It is idempotent: an earlier install's entries are kept, or
// replaced where they were when sandboxd moved.
func Install(agent string, e Env, o Options) ([]Change, error) {
	if err := e.check(agent); err != nil {
		return nil, err
	}
	if agent == agenthook.ClaudeCode {
		return installClaude(e, o)
	}
	return installCodex(e, o)
}

// Uninstall takes out what Install put in, as its record says.
func Uninstall(agent string, e Env, o Options) ([]Change, error) {
	if err := e.check(agent); err != nil {
		return nil, err
	}
	return uninstall(agent, e, o)
}

// Status checks each piece of agent's wiring.
func Status(agent string, e Env) ([]Check, error) {
	if err := e.check(agent); err != nil {
		return nil, err
	}
	if agent == agenthook.ClaudeCode {
		return statusClaude(e), nil
	}
	return statusCodex(e), nil
}

// check refuses an unknown agent and paths the agents' files could not
// name exactly.
func (e Env) check(agent string) error {
	if agent != agenthook.ClaudeCode && agent != agenthook.Codex {
		return publicerr.Errorf(nil, "unknown agent %q: sandboxd installs into %s", agent, strings.Join(Agents, " and "))
	}
	for _, p := range []struct{ name, path string }{
		{"sandboxd's own path", e.Sandboxd}, {"the home directory", e.Home}, {"sandboxd's configuration directory", e.Layout.Config},
		{"sandboxd's state directory", e.Layout.State}, {"Claude Code's configuration directory", e.ClaudeDir}, {"Codex's home", e.CodexHome},
	} {
		if !filepath.IsAbs(p.path) || filepath.Clean(p.path) != p.path || !utf8.ValidString(p.path) || strings.ContainsAny(p.path, "\x00\n\r") {
			return publicerr.Errorf(nil, "%s (%q) is not an absolute, clean path the agents' files can hold", p.name, p.path)
		}
	}
	return nil
}

// shown is path for the person: ~ for the home.
func (e Env) shown(path string) string {
	if rel, err := filepath.Rel(e.Home, path); err == nil && e.Home != "/" && rel != ".." && !strings.HasPrefix(rel, "../") {
		if rel == "." {
			return "~"
		}
		return "~/" + rel
	}
	return path
}
