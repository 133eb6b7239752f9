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
