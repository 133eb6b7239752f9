package agentinstall

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/adapters/agenthook"
)

// codexForTest is the real codex binary: $SANDBOXD_TEST_CODEX (CI sets
// it), else where this machine's probe installed it.
func codexForTest(t *testing.T) string {
	t.Helper()
	c := os.Getenv("SANDBOXD_TEST_CODEX")
	if c == "" {
		c = "/var/lib/agents/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
	}
	if fi, err := os.Stat(c); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Skipf("no codex binary to check the trust hashes against (set SANDBOXD_TEST_CODEX): %s", c)
	}
	return c
}

// listedHook is one entry of app-server's hooks/list.
type listedHook struct {
	Key         string `json:"key"`
	Command     string `json:"command"`
	Matcher     string `json:"matcher"`
	Source      string `json:"source"`
	TrustStatus string `json:"trustStatus"`
}

// codexHooks asks the real codex which hooks it sees for a session in
// cwd and whether it trusts each (probe2/CODEX-ANSWERS.md §10).
func codexHooks(t *testing.T, codex, home, codexHome, cwd string) []listedHook {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, codex, "app-server")
	cmd.Dir = cwd
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "CODEX_HOME=" + codexHome}
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	r := bufio.NewReader(out)
	send := func(s string) { io.WriteString(in, s+"\n") }
	send(`{"id":1,"method":"initialize","params":{"clientInfo":{"name":"sandboxd-test","version":"0"}}}`)
	await(t, r, 1)
	send(`{"method":"initialized"}`)
	b, _ := json.Marshal(map[string]any{"id": 2, "method": "hooks/list", "params": map[string]any{"cwds": []string{cwd}}})
	send(string(b))
	var res struct {
		Result struct {
			Data []struct {
				Hooks  []listedHook `json:"hooks"`
				Errors []any        `json:"errors"`
			} `json:"data"`
		} `json:"result"`
	}
	if err := json.Unmarshal(await(t, r, 2), &res); err != nil || len(res.Result.Data) != 1 {
		t.Fatalf("hooks/list: %v", err)
	}
	if errs := res.Result.Data[0].Errors; len(errs) > 0 {
		t.Fatalf("codex reports errors in the hooks: %v", errs)
	}
	return res.Result.Data[0].Hooks
}

// await reads lines until the reply with id (notifications come
// between).
func await(t *testing.T, r *bufio.Reader, id int) []byte {
	t.Helper()
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("codex app-server ended before reply %d: %v", id, err)
		}
		var m struct {
			ID *int `json:"id"`
		}
		if json.Unmarshal(line, &m) == nil && m.ID != nil && *m.ID == id {
			return line
		}
	}
}

// TestCodexTrustsWhatInstallWrites: the real codex, asked which hooks it
// runs, reports sandboxd's as trusted after install (and after an
// install from a moved sandboxd), under a CODEX_HOME reached through a
// link and with a sandboxd path of characters a hash must escape; the
// user's own hook stays as it was; after uninstall sandboxd's are gone.
func TestCodexTrustsWhatInstallWrites(t *testing.T) {
	codex := codexForTest(t)
	root := t.TempDir()
	e := testEnv(root)
	real := filepath.Join(root, "codex-home")
	writeTestFile(t, filepath.Join(real, "hooks.json"), []byte(`{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"/bin/true mine"}]}]}}`))
	writeTestFile(t, filepath.Join(real, "config.toml"), []byte("check_for_update_on_startup = false\n"))
	os.MkdirAll(e.Home, 0o700)
	if err := os.Symlink(real, e.CodexHome); err != nil {
		t.Fatal(err)
	}
	proj := filepath.Join(root, "proj")
	os.MkdirAll(proj, 0o700)
	for _, sb := range []string{filepath.Join(root, "dir with space & <é>", "it's", "sandboxd"), "/usr/local/bin/sandboxd"} {
		e.Sandboxd = sb
		if _, err := Install(agenthook.Codex, e, Options{}); err != nil {
			t.Fatal(err)
		}
		ours := 0
		for _, h := range codexHooks(t, codex, e.Home, e.CodexHome, proj) {
			switch h.Command {
			case agenthook.CodexHookCommand(sb):
				ours++
				if h.TrustStatus != "trusted" {
					t.Errorf("codex sees sandboxd's %s hook (%s) as %q", h.Matcher, h.Key, h.TrustStatus)
				}
			case "/bin/true mine":
				if h.TrustStatus != "untrusted" {
					t.Errorf("the user's hook became %q", h.TrustStatus)
				}
			default:
				t.Errorf("a hook nobody wrote: %+v", h)
			}
		}
		if ours != len(codexMatchers) {
			t.Errorf("codex lists %d of sandboxd's hooks, want %d", ours, len(codexMatchers))
		}
		checks, _ := Status(agenthook.Codex, e)
		for _, c := range checks {
			if !c.OK && c.Piece != "sandboxd" { // the test's sandboxd is no file
				t.Errorf("status: %+v", c)
			}
		}
	}
	if _, err := Uninstall(agenthook.Codex, e, Options{}); err != nil {
		t.Fatal(err)
	}
	if hooks := codexHooks(t, codex, e.Home, e.CodexHome, proj); len(hooks) != 1 || hooks[0].Command != "/bin/true mine" {
		t.Errorf("after uninstall codex lists %+v", hooks)
	}
}
