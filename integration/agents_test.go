package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The agents the end-to-end tests drive, at the versions issue 28 was
// tried against; .ci/agents.sh installs the same ones into the cache.
const (
	claudePackage = "@anthropic-ai/claude-code@2.1.332"
	codexPackage  = "@openai/codex@0.171.0"
)

// agent is a coding agent the tests drive: how to find its native
// binary (no node needed to run it).
type agent struct {
	name   string // sandboxd's name for it: claude-code, codex
	envVar string // the variable that names its binary (.ci/run sets it)
	pkg    string // its npm package@version: the cache's directory
	inPkg  string // the binary, relative to that directory
}

func claudeCode() agent {
	return agent{"claude-code", "SANDBOXD_TEST_CLAUDE", claudePackage, "node_modules/@anthropic-ai/claude-code-linux-x64/claude"}
}

func codex() agent {
	return agent{"codex", "SANDBOXD_TEST_CODEX", codexPackage, "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"}
}

// agentsCache is where .ci/agents.sh installs the agents.
func agentsCache() string {
	if d := os.Getenv("SANDBOXD_AGENTS_CACHE"); d != "" {
		return d
	}
	if os.Geteuid() == 0 {
		return "/var/cache/sandboxd-agents"
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "sandboxd-agents")
}

// binary is the agent's binary. A machine without it skips the test,
// saying how to get it; one whose variable names a binary that is not
// there fails (CI sets the variables, and must never skip).
func (a agent) binary(t *testing.T) string {
	t.Helper()
	p, set := os.Getenv(a.envVar), true
	if p == "" {
		p, set = filepath.Join(agentsCache(), a.pkg, a.inPkg), false
	}
	st, err := os.Stat(p)
	switch {
	case err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0:
		return p
	case set:
		t.Fatalf("%s=%s, which is not an executable file", a.envVar, p)
	}
	t.Skipf("%s is not installed at %s: run .ci/agents.sh, or set %s to its binary", a.pkg, p, a.envVar)
	return ""
}

// agentEnv is one agent test's world: the env's home and workspace, a
// sandboxd of the test's own where the agent calls it (so that a test
// can break it), the scripted model, and the reviewer's model.
type agentEnv struct {
	*env
	agent    agent
	bin      string // the agent's binary
	sandboxd string // this test's sandboxd, the one the agent is wired to
	model    *scriptedModel
	reviewer *fakeModel
	prompt   string   // what the person typed
	vars     []string // variables every command of the test gets
	// claudeDir is Claude Code's configuration directory when the test
	// names one with CLAUDE_CONFIG_DIR ("": ~/.claude).
	claudeDir string
}

// newAgentEnv prepares e for the agent: a sandboxd of its own, the
// scripted model making the steps' calls, and sandboxd's reviewer set
// to a model that denies everything it is asked, so that a test can
// read what the reviewer was shown.
func newAgentEnv(t *testing.T, e *env, a agent, steps ...step) *agentEnv {
	t.Helper()
	ae := &agentEnv{env: e, agent: a, bin: a.binary(t), prompt: "e2e request " + randHex(6) + ": tidy the workspace"}
	ae.sandboxd = filepath.Join(e.mkdir("bin", 0o755), "sandboxd")
	if err := os.Link(binary, ae.sandboxd); err != nil {
		t.Fatal(err)
	}
	// Its helper beside it (used where the directory is root's).
	if err := os.Link(helperBinary, filepath.Join(filepath.Dir(ae.sandboxd), "sandboxd-helper")); err != nil {
		t.Fatal(err)
	}
	ae.model = newScriptedModel(t, steps...)
	ae.reviewer = newFakeModel(t, func(string) (string, string, string, string) {
		return "deny", "high", "unknown", reviewerWhy
	})
	e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), fmt.Sprintf(
		"[review]\nmodel = \"fake-model\"\nbase_url = %q\napi_key_env = \"FAKE_REVIEW_KEY\"\n", ae.reviewer.url), 0o644)
	return ae
}

// reviewerWhy is the reason sandboxd's reviewer gives for every denial.
const reviewerWhy = "the e2e reviewer denies everything"

// agentResult is one finished agent run.
type agentResult struct {
	stdout, stderr string
	code           int
}

func (r agentResult) String() string {
	return fmt.Sprintf("exit %d\n--- stdout\n%s\n--- stderr\n%s", r.code, r.stdout, r.stderr)
}

// agentRuns admits two agent runs at a time: an agent is a binary of
// 300 to 400 MB that takes a core for most of a second to start, and
// more of them at once only slow each other and the rest of the suite.
var agentRuns = make(chan struct{}, 2)

