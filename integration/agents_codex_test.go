package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// The end-to-end tests of Codex wired to sandboxd: the real agent
// (codex's static binary), headless (codex exec), against a scripted
// model on a model_providers entry of the person's own config.

// codexHome is the test's CODEX_HOME.
func (ae *agentEnv) codexHome() string { return filepath.Join(ae.home, ".codex") }

// codexSetup writes the person's own Codex configuration, which
// sandboxd's install merges into: the scripted model as the provider,
// and the given rules as $CODEX_HOME/rules/default.rules.
func (ae *agentEnv) codexSetup(rules string) {
	ae.t.Helper()
	ae.writeFile(filepath.Join(ae.codexHome(), "config.toml"), fmt.Sprintf(`model = "gpt-5.5"
model_provider = "scripted"
check_for_update_on_startup = false

[model_providers.scripted]
name = "scripted"
base_url = "%s/v1"
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"
`, ae.model.url), 0o600)
	if rules != "" {
		ae.writeFile(filepath.Join(ae.codexHome(), "rules", "default.rules"), rules, 0o600)
	}
}

// codex runs codex exec on the person's prompt, with no terminal and
// nothing on its input.
func (ae *agentEnv) codex() agentResult {
	ae.t.Helper()
	return ae.run([]string{"SCRIPTED_API_KEY=e2e-" + randHex(4)},
		"exec", "--skip-git-repo-check", ae.prompt)
}

// TestCodexShellUnderSandboxd: with sandboxd installed, Codex's shell
// commands run under sandboxd run. A write outside the workspace is
// refused (the file absent), the refusal reaches the model, and
// sandboxd's reviewer was shown what the person typed; a write in the
// workspace lands; the model's workdir is honoured (Codex keeps no shell
// state between commands), and a command given one outside the
// workspace runs neither there nor in the workspace; the person's rule that forbids a command
// still blocks it; apply_patch outside the workspace is refused and
// inside lands, and a patch given to the shell is not applied outside.
func TestCodexShellUnderSandboxd(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		outside := e.mkdir("outside", 0o755)
		inside := "landed-" + randHex(4)
		sub := e.mkdir("ws/sub", 0o755)
		inWorkdir := execCommand("pwd; echo w > w.txt")
		inWorkdir.input["workdir"] = "sub"
		// A workdir outside the workspace: the command must run there or
		// not at all (sandboxd would start it at the workspace's root).
		outWorkdir := execCommand("echo w > w.txt")
		outWorkdir.input["workdir"] = outside
		ae := newAgentEnv(t, e, codex(),
			calls(execCommand("echo evil > "+filepath.Join(outside, "evil.txt"))),
			calls(execCommand("echo "+inside+" > in.txt")),
			calls(inWorkdir),
			calls(execCommand("touch denied.txt")),
			calls(applyPatch(filepath.Join(outside, "patched.txt"), "outside patch")),
			calls(applyPatch("patched.txt", "inside patch")),
			calls(outWorkdir),
			// Codex applies a patch given to the shell this way itself,
			// unless the hook rewrote the command.
			calls(execCommand("apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: "+filepath.Join(outside, "heredoc.txt")+"\n+x\n*** End Patch\nEOF\n")),
			// Codex reads a header with its blanks trimmed: an indented
			// one names a file too.
			calls(toolCall{name: "apply_patch", patch: "*** Begin Patch\n*** Add File: in2.txt\n+ok\n  *** Add File: " + filepath.Join(outside, "indented.txt") + "\n+x\n*** End Patch\n"}),
		)
		ae.codexSetup(`prefix_rule(pattern=["touch"], decision="forbidden")` + "\n")
		ae.install()
		r := ae.codex()

		absent(t, filepath.Join(outside, "evil.txt"), "Codex's write outside the workspace ran")
		if got := ae.mustResult(0, 0, r); !strings.Contains(got, "sandboxd: denied") || !strings.Contains(got, reviewerWhy) {
			t.Errorf("the model was not told sandboxd's reviewer refused the write: %q", got)
		}
		ae.reviewerSawPrompt(t)
		hasContent(t, filepath.Join(e.ws, "in.txt"), inside+"\n", "the workspace write did not land")
		if got := ae.mustResult(2, 0, r); !strings.Contains(got, sub+"\n") {
			t.Errorf("the command given workdir sub did not run there: %q", got)
		}
		hasContent(t, filepath.Join(sub, "w.txt"), "w\n", "the write in the workdir did not land")
		ae.mustResult(3, 0, r)
		absent(t, filepath.Join(e.ws, "denied.txt"), "the person's rule forbidding touch did not hold")
		ae.mustResult(4, 0, r)
		absent(t, filepath.Join(outside, "patched.txt"), "apply_patch wrote outside the workspace")
		ae.mustResult(5, 0, r)
		hasContent(t, filepath.Join(e.ws, "patched.txt"), "inside patch\n", "apply_patch in the workspace did not land")
		ae.mustResult(6, 0, r)
		absent(t, filepath.Join(outside, "w.txt"), "a command given a workdir outside the workspace wrote there")
		absent(t, filepath.Join(e.ws, "w.txt"), "a command given a workdir outside the workspace ran in the workspace instead")
		ae.mustResult(7, 0, r)
		absent(t, filepath.Join(outside, "heredoc.txt"), "a patch given to the shell was applied outside the workspace")
		ae.mustResult(8, 0, r)
		absent(t, filepath.Join(outside, "indented.txt"), "a patch with an indented header wrote outside the workspace")
		absent(t, filepath.Join(e.ws, "in2.txt"), "a patch with a header outside the workspace was applied in part")
	})
}

