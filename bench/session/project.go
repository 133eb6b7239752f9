package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// A commit is one commit of the project's history: the files it writes.
type commit struct {
	msg   string
	files map[string]string
}

// history is the project as the agent finds it: four commits, then
// dirty, the change it has not committed.
func history() ([]commit, map[string]string) {
	return []commit{
			{msg: "Go module: lib with Sum and Squares", files: map[string]string{
				"README.md": readme, ".gitignore": "__pycache__/\n.pytest_cache/\n",
				"go.mod": "module example.com/session\n\ngo 1.22\n", "main.go": goMain,
				"lib/lib.go": goLib, "lib/lib_test.go": goLibTest}},
			{msg: "calc: a Python package with its tests", files: map[string]string{
				"calc/__init__.py": "from .ops import mean, total\n", "calc/ops.py": pyOps,
				"tests/test_ops.py": pyTest, "conftest.py": "# The project's root is on sys.path for the tests.\n"}},
			{msg: "src: the report's JavaScript, with node tests", files: map[string]string{
				"src/stats.js": jsStats, "src/stats.test.js": jsTest, "src/format.js": jsFormat}},
			{msg: "docs: design notes", files: map[string]string{
				"docs/design.md": designNotes, "docs/todo.txt": todoList}},
		}, map[string]string{
			// Work in progress: Words, not yet tested.
			"lib/lib.go": strings.Replace(goLib, "package lib\n", "package lib\n\nimport \"strings\"\n", 1) + goLibWords,
		}
}

// A step is one command of the session and the exit status it has bare
// (every variant must exit with it).
type step struct {
	cmd  string
	exit int
}

// steps is the session: what an agent runs, in order, while it reads
// the project, runs its tests, edits, tests again and commits. python is
// the interpreter that has pytest.
func steps(python string) []step {
	pytest := python + " -m pytest -q"
	cmds := []string{
		"ls",
		"cat README.md",
		"git status",
		"git log --oneline -5",
		"git diff",
		"ls -la src",
		"cat go.mod",
		"find . -name '*.go'",
		"grep -rn TODO .",
		"grep -rn func lib",
		"sed -n 1,40p lib/lib.go",
		"wc -l lib/*.go src/*.js calc/*.py",
		"head -20 lib/lib_test.go",
		"go test ./...",
		"cat src/stats.js",
		"node --test",
		"sed -n 1,30p calc/ops.py",
		pytest,
		"grep -rn FIXME src", // finds nothing
		"cat > lib/words_test.go <<'EOF'\n" + goWordsTest + "EOF",
		"go vet ./...",
		"go test ./...",
		`sed -i 's|    return total(xs) / len(xs)  # TODO: an empty list|    return total(xs) / len(xs) if xs else 0.0|' calc/ops.py`,
		pytest,
		"git diff --stat",
		"git status --short",
		"git add -A && git commit -qm 'lib: test Words; calc: the mean of nothing is 0'",
		"git log --oneline -3",
		"ls -la lib",
		"git show --stat HEAD",
	}
	s := make([]step, len(cmds))
	for i, c := range cmds {
		s[i].cmd = c
		if strings.HasPrefix(c, "grep -rn FIXME") {
			s[i].exit = 1 // grep found nothing
		}
	}
	return s
}

