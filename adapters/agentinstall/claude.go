package agentinstall

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/adapters/agenthook"
	"github.com/sandboxd/sandboxd/persist"
	"github.com/sandboxd/sandboxd/publicerr"
)

// claudeHookTimeout is the PreToolUse hook's timeout in seconds: the hook
// only reads the payload and the transcript and writes the intent file.
const claudeHookTimeout = 60

var (
	claudePrefixPath = []string{"env", "CLAUDE_CODE_SHELL_PREFIX"}
	claudeHooksPath  = []string{"hooks", "PreToolUse"}
	claudeDenyPath   = []string{"permissions", "deny"}
)

func claudeSettings(e Env) string { return filepath.Join(e.ClaudeDir, "settings.json") }

// claudeLink is the link Claude Code runs as its shell prefix, and
// linkShown how the person is told of it (its path is in sandboxd's
// state, which sandboxd never prints).
func claudeLink(e Env) string { return filepath.Join(e.Layout.Bin(), agenthook.ClaudeShellName) }

const linkShown = "the shell prefix link (" + agenthook.ClaudeShellName + ", in sandboxd's state directory)"

// claudeHookGroup is the PreToolUse group install adds: onFailure
// "block" makes a crash, a timeout or a missing sandboxd block the
// command instead of running it bare.
func claudeHookGroup(sandboxd string) string {
	type hook struct {
		Type      string `json:"type"`
		Command   string `json:"command"`
		Timeout   int    `json:"timeout"`
		OnFailure string `json:"onFailure"`
	}
	type group struct {
		Matcher string `json:"matcher"`
		Hooks   []hook `json:"hooks"`
	}
	return string(jsonValue(group{"Bash", []hook{{"command", agenthook.ClaudeHookCommand(sandboxd), claudeHookTimeout, "block"}}}))
}

// denied is a path Claude Code's own file tools must never change.
type denied struct {
	path string
	what string
	dir  bool
}

// claudeDenied are the paths Claude Code's own file tools must never
// change: an agent that edits sandboxd's policy, its state or its own
// wiring grants itself everything.
func claudeDenied(e Env) []denied {
	out := []denied{
		{e.Layout.Config, "sandboxd's configuration directory", true},
		{e.Layout.State, "sandboxd's state directory", true},
		{claudeSettings(e), "this settings file", false},
		// It names the MCP servers the shell prefix runs as the person's
		// own, outside the sandbox.
		{filepath.Join(e.Home, ".claude.json"), "~/.claude.json (its list of MCP servers)", false},
	}
	if p := filepath.Join(e.ClaudeDir, ".claude.json"); p != out[3].path {
		out = append(out, denied{p, "the .claude.json in Claude Code's configuration directory (its list of MCP servers)", false})
	}
	// A rule names a path as written; a link's target is another name
	// for the same files.
	for _, d := range slices.Clone(out) {
		if real, err := filepath.EvalSymlinks(d.path); err == nil && real != d.path {
			out = append(out, denied{real, d.what + " (where its link points)", d.dir})
		}
	}
	return out
}

// claudeRuleUnsafe are the characters Claude Code's path rules read as
// patterns: a rule with one would not name the path exactly.
const claudeRuleUnsafe = "*?[]{}()\\!#"

// claudeDenyRules are the permission rules that deny Claude Code's file
// tools each of claudeDenied's paths: "//" starts an absolute path in a
// rule, "/**" is everything below a directory, and a path's Edit rule
// covers Edit, Write and NotebookEdit (a Write rule covers nothing:
// probe2/CLAUDE-ANSWERS.md §7, Claude Code 2.1.332).
func claudeDenyRules(e Env) ([]piece, error) {
	var out []piece
	for _, d := range claudeDenied(e) {
		if strings.ContainsAny(d.path, claudeRuleUnsafe) {
			return nil, publicerr.Errorf(nil, "%s (%s) holds a character Claude Code's permission rules read as a pattern (one of %s), so no rule can deny it exactly; nothing was changed", d.what, e.shown(d.path), claudeRuleUnsafe)
		}
		pattern := "/" + d.path
		if d.dir {
			pattern += "/**"
		}
		out = append(out, piece{op: opAdd, path: claudeDenyPath, slot: "deny Edit " + d.what,
			value: string(jsonString("Edit(" + pattern + ")")), what: "the rule keeping Claude Code's file tools (Edit, Write, NotebookEdit) out of " + d.what})
	}
	return append(out, claudeNameRules()...), nil
}

// claudeNameRules deny Claude Code's file tools, in every workspace,
// the names sandboxd keeps its agents' own file tools from writing
// (persist.FileToolsDenied): a rule that starts "**/" matches at any
// depth below the directory Claude Code runs in, and "/**" everything
// below a directory of that name.
func claudeNameRules() []piece {
	const what = "the rules keeping Claude Code's file tools out of the names sandboxd protects in every workspace (git's directory, start-up files, tool settings and hooks)"
	var out []piece
	for _, name := range persist.FileToolsDeniedNames() {
		for _, pattern := range []string{"**/" + name, "**/" + name + "/**"} {
			out = append(out, piece{op: opAdd, path: claudeDenyPath, slot: "deny Edit " + pattern,
				value: string(jsonString("Edit(" + pattern + ")")), what: what})
		}
	}
	return out
}

func claudePieces(e Env) ([]piece, error) {
	deny, err := claudeDenyRules(e)
	if err != nil {
		return nil, err
	}
	return append([]piece{
		{op: opSet, path: claudePrefixPath, slot: "shell prefix", value: string(jsonString(agenthook.ClaudePrefix(e.Layout.Bin()))), refuse: true,
			what:    "the shell prefix env.CLAUDE_CODE_SHELL_PREFIX",
			why:     "every shell command Claude Code runs goes through sandboxd, after its permission rules judged the command as written",
			refusal: "sandboxd needs that setting to run each shell command; take it out (or fold it into your own wrapper) and run install again"},
		{op: opAdd, path: claudeHooksPath, slot: "hook Bash", value: claudeHookGroup(e.Sandboxd),
			what: "the PreToolUse hook for Bash", why: "it blocks the command whenever sandboxd fails (onFailure: block)"},
	}, deny...), nil
}

func installClaude(e Env, o Options) ([]Change, error) {
	t, err := newTxn(agenthook.ClaudeCode, e, o)
	if err != nil {
		return nil, err
	}
	pieces, err := claudePieces(e)
	if err != nil {
		return nil, err
	}
	f, err := t.open(claudeSettings(e))
	if err != nil {
		return nil, err
	}
	if err := t.install(f, pieces); err != nil {
		return nil, err
	}
	if err := t.link(claudeLink(e), e.Sandboxd, linkShown); err != nil {
		return nil, err
	}
	return t.finishInstall()
}

// claudeHasHook says whether groups hold sandboxd's hook for Bash,
// blocking on failure.
func claudeHasHook(groups []string, sandboxd string) bool {
	for _, g := range groups {
		var grp struct {
			Matcher string `json:"matcher"`
			Hooks   []struct {
				Type      string `json:"type"`
				Command   string `json:"command"`
				OnFailure string `json:"onFailure"`
			} `json:"hooks"`
		}
		if json.Unmarshal([]byte(g), &grp) != nil || grp.Matcher != "Bash" {
			continue
		}
		for _, h := range grp.Hooks {
			if h.Type == "command" && h.Command == agenthook.ClaudeHookCommand(sandboxd) && h.OnFailure == "block" {
				return true
			}
		}
	}
	return false
}