// TestCodexBrokenSandboxdBlocks: when the sandboxd Codex was wired to is
// broken after the install (gone, not executable, not a program,
// crashing), neither a shell command nor a patch runs: Codex has no
// setting that blocks on a failed hook, and the installed "|| exit 2"
// must stand in for one.
func TestCodexBrokenSandboxdBlocks(t *testing.T) {
	t.Parallel()
	for _, id := range identities(t) {
		for _, b := range brokenSandboxd() {
			t.Run(id.name+"/"+b.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, id)
				ae := newAgentEnv(t, e, codex(),
					calls(execCommand("echo ran > marker.txt")),
					calls(applyPatch("patched.txt", "patched")))
				ae.codexSetup("")
				ae.install()
				b.spoil(t, ae.sandboxd)
				r := ae.codex()
				ae.mustResult(0, 0, r)
				ae.mustResult(1, 0, r)
				absent(t, filepath.Join(e.ws, "marker.txt"), "the command ran without sandboxd")
				absent(t, filepath.Join(e.ws, "patched.txt"), "the patch was applied without sandboxd's check")
			})
		}
	}
}

// TestCodexCommandEndsWithCodex: a command still running when codex exec
// ends (Codex leaves a long command running and answers the model) does
// not outlive Codex: Codex's kill reaches sandboxd and its sandbox.
func TestCodexCommandEndsWithCodex(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		mark := "late-" + randHex(4)
		slow := execCommand("sleep 30; echo late > " + mark + ".txt")
		slow.input["yield_time_ms"] = 500
		ae := newAgentEnv(t, e, codex(), calls(slow))
		ae.codexSetup("")
		ae.install()
		r := ae.codex()

		if got := ae.mustResult(0, 0, r); !strings.Contains(got, "Process running") {
			t.Errorf("Codex did not leave the command running: %q", got)
		}
		noSurvivors(t, mark)
		absent(t, filepath.Join(e.ws, mark+".txt"), "the command outlived Codex")
	})
}

// TestCodexOwnSandboxBlocks: when the person turns Codex's own sandbox
// back on for a run (-s workspace-write), sandboxd cannot make its
// namespaces inside it, and the command is blocked rather than run
// without sandboxd.
func TestCodexOwnSandboxBlocks(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		ae := newAgentEnv(t, e, codex(), calls(execCommand("echo ran > marker.txt")))
		ae.codexSetup("")
		ae.install()
		r := ae.run([]string{"SCRIPTED_API_KEY=e2e-" + randHex(4)},
			"exec", "--skip-git-repo-check", "-s", "workspace-write", ae.prompt)
		if got := ae.mustResult(0, 0, r); !strings.Contains(got, "if codex's own sandbox is on, turn it off") {
			t.Errorf("the model was not told why: %q", got)
		}
		absent(t, filepath.Join(e.ws, "marker.txt"), "the command ran inside Codex's sandbox without sandboxd's")
	})
}
