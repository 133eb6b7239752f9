package persist

import (
	"bytes"
	"compress/zlib"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxd/sandboxd/internal/publictext"
)

// TestVerdictReasonsCarryNoInternalText: a refusal built from a real
// failure (a file that cannot be read, a parser that refuses it) says
// what went wrong in sandboxd's words, with the OS's reason in
// parentheses: no os or library error text, no absolute path.
func TestVerdictReasonsCarryNoInternalText(t *testing.T) {
	prefixes, err := publictext.ModulePrefixes()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, rel, content string
		fifo               bool
		want               string // in the reason
	}{
		{name: "bad TOML", rel: "rust-toolchain.toml", content: "[toolchain\npath = 1\n", want: "not TOML sandboxd can read (line 1: "},
		{name: "bad YAML", rel: ".yarnrc.yml", content: "a: [\n", want: "not YAML sandboxd can read (line "},
		{name: "settings fifo", rel: "web/.npmrc", fifo: true, want: "cannot read web/.npmrc (invalid argument)"},
		{name: "git config fifo", rel: ".git/config", fifo: true, want: "cannot read .git/config (invalid argument)"},
		{name: "git config syntax", rel: ".git/config", content: "[core\n", want: "git config .git/config cannot be parsed (line 1: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := filepath.Join(t.TempDir(), "ws")
			os.MkdirAll(filepath.Join(ws, ".git", "objects"), 0o755)
			os.MkdirAll(filepath.Join(ws, ".git", "refs"), 0o755)
			os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
			p := filepath.Join(ws, tc.rel)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if tc.fifo {
				if err := syscall.Mkfifo(p, 0o644); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			c := NewChecker(Config{Workspace: ws, Final: Host{}, Before: Host{}, Names: NewMatcher(Builtin())})
			v := c.Check(tc.rel, File)
			if v.Action != Refuse || !strings.Contains(v.Why, tc.want) {
				t.Fatalf("%s: %v %q, want refused with %q", tc.rel, v.Action, v.Why, tc.want)
			}
			for _, problem := range publictext.Problems(v.Why, prefixes) {
				t.Errorf("%s in the reason %q", problem, v.Why)
			}
			if strings.Contains(v.Why, ws) {
				t.Errorf("the reason %q names the workspace's absolute path, not the file's own", v.Why)
			}
		})
	}
}

// TestReasonOfFailures: reason gives a real failure's errno without the
// path os puts before it, and inflateError and syntaxError word zlib's
// and the parsers' errors.
func TestReasonOfFailures(t *testing.T) {
	prefixes, err := publictext.ModulePrefixes()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, openErr := os.Open(filepath.Join(dir, "missing"))
	os.Symlink("x", filepath.Join(dir, "link"))
	_, loopErr := Host{}.ReadFile(filepath.Join(dir, "link"), 10)
	_, zHeader := zlib.NewReader(bytes.NewReader([]byte("not zlib")))
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(bytes.Repeat([]byte("object"), 100))
	zw.Close()
	zr, _ := zlib.NewReader(bytes.NewReader(z.Bytes()[:z.Len()/2]))
	_, zShort := io.ReadAll(zr)
	_, tomlErr := tomlLeaves([]byte("a = \n"))
	for _, tc := range []struct {
		err  error
		want string
	}{
		{openErr, "no such file or directory"},
		{loopErr, "too many levels of symbolic links"},
		{inflateError(zHeader), "its compressed data is corrupt"},
		{inflateError(zShort), "its compressed data is corrupt"},
		{tomlErr, "not TOML sandboxd can read (line 1: "},
		{inflateError(&os.PathError{Op: "read", Path: dir + "/.git/objects/ab/cd", Err: syscall.EIO}), "input/output error"},
	} {
		got := reason(tc.err)
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
		for _, problem := range publictext.Problems(got, prefixes) {
			t.Errorf("%s in %q", problem, got)
		}
		if strings.Contains(got, dir) {
			t.Errorf("%q names the path", got)
		}
	}
}
