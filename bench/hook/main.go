// Command hook measures what an agent waits for before each shell
// command: sandboxd's PreToolUse hook (Codex's, which rewrites the
// command; Claude Code's, which records the request) and, for Codex
// with rules, Codex's own rule check, next to a process that does
// nothing with the same input (/bin/cat > /dev/null) and sandboxd's
// own start (sandboxd version), interleaved in one run. The transcript
// the hook reads the request from is as large as -transcript-mib.
//
//	go run ./bench/hook -n 200 [-sandboxd bin/sandboxd] [-transcript-mib 4] [-codex PATH]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/bench/internal/scratch"
	"github.com/sandboxd/sandboxd/bench/internal/stats"
)

type contender struct {
	name  string
	argv  []string
	env   []string
	stdin []byte
	took  []time.Duration
}

func main() {
	n := flag.Int("n", 200, "runs per command")
	bin := flag.String("sandboxd", "bin/sandboxd", "the sandboxd binary")
	mib := flag.Int("transcript-mib", 4, "the transcript's size, MiB")
	codex := flag.String("codex", "", "a codex binary: also time its rule check (codex execpolicy check)")
	flag.Parse()
	if err := run(*n, *bin, *mib, *codex); err != nil {
		fmt.Fprintln(os.Stderr, "hook:", err)
		os.Exit(1)
	}
}

func run(n int, bin string, mib int, codex string) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	ws, cleanup, err := scratch.Workspace()
	if err != nil {
		return err
	}
	defer cleanup()
	home := filepath.Join(ws, ".home")
	link := filepath.Join(home, ".local/state/sandboxd/bin/sandboxd-claude-code-shell")
	if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
		return err
	}
	if err := os.Symlink(bin, link); err != nil {
		return err
	}
	claudeT, codexT := filepath.Join(home, "claude.jsonl"), filepath.Join(home, "rollout.jsonl")
	if err := transcripts(claudeT, codexT, mib); err != nil {
		return err
	}
	call := func(t string) []byte {
		b, _ := json.Marshal(map[string]any{"session_id": "bench", "transcript_path": t, "cwd": ws,
			"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": map[string]any{"command": "go test ./...", "description": "test"}})
		return b
	}
	env := []string{"HOME=" + home, "CLAUDE_PROJECT_DIR=" + ws, "CLAUDE_CODE_SHELL_PREFIX=" + link}
	cs := []*contender{
		{name: "cat > /dev/null (the same input)", argv: []string{"sh", "-c", "cat > /dev/null"}, stdin: call(codexT)},
		{name: "sandboxd version", argv: []string{bin, "version"}},
		{name: "sandboxd hook codex", argv: []string{bin, "hook", "codex"}, env: env, stdin: call(codexT)},
		{name: "sandboxd hook claude-code", argv: []string{bin, "hook", "claude-code"}, env: env, stdin: call(claudeT)},
	}
	if codex != "" {
		rules := filepath.Join(home, "default.rules")
		os.WriteFile(rules, []byte(`prefix_rule(pattern=["git", "push"], decision="prompt")`+"\n"), 0o600)
		cs = append(cs, &contender{name: "codex execpolicy check (one command)", argv: []string{codex, "execpolicy", "check", "--resolve-host-executables", "--rules", rules, "--", "go", "test", "./..."}, env: env})
	}
	for i := -5; i < n; i++ {
		for _, c := range cs {
			cmd := exec.Command(c.argv[0], c.argv[1:]...)
			cmd.Env = append(os.Environ(), c.env...)
			cmd.Dir = ws
			cmd.Stdin = bytes.NewReader(c.stdin)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			t := time.Now()
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s: %v: %s", c.name, err, out.String())
			}
			if i >= 0 {
				c.took = append(c.took, time.Since(t))
			}
		}
	}
	fmt.Printf("Transcripts of %d MiB.\n\n| command | runs | median | p10 | p90 |\n|---|---|---|---|---|\n", mib)
	for _, c := range cs {
		fmt.Printf("| `%s` | %d | %s | %s | %s |\n", c.name, len(c.took), ms(stats.Median(c.took)), ms(stats.Pct(c.took, 10)), ms(stats.Pct(c.took, 90)))
	}
	return nil
}

// transcripts writes a Claude Code and a Codex transcript of about mib
// MiB each: the typed request, then tool results.
func transcripts(claude, codex string, mib int) error {
	pad := strings.Repeat("x", 16<<10)
	var c, x bytes.Buffer
	c.WriteString(`{"type":"user","message":{"role":"user","content":"run the tests"}}` + "\n")
	x.WriteString(`{"type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"run the tests"}],"internal_chat_message_metadata_passthrough":{"content_item_kinds":["user.text"],"content_item_metadata":[{"provenance":{"type":"user"}}]}}}` + "\n")
	for c.Len() < mib<<20 {
		c.WriteString(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"` + pad + `"}]},"toolUseResult":{}}` + "\n")
		x.WriteString(`{"type":"response_item","payload":{"type":"function_call_output","call_id":"c","output":"` + pad + `"}}` + "\n")
	}
	if err := os.WriteFile(claude, c.Bytes(), 0o600); err != nil {
		return err
	}
	return os.WriteFile(codex, x.Bytes(), 0o600)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
