package agenthook

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCommandQuoting: bash, given the rewritten command, runs the
// sandboxd binary with exactly run's arguments, whatever the original
// command and paths hold.
func TestCommandQuoting(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "it's sandboxd")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nfor a; do printf '%s\\0' \"$a\"; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{
		"ls", "echo 'a b' \"$HOME\" `id` $(id); x=1 && y || z", "it's", "'", "''\\'", "a\nb\n", "#!", "-c", "--", "*?[]{}~",
		"\t ünïcödé 🙂",
	} {
		r := Run{Sandboxd: bin, Agent: Codex, Session: "s 1'", Workspace: "/w/with space", IntentFile: "/s/$(x)"}
		out, err := exec.Command(bash, "-c", r.Command(cmd)).Output()
		if err != nil {
			t.Fatalf("%q: %v", cmd, err)
		}
		got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if want := append([]string{"run"}, r.Args(cmd)...); !slices.Equal(got, want) {
			t.Errorf("%q: bash gave %q, want %q", cmd, got, want)
		}
	}
	if !bytes.HasPrefix([]byte(Run{Sandboxd: "/x"}.Command("y")), []byte("exec /x run --require-isolation ")) {
		t.Error("the rewrite does not exec sandboxd run --require-isolation")
	}
}

// TestShellWords: words as a shell splits them, and nothing a shell
// would expand or treat as an operator.
func TestShellWords(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"/bin/cat mcp-arg1 'a b'", []string{"/bin/cat", "mcp-arg1", "a b"}},
		{`npx -y "@scope/pkg" a\ b x=1`, []string{"npx", "-y", "@scope/pkg", "a b", "x=1"}},
		{`'it'\''s' "q\"uote"`, []string{"it's", `q"uote`}},
		{"  a  ", []string{"a"}},
	} {
		if got, ok := ShellWords(c.in); !ok || !slices.Equal(got, c.want) {
			t.Errorf("%q: got %q, %v", c.in, got, ok)
		}
	}
	for _, in := range []string{"", " ", "a; b", "a && b", "a | b", "a > f", "$(x)", "`x`", `"$HOME"`, "a*", "~/x", "'open", `"open`, "a\nb", "(a)", "FOO=1 a"} {
		if got, ok := ShellWords(in); ok {
			t.Errorf("%q taken as %q", in, got)
		}
	}
}

// FuzzShellWords: ShellQuote's words come back whole.
func FuzzShellWords(f *testing.F) {
	f.Add("a", "b c", "it's")
	f.Add("A=", "0", "0") // NAME=value first must be quoted
	f.Add("0", "0", "=")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		in := []string{a, b, c}
		var q []string
		for _, w := range in {
			q = append(q, ShellQuote(w))
		}
		got, ok := ShellWords(strings.Join(q, " "))
		if strings.ContainsAny(a+b+c, "\n") || a == "" || b == "" || c == "" {
			return
		}
		if !ok || !slices.Equal(got, in) {
			t.Fatalf("%q: got %q, %v", in, got, ok)
		}
	})
}
