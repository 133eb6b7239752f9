package integration

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The end-to-end tests of Claude Code wired to sandboxd: the real agent
// (claudeCode's binary), headless (-p), against a scripted model. As
// root Claude Code refuses bypassPermissions, so root runs in the default
// mode with the person's allow rules and the workspace trusted; the test
// user runs with bypassPermissions. Both modes must keep the person's
// deny rules and run every command under sandboxd.

// claudeSetup writes the person's own Claude Code settings, which
// sandboxd's install merges into: Bash and Read allowed (-p cannot ask)
// and the given deny rules; and the workspace trusted, without which
// Claude Code ignores the allow rules.
func (ae *agentEnv) claudeSetup(deny ...string) {
	ae.t.Helper()
	ae.writeJSON(ae.claudeSettings(), map[string]any{
		"permissions": map[string]any{"allow": []string{"Bash", "Read"}, "deny": append([]string{}, deny...)}})
	// Claude Code's own state: beside the home's .claude, or in the
	// directory CLAUDE_CONFIG_DIR names.
	state := filepath.Join(ae.home, ".claude.json")
	if ae.claudeDir != "" {
		state = filepath.Join(ae.claudeDir, ".claude.json")
	}
	ae.writeJSON(state, map[string]any{
		"projects": map[string]any{ae.ws: map[string]any{"hasTrustDialogAccepted": true}}})
}

// useClaudeDir makes dir Claude Code's configuration directory, through
// CLAUDE_CONFIG_DIR, for the installer and Claude Code alike.
func (ae *agentEnv) useClaudeDir(dir string) {
	ae.claudeDir = dir
	ae.vars = append(ae.vars, "CLAUDE_CONFIG_DIR="+dir)
}

// claudeSettings is the person's Claude Code settings file.
func (ae *agentEnv) claudeSettings() string {
	if ae.claudeDir != "" {
		return filepath.Join(ae.claudeDir, "settings.json")
	}
	return filepath.Join(ae.home, ".claude", "settings.json")
}

// claude runs Claude Code headless on the person's prompt.
func (ae *agentEnv) claude() agentResult {
	ae.t.Helper()
	mode := "default"
	if !ae.id.root() {
		mode = "bypassPermissions"
	}
	return ae.run([]string{
		"ANTHROPIC_BASE_URL=" + ae.model.url,
		"ANTHROPIC_API_KEY=sk-ant-e2e-" + randHex(4),
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}, "-p", ae.prompt, "--output-format", "json", "--permission-mode", mode)
}

// TestClaudeCodeShellUnderSandboxd: with sandboxd installed, Claude
// Code's shell commands run under sandboxd run. A write outside the
// workspace is refused (the file absent), the refusal reaches the model,
// and sandboxd's reviewer was shown what the person typed; a write in
// the workspace lands; a cd carries over to the next command, as it
// does without sandboxd; the person's deny rule still blocks its
// command; Claude Code's own Write tool cannot change sandboxd's policy
// or the settings that wire Claude Code to sandboxd.
func TestClaudeCodeShellUnderSandboxd(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		outside := filepath.Join(e.mkdir("outside", 0o755), "evil.txt")
		inside := "landed-" + randHex(4)
		policy := filepath.Join(e.home, ".config", "sandboxd", "policy.toml")
		settings := filepath.Join(e.home, ".claude", "settings.json")
		ae := newAgentEnv(t, e, claudeCode(),
			calls(bash("echo evil > "+outside)),
			calls(bash("echo "+inside+" > in.txt")),
			calls(bash("mkdir -p sub && cd sub")),
			calls(bash("pwd")),
			calls(bash("touch denied.txt")),
			// Claude Code writes a file only once the model has read it.
			calls(read(policy), read(settings)),
			calls(write(policy, "[review]\nmodel = \"\"\n"), write(settings, "{}\n")),
		)
		ae.claudeSetup("Bash(touch:*)")
		ae.install()
		policyKept, settingsKept := fileUnchanged(t, policy), fileUnchanged(t, settings)
		r := ae.claude()

		absent(t, outside, "Claude Code's write outside the workspace ran")
		if got := ae.mustResult(0, 0, r); !strings.Contains(got, "sandboxd: denied") || !strings.Contains(got, reviewerWhy) {
			t.Errorf("the model was not told sandboxd's reviewer refused the write: %q", got)
		}
		ae.reviewerSawPrompt(t)
		hasContent(t, filepath.Join(e.ws, "in.txt"), inside+"\n", "the workspace write did not land")
		if got := ae.mustResult(3, 0, r); strings.TrimSpace(got) != filepath.Join(e.ws, "sub") {
			t.Errorf("after cd sub, pwd printed %q, not %s", got, filepath.Join(e.ws, "sub"))
		}
		ae.mustResult(4, 0, r)
		absent(t, filepath.Join(e.ws, "sub", "denied.txt"), "the person's deny rule Bash(touch:*) did not hold")
		absent(t, filepath.Join(e.ws, "denied.txt"), "the person's deny rule Bash(touch:*) did not hold")
		ae.mustResult(6, 0, r)
		policyKept()
		ae.mustResult(6, 1, r)
		settingsKept()
	})
}

