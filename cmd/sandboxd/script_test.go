package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/sandboxd/sandboxd/adapters/agenthook"
)

// statusEnv names the file the test's sandboxd writes its exit status
// to, for the scripts' `status N`. testscript itself only tells zero from
// non-zero.
const statusEnv = "SANDBOXD_TEST_STATUS"

// TestMain makes this test binary the `sandboxd` of the scripts: the
// scripts exec it under that name, and the sandbox re-execs it as its
// helper (as /proc/self/exe with argv[0] "sandboxd"), which start
// dispatches first. Doctor's namespace probe is re-exec'd with another
// argv[0] and is not reachable from a script.
func TestMain(m *testing.M) {
	main := func() {
		code := start(os.Args)
		if f := os.Getenv(statusEnv); f != "" {
			os.WriteFile(f, []byte(strconv.Itoa(code)), 0o600)
		}
		os.Exit(code)
	}
	// sandboxd-claude-code-shell: sandboxd by the name of Claude Code's
	// shell prefix.
	testscript.Main(m, map[string]func(){"sandboxd": main, agenthook.ClaudeShellName: main})
}

// TestScript pins the CLI's behaviour (exit statuses, stderr lines, the
// report's keys) in testdata/script/*.txtar. Each script gets $HOME and
// $WS (its workspace, also the starting directory) outside /tmp and
// /var/tmp, which the sandbox replaces with private ones: a workspace
// there would not be the one the command sees.
func TestScript(t *testing.T) {
	root, err := scriptRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		WorkdirRoot:         root,
		RequireExplicitExec: true,
		Setup: func(e *testscript.Env) error {
			// The command runs as another uid when root runs sandboxd: it
			// must be able to reach the workspace and the script's files.
			if err := os.Chmod(e.WorkDir, 0o755); err != nil {
				return err
			}
			home, ws := filepath.Join(e.WorkDir, "home"), filepath.Join(e.WorkDir, "ws")
			if err := os.Mkdir(home, 0o700); err != nil {
				return err
			}
			if err := os.Mkdir(ws, 0o755); err != nil {
				return err
			}
			e.Setenv("HOME", home)
			e.Setenv("WS", ws)
			e.Setenv(statusEnv, filepath.Join(e.WorkDir, ".status"))
			e.Cd = ws
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"status":     cmdStatus,
			"reportkeys": cmdReportKeys,
		},
	})
}

// scriptRoot makes the directory every script's $WORK lives in, the way
// the integration tests choose theirs: not under /tmp or /var/tmp, and
// searchable by the uid a root caller's command runs as.
func scriptRoot() (string, error) {
	base := "/var/lib/sandboxd-script"
	if os.Geteuid() != 0 {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(cache, "sandboxd-script")
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	os.Chmod(base, 0o755)
	dir, err := os.MkdirTemp(base, "run-")
	if err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o755)
}

// cmdStatus is `status N`: the last sandboxd exited with status N. Each
// status is read once, so a stale one never passes.
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: status N")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("usage: status N: %v", err)
	}
	f := ts.Getenv(statusEnv)
	b, err := os.ReadFile(f)
	if err != nil {
		ts.Fatalf("no sandboxd exit status recorded: %v", err)
	}
	os.Remove(f)
	got, err := strconv.Atoi(string(b))
	if err != nil {
		ts.Fatalf("status file: %v", err)
	}
	if (got == want) == neg {
		ts.Fatalf("sandboxd exited with status %d; want %s%d", got, map[bool]string{true: "not ", false: ""}[neg], want)
	}
}

// cmdReportKeys is `reportkeys FILE KEY...`: FILE is one JSON object with
// each KEY. A KEY may be written KEY=JSON (the value equals JSON) or
// KEY:KIND (the value is an array, object, string, number or bool).
func cmdReportKeys(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! reportkeys")
	}
	if len(args) < 2 {
		ts.Fatalf("usage: reportkeys FILE KEY[=JSON|:KIND]...")
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(ts.ReadFile(args[0])), &rep); err != nil {
		ts.Fatalf("%s is not one JSON object: %v", args[0], err)
	}
	for _, k := range args[1:] {
		name, want, hasValue := strings.Cut(k, "=")
		name, kind, hasKind := strings.Cut(name, ":")
		got, ok := rep[name]
		if !ok {
			ts.Fatalf("%s has no key %q", args[0], name)
		}
		switch {
		case hasValue:
			var w any
			if err := json.Unmarshal([]byte(want), &w); err != nil {
				ts.Fatalf("reportkeys %s: bad JSON %q: %v", name, want, err)
			}
			if !reflect.DeepEqual(got, w) {
				ts.Fatalf("%s: %s is %s, want %s", args[0], name, jsonOf(got), want)
			}
		case hasKind:
			if g := kindOf(got); g != kind {
				ts.Fatalf("%s: %s is %s (%s), want %s", args[0], name, g, jsonOf(got), kind)
			}
		}
	}
}

func kindOf(v any) string {
	switch v.(type) {
	case []any:
		return "array"
	case map[string]any:
		return "object"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
