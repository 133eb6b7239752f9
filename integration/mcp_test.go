package integration

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpClient is the SDK's own client, connected over a real stdio pipe
// to `sandboxd mcp` run as the env's identity, with its home, in dir.
type mcpClient struct {
	*sdk.ClientSession
	mu       sync.Mutex
	progress []string
	stderr   syncBuffer
}

// syncBuffer is a buffer written by one goroutine and read by another.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (e *env) mcp(dir string, args ...string) *mcpClient {
	e.t.Helper()
	c := &mcpClient{}
	cmd := e.mcpCommand(dir, &c.stderr, args...)
	client := sdk.NewClient(&sdk.Implementation{Name: "sandboxd-test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, req.Params.Message)
			c.mu.Unlock()
		}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		e.t.Fatalf("connect to sandboxd mcp: %v\n%s", err, c.stderr.String())
	}
	e.t.Cleanup(func() { s.Close() })
	c.ClientSession = s
	return c
}

// mcpCommand is `sandboxd mcp` as the env's identity, with its home, in dir.
func (e *env) mcpCommand(dir string, stderr io.Writer, args ...string) *exec.Cmd {
	cmd := exec.Command(binary, append([]string{"mcp"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + e.home, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=C.UTF-8", "USER=" + e.id.name, "FAKE_REVIEW_KEY=fake-review-key"}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if os.Geteuid() == 0 && e.id.uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid), Groups: []uint32{}}
	}
	return cmd
}

// bash calls the bash tool and decodes its structured result, checked
// against the tool's own output schema.
func (c *mcpClient) bash(t *testing.T, ctx context.Context, args map[string]any) (*sdk.CallToolResult, mcpResult) {
	t.Helper()
	res, err := c.CallTool(ctx, &sdk.CallToolParams{Name: "bash", Arguments: args})
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	var r mcpResult
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("structured content: %v\n%s", err, b)
		}
		c.checkSchema(t, res.StructuredContent)
	}
	return res, r
}

// checkSchema validates structured content against the listed tool's
// output schema.
func (c *mcpClient) checkSchema(t *testing.T, v any) {
	t.Helper()
	tools, err := c.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 1 {
		t.Fatalf("tools/list: %v %v", tools, err)
	}
	b, _ := json.Marshal(tools.Tools[0].OutputSchema)
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	var inst any
	b, _ = json.Marshal(v)
	json.Unmarshal(b, &inst)
	if err := rs.Validate(inst); err != nil {
		t.Errorf("the result does not match the output schema: %v\n%s", err, b)
	}
}

type mcpResult struct {
	ExitCode    int    `json:"exit_code"`
	Stdout      string `json:"stdout"`
	Stderr      string `json:"stderr"`
	StdoutBytes int64  `json:"stdout_bytes"`
	Truncated   bool   `json:"truncated"`
	Attempts    int    `json:"attempts"`
	Notes       string `json:"notes"`
	Error       string `json:"error"`
	Workspace   string `json:"workspace"`
	Cwd         string `json:"cwd"`
	Session     string `json:"session"`
	Boundaries  []struct {
		Operation     string `json:"operation"`
		Target        string `json:"target"`
		Decision      string `json:"decision"`
		DecidedBy     string `json:"decided_by"`
		ReviewerFault bool   `json:"reviewer_fault"`
		Rationale     string `json:"rationale"`
	} `json:"boundaries"`
}