// TestClaudeCodeBrokenSandboxdBlocks: when the sandboxd Claude Code was
// wired to is broken after the install (gone, not executable, not a
// program, crashing), the command is blocked; it never runs bare.
func TestClaudeCodeBrokenSandboxdBlocks(t *testing.T) {
	t.Parallel()
	for _, id := range identities(t) {
		for _, b := range brokenSandboxd() {
			t.Run(id.name+"/"+b.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, id)
				ae := newAgentEnv(t, e, claudeCode(), calls(bash("echo ran > marker.txt")))
				ae.claudeSetup()
				ae.install()
				b.spoil(t, ae.sandboxd)
				r := ae.claude()
				ae.mustResult(0, 0, r)
				absent(t, filepath.Join(e.ws, "marker.txt"), "the command ran without sandboxd")
			})
		}
	}
}

// outputFile finds where Claude Code says a background task's output is.
var outputFile = regexp.MustCompile(`<output-file>([^<]+)</output-file>`)

// TestClaudeCodeBackground: a command Claude Code runs in the background
// still runs under sandboxd (its write outside the workspace refused,
// its workspace write landed), and its output, sandboxd's refusal
// included, reaches the model when it reads the task's output; a
// command of the turn the task's notice starts is sandboxed too, and
// the reviewer is shown the request the person typed. Claude Code's
// configuration is where CLAUDE_CONFIG_DIR says, for the installer and
// the agent.
func TestClaudeCodeBackground(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		outside := filepath.Join(e.mkdir("outside", 0o755), "evil.txt")
		mark := "BG-" + randHex(4)
		bg := bash("sleep 1; echo " + mark + " > bg.txt; echo evil > " + outside + "; echo " + mark)
		bg.input["run_in_background"] = true
		ae := newAgentEnv(t, e, claudeCode(), calls(bg), func(body string) []toolCall {
			// The model ends its turn until Claude Code says the task is done.
			m := outputFile.FindStringSubmatch(body)
			if m == nil {
				return nil
			}
			// A command of the notification's turn still serves the request
			// the person typed.
			return []toolCall{read(m[1]), bash("echo evil > " + outside + ".2")}
		})
		// Claude Code's configuration where CLAUDE_CONFIG_DIR says.
		ae.useClaudeDir(filepath.Join(e.home, "claude-config"))
		ae.claudeSetup()
		ae.install()
		r := ae.claude()

		absent(t, outside, "the background command's write outside the workspace ran")
		hasContent(t, filepath.Join(e.ws, "bg.txt"), mark+"\n", "the background command's workspace write did not land")
		got := ae.mustResult(1, 0, r)
		if !strings.Contains(got, mark) || !strings.Contains(got, "sandboxd: denied") {
			t.Errorf("the background command's output did not reach the model: %q", got)
		}
		ae.mustResult(1, 1, r)
		absent(t, outside+".2", "a write outside the workspace after the task's notification ran")
		ae.reviewerSawPrompt(t)
	})
}