// makeProject writes the project's history into ws, a new git
// repository, and returns its last commit, which every session starts
// from.
func makeProject(ws string, env []string) (string, error) {
	commits, dirty := history()
	if _, err := gitIn(ws, env, "init", "-q", "-b", "main"); err != nil {
		return "", err
	}
	for _, c := range commits {
		if err := writeFiles(ws, c.files); err != nil {
			return "", err
		}
		if _, err := gitIn(ws, env, "add", "-A"); err != nil {
			return "", err
		}
		if _, err := gitIn(ws, env, "commit", "-qm", c.msg); err != nil {
			return "", err
		}
	}
	base, err := gitIn(ws, env, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(base), writeFiles(ws, dirty)
}

// resetProject brings ws back to base with the uncommitted change, as
// every session finds it (the session commits, edits and leaves Python's
// caches behind).
func resetProject(ws string, env []string, base string) error {
	if _, err := gitIn(ws, env, "reset", "-q", "--hard", base); err != nil {
		return err
	}
	if _, err := gitIn(ws, env, "clean", "-qfdx"); err != nil {
		return err
	}
	_, dirty := history()
	return writeFiles(ws, dirty)
}

// gitIn runs git in ws and returns its output.
func gitIn(ws string, env []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = ws, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func writeFiles(ws string, files map[string]string) error {
	for name, body := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// pythonWithPytest is the first of python3 on PATH and /usr/bin/python3
// that can run pytest ("": neither).
func pythonWithPytest(env []string) string {
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		cmd := exec.Command(py, "-m", "pytest", "--version")
		cmd.Dir, cmd.Env = "/", env
		if cmd.Run() == nil {
			return py
		}
	}
	return ""
}

// The project's sources.
const (
	readme = `# session

A small project for bench/session: a Go module (lib), a Python package
(calc) and the JavaScript of its report (src).

    go test ./...
    python3 -m pytest -q
    node --test

TODO: a command-line front end for calc.
`
	goMain = `package main

import (
	"fmt"

	"example.com/session/lib"
)

func main() { fmt.Println(lib.Sum(lib.Squares(10))) }
`
	goLib = `// Package lib is the project's library.
package lib

// Squares returns the first n squares.
func Squares(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i * i
	}
	return s
}

// Sum adds up s.
func Sum(s []int) (t int) {
	for _, v := range s {
		t += v
	}
	return t
}
`
	goLibWords = `
// Words splits s on spaces and upper-cases every word.
// TODO: keep the case of words that are all digits.
func Words(s string) []string {
	w := strings.Fields(s)
	for i := range w {
		w[i] = strings.ToUpper(w[i])
	}
	return w
}
`
	goLibTest = `package lib

import "testing"

func TestSquares(t *testing.T) {
	if got := Sum(Squares(4)); got != 14 {
		t.Fatalf("Sum(Squares(4)) = %d, want 14", got)
	}
}

func TestSumEmpty(t *testing.T) {
	if got := Sum(nil); got != 0 {
		t.Fatalf("Sum(nil) = %d, want 0", got)
	}
}
`
	goWordsTest = `package lib

import "testing"

func TestWords(t *testing.T) {
	if w := Words(" a bc  d "); len(w) != 3 || w[1] != "BC" {
		t.Fatalf("Words = %q", w)
	}
}
`
	pyOps = `"""Arithmetic over lists of numbers."""


def total(xs):
    """The sum of xs."""
    t = 0
    for x in xs:
        t += x
    return t


def mean(xs):
    """The arithmetic mean of xs."""
    return total(xs) / len(xs)  # TODO: an empty list
`
	pyTest = `from calc import mean, total


def test_total():
    assert total([1, 2, 3]) == 6


def test_mean():
    assert mean([1, 2, 3, 6]) == 3
`
	jsStats = `'use strict';

// TODO: a median as well.
function sum(xs) {
  return xs.reduce((a, b) => a + b, 0);
}

function mean(xs) {
  return xs.length ? sum(xs) / xs.length : 0;
}

module.exports = { sum, mean };
`
	jsFormat = `'use strict';

function percent(x) {
  return (100 * x).toFixed(1) + ' %';
}

module.exports = { percent };
`
	jsTest = `'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { sum, mean } = require('./stats');
const { percent } = require('./format');

test('sum', () => {
  assert.strictEqual(sum([1, 2, 3]), 6);
});

test('mean and percent', () => {
  assert.strictEqual(mean([]), 0);
  assert.strictEqual(percent(mean([0.25, 0.75])), '50.0 %');
});
`
	designNotes = `# Design

The library is split by language: lib (Go) computes, calc (Python)
checks the figures, src (JavaScript) formats the report.

TODO: say which of them owns rounding.
`
	todoList = `- TODO: a median in src/stats.js
- TODO: calc.mean of an empty list
- done: Sum of nothing is 0
`
)