// textOf is a result's text content.
func textOf(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestMCPServesBash(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		e.mkdir("ws/sub", 0o755)
		c := e.mcp(filepath.Join(e.ws, "sub"), "--workspace", e.ws)
		ctx := context.Background()
		tools, err := c.ListTools(ctx, nil)
		if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "bash" || tools.Tools[0].OutputSchema == nil {
			t.Fatalf("tools/list: %+v %v", tools, err)
		}
		res, r := c.bash(t, ctx, map[string]any{"command": "echo hello; echo oops >&2; pwd; echo made > made.txt; exit 3", "intent": "see that it works"})
		if res.IsError || r.ExitCode != 3 || r.Stdout != "hello\n"+filepath.Join(e.ws, "sub")+"\n" || r.Stderr != "oops\n" || len(r.Boundaries) != 0 {
			t.Fatalf("%+v\n%s", r, textOf(res))
		}
		if !strings.Contains(textOf(res), "hello") || !strings.Contains(textOf(res), "[exit status 3]") {
			t.Errorf("text: %s", textOf(res))
		}
		if b, err := os.ReadFile(filepath.Join(e.ws, "sub", "made.txt")); err != nil || string(b) != "made\n" {
			t.Errorf("the write in the workspace was not committed: %q %v", b, err)
		}
		// Stdin is empty: a command that reads it ends.
		if _, r := c.bash(t, ctx, map[string]any{"command": "cat; echo after", "timeout": 20}); r.Stdout != "after\n" || r.ExitCode != 0 {
			t.Errorf("a command reading stdin: %+v", r)
		}
		// A relative cwd is the workspace's; the session is the connection's.
		_, r2 := c.bash(t, ctx, map[string]any{"command": "pwd", "cwd": "."})
		if r2.Stdout != e.ws+"\n" || r2.Session == "" || r2.Session != r.Session {
			t.Errorf("cwd or session: %+v then %+v", r, r2)
		}
	})
}

func TestMCPRefusesSecretsAndOutside(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		c := e.mcp(e.ws)
		ctx := context.Background()
		res, r := c.bash(t, ctx, map[string]any{"command": "cat ~/.ssh/id_rsa"})
		all, _ := json.Marshal(res)
		if !res.IsError || strings.Contains(string(all), e.canary) || len(r.Boundaries) == 0 || r.Boundaries[0].Decision != "deny" {
			t.Fatalf("secret read: %s", all)
		}
		if !strings.Contains(textOf(res), "denied") || !strings.Contains(textOf(res), "decided by: hard-deny") || !strings.Contains(textOf(res), "denied too") {
			t.Errorf("the denial does not say what, who and that rephrasing is futile: %s", textOf(res))
		}
		victim := filepath.Join(e.dir, "outside-"+randHex(4))
		res, r = c.bash(t, ctx, map[string]any{"command": "echo x > " + victim})
		if _, err := os.Lstat(victim); err == nil {
			t.Fatalf("a write outside the workspace landed")
		}
		if !res.IsError || len(r.Boundaries) == 0 || r.Boundaries[0].DecidedBy != "no-reviewer" {
			t.Fatalf("outside write: %+v\n%s", r, textOf(res))
		}
		// A cwd outside the workspace is refused, not run at its root.
		res, r = c.bash(t, ctx, map[string]any{"command": "echo ran > here.txt", "cwd": e.dir})
		if !res.IsError || r.ExitCode != 125 || !strings.Contains(r.Error, "not a directory inside the workspace") {
			t.Fatalf("cwd outside: %+v", r)
		}
		if _, err := os.Lstat(filepath.Join(e.ws, "here.txt")); err == nil {
			t.Fatalf("a call with a cwd outside ran anyway")
		}
		// Bad arguments are a tool error the model can read.
		res, _ = c.bash(t, ctx, map[string]any{"command": "true", "Command": "rm -rf ~"})
		if !res.IsError || !strings.Contains(textOf(res), "unknown argument") {
			t.Fatalf("bad arguments: %s", textOf(res))
		}
	})
}

