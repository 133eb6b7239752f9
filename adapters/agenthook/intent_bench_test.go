package agenthook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkIntent: the request read from the end of a 4 MiB transcript
// of tool results, as a long turn leaves it.
func BenchmarkIntent(b *testing.B) {
	path := filepath.Join(b.TempDir(), "t.jsonl")
	var sb strings.Builder
	sb.WriteString(typedClaude("run the tests") + "\n")
	pad := `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","content":"` + strings.Repeat("x", 16<<10) + `"}]},"toolUseResult":{}}` + "\n"
	for sb.Len() < 4<<20 {
		sb.WriteString(pad)
	}
	os.WriteFile(path, []byte(sb.String()), 0o600)
	for b.Loop() {
		if got, err := Intent(ClaudeCode, path, os.Getuid()); got != "run the tests" || err != nil {
			b.Fatal(got, err)
		}
	}
}
