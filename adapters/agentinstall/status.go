package agentinstall

import (
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/adapters/agenthook"
	"github.com/sandboxd/sandboxd/publicerr"
)

// statusSandboxd is the binary the agent's files should name: the
// install record's, else this one.
func statusSandboxd(agent string, e Env) (string, bool) {
	r, ok, err := loadRecord(e.Layout.Install(agent))
	if err != nil || !ok || r.Sandboxd == "" {
		return e.Sandboxd, false
	}
	return r.Sandboxd, true
}

// binaryCheck: the binary the hooks run is there and executable.
func binaryCheck(e Env, sandboxd string, recorded bool) Check {
	c := Check{Piece: "sandboxd"}
	mode, err := statFile(sandboxd)
	switch {
	case err != nil:
		c.Detail = sandboxd + " is not there (" + publicerr.Reason(err) + "): every command the agent runs is blocked; run install again from the sandboxd you use"
	case !mode.IsRegular() || mode.Perm()&0o111 == 0:
		c.Detail = sandboxd + " is not an executable file: every command the agent runs is blocked"
	default:
		c.OK, c.Detail = true, sandboxd
		if !recorded {
			c.Detail += " (no install recorded)"
		} else if sandboxd != e.Sandboxd {
			c.Detail += " (not this sandboxd, " + e.Sandboxd + "; install again to use this one)"
		}
	}
	return c
}

// statusFile reads one agent file for status; a file that cannot be
// read is a failed check.
func statusFile(e Env, path, piece string) (*agentFile, *Check) {
	f, err := readAgentFile(path, e.shown(path), formatOf(path))
	if err != nil {
		return nil, &Check{Piece: piece, Detail: publicerr.Message(err, e.shown(path)+" cannot be read")}
	}
	if !f.exists {
		return nil, &Check{Piece: piece, Detail: e.shown(path) + " is not there"}
	}
	return f, nil
}

func statusClaude(e Env) []Check {
	sb, recorded := statusSandboxd(agenthook.ClaudeCode, e)
	out := []Check{binaryCheck(e, sb, recorded)}
	path := claudeSettings(e)
	f, bad := statusFile(e, path, "settings")
	if bad != nil {
		return append(out, *bad)
	}
	out = append(out, claudePrefixCheck(e, f))
	out = append(out, claudeLinkCheck(e, sb), claudeHookCheck(f, sb), claudeDenyCheck(e, f))
	return out
}

// claudePrefixCheck: the settings name sandboxd's link as the shell
// prefix. Claude Code 2.1.332 lets its settings win over the
// environment, so a CLAUDE_CODE_SHELL_PREFIX there is only worth a word.
func claudePrefixCheck(e Env, f *agentFile) Check {
	want := agenthook.ClaudePrefix(e.Layout.Bin())
	c := Check{Piece: "shell prefix"}
	if raw, ok, _ := f.doc.get(claudePrefixPath); !ok || !f.doc.same(raw, string(jsonString(want))) {
		c.Detail = f.shown + " does not set env.CLAUDE_CODE_SHELL_PREFIX to sandboxd's link: shell commands run without sandboxd"
		return c
	}
	c.OK, c.Detail = true, "every shell command goes through sandboxd"
	if e.ShellPrefixEnv != "" && e.ShellPrefixEnv != want {
		c.Detail += " (CLAUDE_CODE_SHELL_PREFIX in this environment is " + strconv.Quote(e.ShellPrefixEnv) + "; Claude Code's settings win over it)"
	}
	return c
}

// claudeLinkCheck: the prefix link leads to the sandboxd the hooks run.
func claudeLinkCheck(e Env, sb string) Check {
	c := Check{Piece: "shell prefix link"}
	real, ok := agenthook.ClaudeLinkTarget(claudeLink(e), sb)
	switch {
	case real == "":
		c.Detail = linkShown + " does not lead to a file: every shell command fails"
	case !ok:
		c.Detail = linkShown + " leads to " + real + ", not to " + sb + ": the hook blocks every command; run install again"
	default:
		c.OK, c.Detail = true, linkShown+" leads to "+sb
	}
	return c
}

func claudeHookCheck(f *agentFile, sb string) Check {
	c := Check{Piece: "hook"}
	groups, err := f.doc.elems(claudeHooksPath)
	switch {
	case err != nil:
		c.Detail = f.shown + ": hooks.PreToolUse is not a list"
	case !claudeHasHook(groups, sb):
		c.Detail = f.shown + " has no PreToolUse hook for Bash running sandboxd and blocking on failure"
	default:
		c.OK, c.Detail = true, "the PreToolUse hook for Bash blocks on failure"
	}
	if raw, ok, _ := f.doc.get([]string{"disableAllHooks"}); ok && f.doc.same(raw, "true") {
		c.OK, c.Detail = false, f.shown+" sets disableAllHooks: no hook runs"
	}
	return c
}

func claudeDenyCheck(e Env, f *agentFile) Check {
	c := Check{Piece: "deny rules"}
	rules, err := claudeDenyRules(e)
	if err != nil {
		c.Detail = publicerr.Message(err, "the deny rules cannot be checked")
		return c
	}
	have, err := f.doc.elems(claudeDenyPath)
	if err != nil {
		c.Detail = f.shown + ": permissions.deny is not a list"
		return c
	}
	var missing []string
	for _, r := range rules {
		if indexOf(f.doc, have, r.value) < 0 {
			missing = append(missing, r.what)
		}
	}
	if len(missing) > 0 {
		c.Detail = f.shown + " lacks " + strings.Join(missing, ", ")
		return c
	}
	c.OK, c.Detail = true, "Claude Code's file tools are denied sandboxd's configuration, its state and Claude Code's own settings"
	return c
}