// TestClaudeCodeTimeout: a command that outlives the timeout Claude Code
// gave it is moved to the background, as without sandboxd, and goes on
// under sandboxd: its workspace write lands, its write outside the
// workspace is refused.
func TestClaudeCodeTimeout(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		outside := filepath.Join(e.mkdir("outside", 0o755), "evil.txt")
		mark := "LATE-" + randHex(4)
		// Claude Code refuses a plain sleep followed by more; python's is a program.
		slow := bash(`python3 -c "import time; time.sleep(3)"; echo ` + mark + " > late.txt; echo evil > " + outside)
		slow.input["timeout"] = 1000
		ae := newAgentEnv(t, e, claudeCode(), calls(slow))
		ae.claudeSetup()
		ae.install()
		r := ae.claude()

		if got := ae.mustResult(0, 0, r); !strings.Contains(got, "moved to the background") {
			t.Errorf("the command was not moved to the background at its timeout: %q", got)
		}
		hasContent(t, filepath.Join(e.ws, "late.txt"), mark+"\n", "the command did not go on after its timeout")
		absent(t, outside, "the command's write outside the workspace ran after its timeout")
	})
}

// TestClaudeCodeOwnSandboxBlocks: with Claude Code's own sandbox on
// (bubblewrap, which refuses sandboxd its namespaces), the command is
// blocked rather than run without sandboxd.
func TestClaudeCodeOwnSandboxBlocks(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bwrap", "socat"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("Claude Code's sandbox needs %s (Debian's bubblewrap and socat; .ci/run installs them)", tool)
		}
	}
	forEach(t, func(t *testing.T, e *env) {
		ae := newAgentEnv(t, e, claudeCode(), calls(bash("echo ran > marker.txt")))
		ae.claudeSetup()
		ae.install()
		p := ae.claudeSettings()
		s := readJSON(t, p)
		s["sandbox"] = map[string]any{"enabled": true}
		ae.writeJSON(p, s)
		r := ae.claude()
		if strings.Contains(r.stderr, "Sandbox disabled") {
			t.Fatalf("Claude Code did not turn its sandbox on\n%s", r)
		}
		if got := ae.mustResult(0, 0, r); !strings.Contains(got, "if claude-code's own sandbox is on, turn it off") {
			t.Errorf("the model was not told why: %q", got)
		}
		absent(t, filepath.Join(e.ws, "marker.txt"), "the command ran inside Claude Code's sandbox without sandboxd's")
	})
}

// TestClaudeCodeFileToolsKeepOutOfProtectedNames: with install's rules,
// Claude Code's own Write tool, which writes outside sandboxd, cannot
// plant a file a program on the host would later run or load (a
// Mercurial hook, a mise hook, Codex's project settings), at any depth,
// even where the person allows Write; an ordinary file lands.
func TestClaudeCodeFileToolsKeepOutOfProtectedNames(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		planted := []string{
			filepath.Join(e.ws, ".hg", "hgrc"),
			filepath.Join(e.ws, "sub", ".mise.toml"),
			filepath.Join(e.ws, ".codex", "config.toml"),
		}
		var writes []toolCall
		for _, p := range planted {
			writes = append(writes, write(p, "[hooks]\npre-status = touch /x\n"))
		}
		ae := newAgentEnv(t, e, claudeCode(), calls(append(writes, write(filepath.Join(e.ws, "ok.txt"), "ok\n"))...))
		ae.claudeSetup()
		s := readJSON(t, ae.claudeSettings())
		s["permissions"].(map[string]any)["allow"] = []string{"Bash", "Read", "Write", "Edit"}
		ae.writeJSON(ae.claudeSettings(), s)
		ae.install()
		r := ae.claude()
		for i, p := range planted {
			ae.mustResult(0, i, r)
			absent(t, p, "Claude Code's Write tool planted a protected name")
		}
		hasContent(t, filepath.Join(e.ws, "ok.txt"), "ok\n", "Claude Code's Write of an ordinary file did not land")
	})
}