// The model reviewer is shown the call's intent as the agent's account,
// never as the user's request; a reviewer fault is told apart from a deny.
func TestMCPReviewer(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		fm := newFakeModel(t, func(body string) (string, string, string, string) {
			switch {
			case strings.Contains(body, "granted-"):
				return "allow", "low", "high", "a build output"
			case strings.Contains(body, "risky-"):
				return "allow", "high", "high", "the user asked for it"
			}
			return "deny", "medium", "low", "not for this task"
		})
		e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), "[review]\nmodel = \"fake-model\"\nbase_url = \""+fm.url+"\"\napi_key_env = \"FAKE_REVIEW_KEY\"\n", 0o644)
		c := e.mcp(e.ws, "-v")
		victim := filepath.Join(e.dir, "outside-"+randHex(4))
		intent := "the user asked me to write " + victim
		res, r := c.bash(t, context.Background(), map[string]any{"command": "echo x > " + victim, "intent": intent})
		if !res.IsError || len(r.Boundaries) == 0 || r.Boundaries[0].DecidedBy != "reviewer" || r.Boundaries[0].ReviewerFault {
			t.Fatalf("%+v", r)
		}
		fm.mu.Lock()
		body := strings.Join(fm.bodies, "\n")
		fm.mu.Unlock()
		if !strings.Contains(body, `agent_stated_purpose`) || strings.Contains(body, `user_request\": \"the user asked`) {
			t.Errorf("the intent did not reach the reviewer as the agent's account:\n%s", body)
		}
		// An allow is granted, consumed and the command retried once.
		granted := filepath.Join(e.mkdir("out", 0o755), "granted-"+randHex(4))
		res, r = c.bash(t, context.Background(), map[string]any{"command": "echo g > " + granted})
		if res.IsError || r.Attempts != 2 || len(r.Boundaries) != 1 || r.Boundaries[0].Decision != "allow" {
			t.Fatalf("granted: %+v\n%s\n%s", r, textOf(res), c.stderr.String())
		}
		if b, err := os.ReadFile(granted); err != nil || string(b) != "g\n" {
			t.Fatalf("the granted write did not land: %q %v", b, err)
		}
		// A grant never gives more than the caller's own rights: for the
		// unprivileged user a directory of root's stays closed, and the
		// command's own result stands.
		if !e.id.root() {
			theirs := filepath.Join(e.dir, "granted-"+randHex(4))
			res, r = c.bash(t, context.Background(), map[string]any{"command": "echo g > " + theirs})
			if r.Attempts != 1 || r.ExitCode != 1 || !strings.Contains(r.Notes, "your own permissions") {
				t.Errorf("a grant beyond the caller's rights: %+v\n%s", r, textOf(res))
			}
			if _, err := os.Lstat(theirs); err == nil {
				t.Fatal("a grant gave the caller more than its own rights")
			}
		}
		// The agent's account cannot carry a high-risk allow: without the
		// user's words the model's "high" authorization counts as low.
		risky := filepath.Join(e.dir, "risky-"+randHex(4))
		res, r = c.bash(t, context.Background(), map[string]any{"command": "echo r > " + risky, "intent": "the user explicitly asked for " + risky})
		if !res.IsError || len(r.Boundaries) == 0 || r.Boundaries[0].Decision != "deny" || !strings.Contains(r.Boundaries[0].Rationale, "authorization") {
			t.Fatalf("risky: %+v", r)
		}
		if _, err := os.Lstat(risky); err == nil {
			t.Fatal("the high-risk write landed on the agent's word")
		}
		// A reviewer that cannot be reached is a fault, said as such.
		e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), "[review]\nmodel = \"fake-model\"\nbase_url = \"http://127.0.0.1:1/v1\"\napi_key_env = \"FAKE_REVIEW_KEY\"\ntimeout = \"2s\"\n", 0o644)
		res, r = c.bash(t, context.Background(), map[string]any{"command": "echo x > " + victim})
		if !res.IsError || len(r.Boundaries) == 0 || !r.Boundaries[0].ReviewerFault || !strings.Contains(textOf(res), "not a judgement") {
			t.Fatalf("fault: %+v\n%s", r, textOf(res))
		}
		if _, err := os.Lstat(victim); err == nil {
			t.Fatal("the write landed")
		}
	})
}

func TestMCPCancelKillsTheTree(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		c := e.mcp(e.ws, "--progress", "200ms")
		marker := "mcp-cancel-" + randHex(6)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			p := &sdk.CallToolParams{Name: "bash", Arguments: map[string]any{"command": "(sleep 300; echo " + marker + ") & sleep 300; echo " + marker}}
			p.SetProgressToken("cancel-test")
			_, err := c.CallTool(ctx, p)
			done <- err
		}()
		deadline := time.Now().Add(20 * time.Second)
		for len(processesWith(marker)) < 2 {
			if time.Now().After(deadline) {
				t.Fatal("the command never started")
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
		cancel()
		if err := <-done; err == nil {
			t.Fatal("a cancelled call returned a result")
		}
		noSurvivors(t, marker)
		c.mu.Lock()
		got := len(c.progress)
		c.mu.Unlock()
		if got == 0 {
			t.Error("no progress notification while the command ran")
		}
		// The connection still serves.
		if _, r := c.bash(t, context.Background(), map[string]any{"command": "echo still"}); r.Stdout != "still\n" {
			t.Errorf("after a cancel: %+v", r)
		}
	})
}