// run runs the agent as the env's identity, in the workspace, with its
// home, the given variables and no terminal, and waits for it.
func (ae *agentEnv) run(vars []string, args ...string) agentResult {
	ae.t.Helper()
	agentRuns <- struct{}{}
	defer func() { <-agentRuns }()
	return ae.command(ae.bin, vars, args...)
}

// install wires the agent to the test's sandboxd with sandboxd's own
// installer, run from where the agent will call it, as the env's
// identity with its home; then sandboxd hook status must find every
// piece in place.
func (ae *agentEnv) install() {
	ae.t.Helper()
	for _, action := range []string{"install", "status"} {
		if r := ae.command(ae.sandboxd, nil, "hook", action, ae.agent.name); r.code != 0 {
			ae.t.Fatalf("sandboxd hook %s %s failed\n%s", action, ae.agent.name, r)
		}
	}
}

// command runs bin as the env's identity, in the workspace, with its
// home (and Codex's there), the given variables and no terminal.
func (ae *agentEnv) command(bin string, vars []string, args ...string) agentResult {
	ae.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = ae.ws
	cmd.Env = append([]string{
		"HOME=" + ae.home,
		"CODEX_HOME=" + filepath.Join(ae.home, ".codex"),
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=C.UTF-8",
		"USER=" + ae.id.name,
		"FAKE_REVIEW_KEY=fake-review-key",
	}, append(ae.vars, vars...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if os.Geteuid() == 0 && ae.id.uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(ae.id.uid), Gid: uint32(ae.id.gid), Groups: []uint32{}}
	}
	// The agent's process group, background tasks and all, ends with it.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	r := agentResult{stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		ae.t.Fatalf("%s did not finish within its time\n%s", bin, r)
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	case err != nil:
		ae.t.Fatalf("%s: %v", bin, err)
	}
	return r
}

// mustResult is what the agent told the model the i-th call of step n
// gave; the test fails when the model never heard.
func (ae *agentEnv) mustResult(n, i int, r agentResult) string {
	ae.t.Helper()
	s, ok := ae.model.result(n, i)
	if !ok {
		ae.t.Fatalf("the model never got the result of call %d of step %d\n%s", i, n, r)
	}
	return s
}

// reviewerSawPrompt fails unless every request sandboxd's reviewer got
// carries the request the person typed, and there was one.
func (ae *agentEnv) reviewerSawPrompt(t *testing.T) {
	t.Helper()
	reqs := ae.reviewer.requests()
	if len(reqs) == 0 {
		t.Errorf("sandboxd's reviewer was never asked")
	}
	for _, b := range reqs {
		if !strings.Contains(b, ae.prompt) {
			t.Errorf("the reviewer was not shown what the person typed (%q):\n%s", ae.prompt, b)
		}
	}
}

// absent fails if p exists: what the agent must not have written.
func absent(t *testing.T, p, why string) {
	t.Helper()
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s exists: %s", p, why)
	}
}

// hasContent fails unless p holds want: what the agent must have written.
func hasContent(t *testing.T, p, want, why string) {
	t.Helper()
	if b, err := os.ReadFile(p); err != nil || string(b) != want {
		t.Errorf("%s holds %q (%v), not %q: %s", p, b, err, want, why)
	}
}

// brokenSandboxd are the ways the sandboxd an agent was wired to can be
// broken after the install: each must block the command, never run it
// bare.
func brokenSandboxd() []struct {
	name  string
	spoil func(t *testing.T, path string)
} {
	replace := func(content string, mode os.FileMode) func(*testing.T, string) {
		return func(t *testing.T, p string) {
			t.Helper()
			os.Remove(p)
			if err := os.WriteFile(p, []byte(content), mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	return []struct {
		name  string
		spoil func(t *testing.T, path string)
	}{
		{"moved away", func(t *testing.T, p string) {
			t.Helper()
			if err := os.Rename(p, p+".moved"); err != nil {
				t.Fatal(err)
			}
		}},
		{"not executable", replace("#!/bin/sh\nexit 0\n", 0o644)},
		// Not a program the kernel runs, and a binary, so that no shell
		// reads it as a script either.
		{"exec format error", replace("\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00", 0o755)},
		{"crashes", replace("#!/bin/sh\nkill -SEGV $$\n", 0o755)},
	}
}

// readJSON reads a JSON object file, or an empty object when there is none.
func readJSON(t *testing.T, p string) map[string]any {
	t.Helper()
	m := map[string]any{}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return m
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return m
}

// object is m[key] as an object, made when absent.
func object(m map[string]any, key string) map[string]any {
	o, ok := m[key].(map[string]any)
	if !ok {
		o = map[string]any{}
		m[key] = o
	}
	return o
}

// writeJSON writes v as a file of the env's identity.
func (e *env) writeJSON(p string, v any) {
	e.t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		e.t.Fatal(err)
	}
	e.writeFile(p, string(b)+"\n", 0o600)
}
