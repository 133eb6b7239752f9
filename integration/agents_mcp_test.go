package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mcpBash is a call of sandboxd's bash tool through Claude Code's MCP
// client, under the name Claude Code gives a server's tool.
func mcpBash(command, intent string) toolCall {
	return toolCall{name: "mcp__sandboxd__bash", input: map[string]any{"command": command, "intent": intent}}
}

// TestClaudeCodeMCPClient: the real Claude Code, headless, with
// `sandboxd mcp` as an MCP server, from --mcp-config or added the way
// the README says (claude mcp add --scope user), with and without
// sandboxd's hook installed. The model's call of the bash tool runs in the sandbox
// (SANDBOXD=1 inside; a write outside the workspace absent, refused by
// sandboxd's reviewer, who was shown the call's intent as the agent's
// account), its result reaches the model, and a write in the workspace
// lands.
func TestClaudeCodeMCPClient(t *testing.T) {
	t.Parallel()
	for _, way := range []string{"mcp-config", "mcp-add", "mcp-add-hooked", "mcp-config-hooked"} {
		t.Run(way, func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) { claudeMCP(t, e, way) })
		})
	}
}

// claudeMCP is one run of TestClaudeCodeMCPClient.
func claudeMCP(t *testing.T, e *env, way string) {
	added := strings.HasPrefix(way, "mcp-add")
	outside := filepath.Join(e.mkdir("outside", 0o755), "evil.txt")
	inside := "landed-" + randHex(4)
	intent := "stated purpose " + randHex(4)
	ae := newAgentEnv(t, e, claudeCode(),
		calls(mcpBash("echo sandboxed=$SANDBOXD in $PWD; echo evil > "+outside, intent)),
		calls(mcpBash("echo "+inside+" > in.txt", "")),
	)
	ae.writeJSON(ae.claudeSettings(), map[string]any{"permissions": map[string]any{"allow": []string{"mcp__sandboxd__bash"}}})
	ae.writeJSON(filepath.Join(e.home, ".claude.json"), map[string]any{
		"projects": map[string]any{e.ws: map[string]any{"hasTrustDialogAccepted": true}}})
	args := []string{"-p", ae.prompt, "--output-format", "json"}
	if strings.HasSuffix(way, "-hooked") {
		ae.install()
	}
	if added {
		if r := ae.command(ae.bin, nil, "mcp", "add", "--scope", "user", "sandboxd", "--", ae.sandboxd, "mcp"); r.code != 0 {
			t.Fatalf("claude mcp add: %s", r)
		}
	} else {
		config := filepath.Join(e.dir, "mcp.json")
		ae.writeJSON(config, map[string]any{"mcpServers": map[string]any{
			"sandboxd": map[string]any{"type": "stdio", "command": ae.sandboxd, "args": []string{"mcp"}}}})
		args = append(args, "--mcp-config", config, "--strict-mcp-config")
	}
	mode := "default"
	if !ae.id.root() {
		mode = "bypassPermissions"
	}
	r := ae.run([]string{
		"ANTHROPIC_BASE_URL=" + ae.model.url,
		"ANTHROPIC_API_KEY=sk-ant-e2e-" + randHex(4),
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}, append(args, "--permission-mode", mode)...)

	got := ae.mustResult(0, 0, r)
	absent(t, outside, "the MCP call's write outside the workspace ran")
	if way == "mcp-config-hooked" {
		// With the hook installed, a server not of the person's own
		// settings starts through the prefix, in the sandbox, where
		// sandboxd mcp does not come up: the tool is missing, and
		// nothing runs bare.
		if !strings.Contains(got, "No such tool available") {
			t.Errorf("the tool answered from inside the sandbox: %q", got)
		}
		absent(t, filepath.Join(e.ws, "in.txt"), "the workspace write ran without the tool")
		return
	}
	if !strings.Contains(got, "sandboxed=1 in "+e.ws+"\n") {
		t.Errorf("the command did not run under sandboxd: %q\n%s", got, r)
	}
	if !strings.Contains(got, "sandboxd: denied") || !strings.Contains(got, reviewerWhy) {
		t.Errorf("the model was not told sandboxd's reviewer refused the write: %q", got)
	}
	reviewed := strings.Join(ae.reviewer.requests(), "\n")
	if !strings.Contains(reviewed, `\"agent_stated_purpose\": \"`+intent) || strings.Contains(reviewed, `\"user_request\": \"`+intent) {
		t.Errorf("the reviewer was not shown the intent as the agent's account:\n%s", reviewed)
	}
	ae.mustResult(1, 0, r)
	hasContent(t, filepath.Join(e.ws, "in.txt"), inside+"\n", "the workspace write did not land")
}

// TestCodexMCPClient: the real Codex, headless, with sandboxd mcp as an
// MCP server of its config.toml ([mcp_servers], its tools approved as
// the README says) and no hook installed. Codex defers MCP tools behind
// tool_search, as a model finds them: its search lists sandboxd's bash
// in the mcp__sandboxd namespace; the model's call of it runs in the
// sandbox, a write outside the workspace is absent and refused, and the
// result reaches the model.
func TestCodexMCPClient(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		outside := filepath.Join(e.mkdir("outside", 0o755), "evil.txt")
		search := calls(toolCall{name: "tool_search", input: map[string]any{"query": "sandboxd bash", "limit": 8}})
		first := func(body string) []toolCall {
			if !strings.Contains(body, `"name":"mcp__sandboxd"`) {
				return nil // the search did not find it: the run ends
			}
			return []toolCall{{namespace: "mcp__sandboxd", name: "bash", input: map[string]any{
				"command": "echo sandboxed=$SANDBOXD in $PWD; echo evil > " + outside, "intent": "probe"}}}
		}
		ae := newAgentEnv(t, e, codex(), search, first)
		ae.codexSetup("")
		cfg := filepath.Join(ae.codexHome(), "config.toml")
		b, _ := os.ReadFile(cfg)
		ae.writeFile(cfg, string(b)+fmt.Sprintf("\n[mcp_servers.sandboxd]\ncommand = %q\nargs = [\"mcp\"]\ndefault_tools_approval_mode = \"approve\"\n", ae.sandboxd), 0o600)
		r := ae.codex()
		got, ok := ae.model.result(1, 0)
		if !ok {
			reqs := ae.model.requests()
			t.Fatalf("the bash tool was not found or not called; the last request:\n%s\n%s", reqs[len(reqs)-1], r)
		}
		// Codex shows the model the structured content, as JSON.
		if !strings.Contains(got, `"stdout":"sandboxed=1 in `+e.ws+`\n"`) || !strings.Contains(got, "sandboxd: denied") {
			t.Errorf("the call did not run under sandboxd, or its denial did not reach the model: %q", got)
		}
		absent(t, outside, "the MCP call's write outside the workspace ran")
	})
}