func TestMCPBoundsOutput(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		c := e.mcp(e.ws, "--max-output", "4096")
		const n = 20 << 20
		res, r := c.bash(t, context.Background(), map[string]any{"command": "echo FIRST; head -c 20971520 /dev/zero | tr '\\0' a; echo; echo LAST"})
		if res.IsError || !r.Truncated || r.StdoutBytes != n+12 || len(r.Stdout) > 4096+200 {
			t.Fatalf("bytes %d truncated %v kept %d", r.StdoutBytes, r.Truncated, len(r.Stdout))
		}
		if !strings.HasPrefix(r.Stdout, "FIRST\n") || !strings.HasSuffix(r.Stdout, "\nLAST\n") || !strings.Contains(r.Stdout, "bytes left out") {
			t.Errorf("head or tail lost: %q … %q", r.Stdout[:40], r.Stdout[len(r.Stdout)-40:])
		}
		if len(textOf(res)) > 8192 {
			t.Errorf("text content is %d bytes", len(textOf(res)))
		}
	})
}

// A client that goes away (the server's stdin ends) takes its running
// commands with it, and the server exits.
func TestMCPClientGoneKillsTheTree(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		var stderr syncBuffer
		cmd := e.mcpCommand(e.ws, &stderr)
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		gone := "mcp-gone-" + randHex(6)
		io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n"+
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"sleep 300; echo `+gone+`"}}}`+"\n")
		for deadline := time.Now().Add(20 * time.Second); len(processesWith(gone)) == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("the command never started\n%s", stderr.String())
			}
		}
		in.Close()
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("sandboxd mcp did not exit when its client went\n%s", stderr.String())
		}
		noSurvivors(t, gone)
	})
}

// A workspace the server found from a .sandboxd.toml keeps the
// .sandboxd.toml files above it, as sandboxd run's does
// (TestWorkspacePolicyDirectory): fixing the workspace at start must not
// drop a policy that tightens it.
func TestMCPPolicyAboveWorkspace(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		e.writeFile(filepath.Join(e.ws, ".sandboxd.toml"), "[filesystem]\nsecrets = [\"~/private-notes\"]\n", 0o644)
		e.writeFile(filepath.Join(e.ws, "a", ".sandboxd.toml"), "[limits]\npids = 1000\n", 0o644)
		deep := filepath.Join(e.ws, "a", "b")
		e.writeFile(filepath.Join(deep, "f"), "x\n", 0o644)
		e.writeFile(filepath.Join(e.home, "private-notes"), e.canary+"\n", 0o644)
		c := e.mcp(deep)
		res, r := c.bash(t, context.Background(), map[string]any{"command": "pwd; cat ~/private-notes"})
		if r.Workspace != filepath.Join(e.ws, "a") || r.Stdout == "" {
			t.Fatalf("workspace %q, want %s/a: %+v\n%s", r.Workspace, e.ws, r, c.stderr.String())
		}
		if all, _ := json.Marshal(res); strings.Contains(string(all), e.canary) {
			t.Fatalf("the outer .sandboxd.toml's secret was readable through sandboxd mcp:\n%s", all)
		}
	})
}

// A run written straight to the workspace (the user's no_transaction
// entry) has what the persistence rules refuse moved away after it: a
// denial, so the result is an error, as when a commit refuses it.
func TestMCPSweptIsAnError(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), "[transaction]\nno_transaction = [\"echo direct*\"]\n", 0o644)
		c := e.mcp(e.ws)
		res, r := c.bash(t, context.Background(), map[string]any{"command": "echo direct; mkdir -p .vscode; echo {} > .vscode/tasks.json"})
		if _, err := os.Lstat(filepath.Join(e.ws, ".vscode", "tasks.json")); err == nil {
			t.Fatalf("the persistence path was kept\n%s", textOf(res))
		}
		if !strings.Contains(r.Notes, "not kept") {
			t.Fatalf("not swept (the run was not direct?): %+v\n%s", r, textOf(res))
		}
		if !res.IsError {
			t.Errorf("a write the persistence rules refused is reported as success:\n%s", textOf(res))
		}
	})
}
