package agentinstall

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/adapters/agenthook"
)

// TestCodexTrustHash pins the hash against values the real codex 0.171
// reported (app-server hooks/list currentHash): probe2/CODEX-ANSWERS.md
// §10, and a command with every character serde_json escapes or not.
func TestCodexTrustHash(t *testing.T) {
	bash := "Bash"
	for _, c := range []struct {
		cmd     string
		timeout int64
		want    string
	}{
		{"/bin/true a", 100000, "sha256:181aa24f5fb5a471366c38316a5175ab24733a0a9174c20e891423c8c3fa411d"},
		{"/bin/true a <&> é", 600, "sha256:22c09d5cfb3015696e9a55f9691baf4526d5171d6e8e8d016642e48244076f83"},
		{"/bin/true \t\n\x01\x1f\x7f\u2028\b\f\r\"\\ <>&", 600, "sha256:87e3b69e87426665e7bff7495188cb085184b2d263fe40c9bb7ffb7327e6db4c"},
	} {
		if got := codexTrustHash(&bash, codexHandler{Command: c.cmd, Timeout: c.timeout}); got != c.want {
			t.Errorf("%q: %s, want %s", c.cmd, got, c.want)
		}
	}
	// Codex reads a timeout under 1 as 1.
	if codexTrustHash(&bash, codexHandler{Command: "x", Timeout: 0}) != codexTrustHash(&bash, codexHandler{Command: "x", Timeout: 1}) {
		t.Error("timeout 0 is not hashed as 1")
	}
}

// statusEnv installs both agents under a new root, with a sandboxd that
// is an executable file there.
func statusEnv(t *testing.T) Env {
	t.Helper()
	root := t.TempDir()
	e := testEnv(root)
	e.Sandboxd = filepath.Join(root, "bin", "sandboxd")
	writeTestFile(t, e.Sandboxd, []byte("#!/bin/sh\n"))
	os.Chmod(e.Sandboxd, 0o755)
	for _, a := range Agents {
		if _, err := Install(a, e, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func failed(checks []Check) []string {
	var out []string
	for _, c := range checks {
		if !c.OK {
			out = append(out, c.Piece+": "+c.Detail)
		}
	}
	return out
}

func TestStatus(t *testing.T) {
	e := statusEnv(t)
	for _, a := range Agents {
		checks, err := Status(a, e)
		if err != nil {
			t.Fatal(err)
		}
		if f := failed(checks); len(f) > 0 || len(checks) < 5 {
			t.Fatalf("%s after install: %d checks, failed %q", a, len(checks), f)
		}
	}
	for _, c := range []struct {
		name, agent, file, old, new string
		want                        string
	}{
		{"sandbox mode", agenthook.Codex, "config.toml", `sandbox_mode = "danger-full-access"`, `sandbox_mode = "workspace-write"`, "sandbox_mode:"},
		{"login shell", agenthook.Codex, "config.toml", `allow_login_shell = false`, `allow_login_shell = true`, "allow_login_shell:"},
		{"hook changed", agenthook.Codex, "hooks.json", `"timeout": 600`, `"timeout": 60`, "trust Bash:"},
		{"hooks off", agenthook.Codex, "config.toml", `[hooks.state.`, "[features]\nhooks = false\n\n[hooks.state.", "features.hooks:"},
		{"hook disabled", agenthook.Codex, "config.toml", `pre_tool_use:1:0"]`, `pre_tool_use:1:0"]` + "\nenabled = false", "trust apply_patch:"},
		{"no onFailure", agenthook.ClaudeCode, "settings.json", `"onFailure": "block"`, `"onFailure": "ignore"`, "hook:"},
		{"all hooks off", agenthook.ClaudeCode, "settings.json", `"env": {`, `"disableAllHooks": true, "env": {`, "hook:"},
		{"rule gone", agenthook.ClaudeCode, "settings.json", `sandboxd/**)",`, `sandboxd/x)",`, "deny rules:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := statusEnv(t)
			dir := e.CodexHome
			if c.agent == agenthook.ClaudeCode {
				dir = e.ClaudeDir
			}
			path := filepath.Join(dir, c.file)
			b, _ := os.ReadFile(path)
			if !strings.Contains(string(b), c.old) {
				t.Fatalf("%s has no %q:\n%s", path, c.old, b)
			}
			os.WriteFile(path, []byte(strings.Replace(string(b), c.old, c.new, 1)), 0o600)
			checks, _ := Status(c.agent, e)
			f := failed(checks)
			if len(f) != 1 || !strings.HasPrefix(f[0], c.want) {
				t.Errorf("failed checks %q, want one %q", f, c.want)
			}
		})
	}
}

// TestStatusBinary: a sandboxd that moved away, or a prefix link that
// leads elsewhere, fails its check.
func TestStatusBinary(t *testing.T) {
	e := statusEnv(t)
	os.Rename(e.Sandboxd, e.Sandboxd+".old")
	for _, a := range Agents {
		checks, _ := Status(a, e)
		f := failed(checks)
		want := 1
		if a == agenthook.ClaudeCode {
			want = 2 // the binary and the link that leads to it
		}
		if len(f) != want || !strings.HasPrefix(f[0], "sandboxd:") {
			t.Errorf("%s: failed %q", a, f)
		}
	}
	// Nothing installed: every piece is missing, none passes by accident.
	e2 := testEnv(t.TempDir())
	checks, _ := Status(agenthook.Codex, e2)
	if f := failed(checks); len(f) < 2 {
		t.Errorf("nothing installed, but only %q failed", f)
	}
}

// TestStatusEnvPrefix: a prefix in the environment is named, not a
// failure: Claude Code's settings win over it.
func TestStatusEnvPrefix(t *testing.T) {
	e := statusEnv(t)
	e.ShellPrefixEnv = "/usr/bin/other"
	checks, _ := Status(agenthook.ClaudeCode, e)
	for _, c := range checks {
		if c.Piece == "shell prefix" && (!c.OK || !strings.Contains(c.Detail, "/usr/bin/other")) {
			t.Errorf("%+v", c)
		}
	}
}
