package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/adapters/agentinstall"
	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/publicerr"
)

const hookInstallUsage = `Usage:
  sandboxd hook install [--dry-run] claude-code|codex
  sandboxd hook status [claude-code|codex]
  sandboxd hook uninstall [--dry-run] claude-code|codex

install merges sandboxd's entries into the agent's own configuration
(Claude Code: $CLAUDE_CONFIG_DIR or ~/.claude; Codex: $CODEX_HOME or
~/.codex), keeping yours, and prints each change; a file it cannot
edit without overwriting something of yours is left as it is, with
the reason. status checks each piece, for both agents when none is
named, and exits 1 when one is missing. uninstall removes exactly what
install added, gives back the values it replaced, and leaves (and
names) what you changed since.
`

// hookInstall is `sandboxd hook install|status|uninstall [AGENT]`.
func hookInstall(action string, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sandboxd hook "+action, flag.ContinueOnError)
	dry := false
	if action != "status" {
		fs.BoolVar(&dry, "dry-run", false, "say what would change, and change nothing")
	}
	verbose := fs.Bool("v", false, "print the internal cause of a failure")
	if code, ok := parseFlags(fs, args, hookInstallUsage, stdout, stderr); !ok {
		return code
	}
	agents, msg := installAgents(action, fs.Args())
	if msg != "" {
		return usageError(stderr, withFlags(hookInstallUsage, fs), msg)
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(publicerr.Message(err, "sandboxd could not finish because of an internal error (run with -v to see it)")))
		if *verbose {
			fmt.Fprintf(stderr, "sandboxd: cause: %s\n", esc(publicerr.Internal(err)))
		}
		return 1
	}
	e, err := installEnv(getenv)
	if err != nil {
		return fail(err)
	}
	if action == "status" {
		return hookStatus(agents, e, stdout, fail)
	}
	agent, o := agents[0], agentinstall.Options{DryRun: dry}
	var changes []agentinstall.Change
	if action == "install" {
		changes, err = agentinstall.Install(agent, e, o)
	} else {
		changes, err = agentinstall.Uninstall(agent, e, o)
	}
	printChanges(stdout, agent, e.Home, changes)
	switch {
	case err != nil:
		return fail(err)
	case dry:
		fmt.Fprintf(stdout, "%s: a dry run: nothing was changed\n", agent)
	case action == "install" && agent == "codex":
		fmt.Fprintln(stdout, `codex: installed; Codex's own sandbox is off (sandbox_mode = "danger-full-access"): sandboxd is the sandbox. sandboxd hook status codex checks it.`)
	case action == "install":
		fmt.Fprintf(stdout, "%s: installed; sandboxd hook status %s checks it.\n", agent, agent)
	}
	return 0
}

// installAgents checks the agent arguments of action: one agent, or
// for status none (both).
func installAgents(action string, args []string) ([]string, string) {
	switch {
	case action == "status" && len(args) == 0:
		return agentinstall.Agents, ""
	case len(args) != 1:
		return nil, fmt.Sprintf("hook %s takes one agent (%s), not %s", action, strings.Join(agentinstall.Agents, " or "), quoted(args))
	case !slices.Contains(agentinstall.Agents, args[0]):
		return nil, fmt.Sprintf("unknown agent %q: sandboxd knows %s", args[0], strings.Join(agentinstall.Agents, " and "))
	}
	return args, ""
}

// installEnv describes where the installer works, from this process:
// its own binary (links resolved, the path the agents will run), the
// caller's sandboxd directories, and the agents' directories.
func installEnv(getenv func(string) string) (agentinstall.Env, error) {
	self, err := sandboxdPath()
	if err == nil {
		self, err = filepath.EvalSymlinks(self)
	}
	if err != nil {
		return agentinstall.Env{}, publicerr.Wrap(err, "sandboxd cannot find its own binary, which the agents must run")
	}
	caller, err := runcmd.CallerOf(getenv)
	if err != nil {
		return agentinstall.Env{}, err
	}
	claudeDir, codexHome, err := agentDirs(getenv)
	if err != nil {
		return agentinstall.Env{}, err
	}
	e := agentinstall.Env{
		Sandboxd:       self,
		Layout:         caller.Layout(),
		Home:           caller.Home,
		ClaudeDir:      claudeDir,
		CodexHome:      codexHome,
		ShellPrefixEnv: getenv("CLAUDE_CODE_SHELL_PREFIX"),
	}
	return e, nil
}

// agentDirs are the agents' own directories as the agents find them:
// Claude Code's ($CLAUDE_CONFIG_DIR, else ~/.claude) and Codex's
// ($CODEX_HOME, else ~/.codex). The installer, the hooks and the shell
// prefix all read them here.
func agentDirs(getenv func(string) string) (claudeDir, codexHome string, err error) {
	home := getenv("HOME")
	claudeDir, codexHome = filepath.Join(home, ".claude"), filepath.Join(home, ".codex")
	for _, v := range []struct {
		name string
		dir  *string
	}{{"CLAUDE_CONFIG_DIR", &claudeDir}, {"CODEX_HOME", &codexHome}} {
		if d := getenv(v.name); d != "" {
			if !filepath.IsAbs(d) {
				return "", "", publicerr.Errorf(nil, "%s is %q, not an absolute path: set it to one, as the agent sees it", v.name, d)
			}
			*v.dir = filepath.Clean(d)
		}
	}
	return claudeDir, codexHome, nil
}

// printChanges prints one line a change: the file (~ for the home),
// then what changed in it.
func printChanges(stdout io.Writer, agent, home string, changes []agentinstall.Change) {
	for _, c := range changes {
		where := agent
		if c.File != "" {
			where = tildePath(c.File, home)
		}
		fmt.Fprintf(stdout, "%s: %s\n", esc(where), esc(c.Did))
	}
}

// hookStatus prints each agent's checks; 1 when one fails.
func hookStatus(agents []string, e agentinstall.Env, stdout io.Writer, fail func(error) int) int {
	code := 0
	for _, a := range agents {
		checks, err := agentinstall.Status(a, e)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%s:\n", a)
		for _, c := range checks {
			mark := "ok  "
			if !c.OK {
				mark, code = "MISS", 1
			}
			fmt.Fprintf(stdout, "  %s %s: %s\n", mark, esc(c.Piece), esc(c.Detail))
		}
	}
	return code
}

// tildePath is path with the home written ~.
func tildePath(path, home string) string {
	if rel, err := filepath.Rel(home, path); err == nil && home != "/" && rel != ".." && !strings.HasPrefix(rel, "../") {
		return filepath.Join("~", rel)
	}
	return path
}
