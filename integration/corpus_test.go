package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The corpus (issue 10): everyday commands — a Go module's build, test
// and vet, node's and npm's test runners, pytest and Python
// multiprocessing, git's daily verbs, make with a C compiler, a loopback
// dev server polled before it listens, top, writes to /dev/stdout through
// pipes, mkdir -p of directories that exist, less — run under `sandboxd
// run` as root and as the unprivileged user, in both workspace modes.
// Each must do what it does bare (its effect is checked) and report zero
// boundaries: a boundary is a refusal by the sandbox that happened and
// matters, so an everyday command that does no harm has none.
//
// Every case gets a fresh directory of its own inside one workspace per
// identity, shared by all the corpus tests, so sandboxd's private Go
// build cache (kept per workspace) is cold only once per identity.

// corpusPath is the PATH every run gets (the harness's).
const corpusPath = "/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// corpusPort is the dev server's loopback port inside the sandbox's own
// network namespace.
const corpusPort = 18473

// corpusCase is one everyday command.
type corpusCase struct {
	name string
	// needs says why the case cannot run here ("" when it can): only for
	// tools the corpus cannot count on (node, npm, pytest, top, less).
	needs func() string
	// setup writes the case's files into dir (host side, as the env's
	// identity) before the run.
	setup func(t *testing.T, e *env, dir string)
	// script runs with bash -c in dir.
	script string
	// check asserts the command's effect after the run.
	check   func(t *testing.T, e *env, dir string, r result)
	timeout time.Duration
}

// toolPath finds a program on the runs' PATH ("" if missing).
func toolPath(name string) string {
	for _, d := range filepath.SplitList(corpusPath) {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// lookTool says why a program is missing from the runs' PATH, or "".
func lookTool(name string) func() string {
	return func() string {
		if toolPath(name) == "" {
			return name + " is not installed (not on " + corpusPath + ")"
		}
		return ""
	}
}

var pytestOnce struct {
	sync.Once
	why string
}

// havePytest: python3 -m pytest works with the runs' PATH.
func havePytest() string {
	pytestOnce.Do(func() {
		py := toolPath("python3")
		if py == "" {
			pytestOnce.why = "python3 is not installed"
			return
		}
		cmd := exec.Command(py, "-m", "pytest", "--version")
		cmd.Env = []string{"PATH=" + corpusPath, "HOME=/nonexistent"}
		if out, err := cmd.CombinedOutput(); err != nil {
			pytestOnce.why = py + " -m pytest is not available (Debian: python3-pytest): " + strings.TrimSpace(string(out))
		}
	})
	return pytestOnce.why
}

// wantOut fails unless s contains each of want.
func wantOut(t *testing.T, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, s)
		}
	}
}

// wantFile fails unless p exists and contains each of want.
func wantFile(t *testing.T, p string, want ...string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Errorf("the command's effect is missing: %v", err)
		return
	}
	wantOut(t, p, string(b), want...)
}

// wantExec fails unless p is an executable regular file.
func wantExec(t *testing.T, p string) {
	t.Helper()
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		t.Errorf("no executable %s after the run: %v %v", p, st, err)
	}
}

func (e *env) files(dir string, files map[string]string) {
	e.t.Helper()
	for name, content := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		e.writeFile(filepath.Join(dir, name), content, mode)
	}
}

const corpusGoMod = "module corpus.example/hello\n\ngo 1.22\n"

var corpusGoFiles = map[string]string{
	"go.mod": corpusGoMod,
	"main.go": `package main

import (
	"fmt"

	"corpus.example/hello/greet"
)

func main() { fmt.Println(greet.Hello("corpus")) }
`,
	"greet/greet.go": `// Package greet greets.
package greet

// Hello greets name.
func Hello(name string) string { return "hello, " + name }
`,
	"greet/greet_test.go": `package greet

import "testing"

func TestHello(t *testing.T) {
	if got := Hello("x"); got != "hello, x" {
		t.Fatalf("Hello = %q", got)
	}
}

func TestMore(t *testing.T) {
	if Hello("") != "hello, " {
		t.Fatal("empty")
	}
}
`,
	// Outside ./... (a leading underscore), named explicitly: proof that
	// vet really analyses.
	"_vetbad/bad.go": `package vetbad

import "fmt"

func Bad() { fmt.Printf("%d\n", "not a number") }
`,
}

var corpusNodeFiles = map[string]string{
	"package.json": `{
  "name": "corpus-node",
  "version": "1.0.0",
  "private": true,
  "scripts": { "test": "node --test" },
  "dependencies": { "localadd": "file:./vendor/localadd" }
}
`,
	// A local package, installed as npm would from ./vendor (no registry).
	"vendor/localadd/package.json":       `{ "name": "localadd", "version": "1.0.0", "main": "index.js" }` + "\n",
	"vendor/localadd/index.js":           "module.exports = (a, b) => a + b;\n",
	"node_modules/localadd/package.json": `{ "name": "localadd", "version": "1.0.0", "main": "index.js" }` + "\n",
	"node_modules/localadd/index.js":     "module.exports = (a, b) => a + b;\n",
	"test/add.test.js": `const test = require('node:test');
const assert = require('node:assert');
const fs = require('node:fs');
const add = require('localadd');

test('adds', () => { assert.strictEqual(add(2, 3), 5); });
test('writes its mark', () => { fs.writeFileSync('node-ran.txt', 'node test ran\n'); });
`,
}

func nodeCheck(t *testing.T, e *env, dir string, r result) {
	t.Helper()
	wantOut(t, "stdout", r.stdout, "# pass 2", "# fail 0")
	wantFile(t, filepath.Join(dir, "node-ran.txt"), "node test ran")
}

// corpusDevClient polls the dev server from before it listens: its first
// connects are refused (ECONNREFUSED) by the sandbox's own loopback.
var corpusDevClient = `import time, urllib.request
refused, deadline = 0, time.time() + 20
while True:
    try:
        body = urllib.request.urlopen("http://127.0.0.1:` + strconv.Itoa(corpusPort) + `/index.txt", timeout=2).read().decode()
        break
    except OSError:
        refused += 1
        if time.time() > deadline:
            raise
        time.sleep(0.05)
print("refused", refused)
print("body", body, end="")
`

func corpusCases() []corpusCase {
	goTimeout := 150 * time.Second
	return []corpusCase{
		{
			name:    "go-build",
			setup:   func(t *testing.T, e *env, dir string) { e.files(dir, corpusGoFiles) },
			script:  "go build -o hello . && ./hello",
			timeout: goTimeout,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "hello, corpus")
				wantExec(t, filepath.Join(dir, "hello"))
			},
		},
		{
			name:    "go-test",
			setup:   func(t *testing.T, e *env, dir string) { e.files(dir, corpusGoFiles) },
			script:  "go test -count=1 -v ./...",
			timeout: goTimeout,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "--- PASS: TestHello", "--- PASS: TestMore", "ok  \tcorpus.example/hello/greet")
			},
		},
		{
			name:    "go-vet",
			setup:   func(t *testing.T, e *env, dir string) { e.files(dir, corpusGoFiles) },
			script:  "go vet ./... && echo VET-CLEAN && ! go vet ./_vetbad 2>vet.err && cat vet.err",
			timeout: goTimeout,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "VET-CLEAN", "wrong type")
			},
		},
		{
			name:   "node-test",
			needs:  lookTool("node"),
			setup:  func(t *testing.T, e *env, dir string) { e.files(dir, corpusNodeFiles) },
			script: "node --test",
			check:  nodeCheck,
		},
		{
			name:   "npm-test",
			needs:  func() string { return lookTool("node")() + lookTool("npm")() },
			setup:  func(t *testing.T, e *env, dir string) { e.files(dir, corpusNodeFiles) },
			script: "npm test",
			check: func(t *testing.T, e *env, dir string, r result) {
				nodeCheck(t, e, dir, r)
				wantOut(t, "stdout", r.stdout, "> corpus-node@1.0.0 test")
			},
		},
		{
			name:  "pytest",
			needs: havePytest,
			setup: func(t *testing.T, e *env, dir string) {
				e.files(dir, map[string]string{
					"calc.py": "def add(a, b):\n    return a + b\n",
					"test_calc.py": "from calc import add\n\n" +
						"def test_add():\n    assert add(2, 3) == 5\n\n" +
						"def test_mark(tmp_path):\n    (tmp_path / 'x').write_text('x')\n    open('pytest-ran.txt', 'w').write('pytest ran\\n')\n",
				})
			},
			script: "python3 -m pytest -q",
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "2 passed")
				wantFile(t, filepath.Join(dir, "pytest-ran.txt"), "pytest ran")
			},
		},
		{
			name: "python-multiprocessing",
			setup: func(t *testing.T, e *env, dir string) {
				e.files(dir, map[string]string{"mp.py": `import multiprocessing as mp

def sq(x):
    return x * x

if __name__ == "__main__":
    out = []
    for method in ("fork", "spawn"):
        with mp.get_context(method).Pool(2) as pool:
            out.append("%s %s" % (method, pool.map(sq, range(6))))
    with open("mp-out.txt", "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))
`})
			},
			script: "python3 mp.py",
			check: func(t *testing.T, e *env, dir string, r result) {
				wantFile(t, filepath.Join(dir, "mp-out.txt"), "fork [0, 1, 4, 9, 16, 25]", "spawn [0, 1, 4, 9, 16, 25]")
			},
		},
		{
			name: "git",
			// The identity comes from the environment, never a global config.
			script: `set -e
export GIT_AUTHOR_NAME=Corpus GIT_AUTHOR_EMAIL=corpus@example.com GIT_COMMITTER_NAME=Corpus GIT_COMMITTER_EMAIL=corpus@example.com
git init -q -b main repo && cd repo
echo a > a && git add a && git commit -qm a
git branch feature && git checkout -q feature
echo b > b && git add b && git commit -qm b
git checkout -q main && echo c > c && git add c && git commit -qm c
git checkout -q feature && git rebase -q main
echo dirty >> a && git stash -q && test -z "$(git status --porcelain)" && git stash pop -q
git gc -q
git log --format=%s`,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "b\nc\na\n")
				repo := filepath.Join(dir, "repo")
				git := func(args ...string) string {
					out, err := e.gitOut(repo, append([]string{"-c", "safe.directory=*"}, args...)...)
					if err != nil {
						t.Errorf("host git %v: %v\n%s", args, err, out)
					}
					return strings.TrimSpace(out)
				}
				if got := git("log", "--format=%s", "main..feature"); got != "b" {
					t.Errorf("feature has %q beyond main, want the one commit b", got)
				}
				if mb, main := git("merge-base", "main", "feature"), git("rev-parse", "main"); mb != main {
					t.Errorf("feature not rebased onto main: merge-base %s, main %s", mb, main)
				}
				if s := git("stash", "list"); s != "" {
					t.Errorf("stash not popped: %q", s)
				}
				wantFile(t, filepath.Join(repo, "a"), "a\ndirty\n")
				if packs, _ := filepath.Glob(filepath.Join(repo, ".git", "objects", "pack", "*.pack")); len(packs) == 0 {
					t.Errorf("git gc left no pack")
				}
			},
		},
		{
			name: "make-cc",
			setup: func(t *testing.T, e *env, dir string) {
				e.files(dir, map[string]string{
					"hello.c":  "#include <stdio.h>\nint main(void) { puts(\"hello from c\"); return 0; }\n",
					"Makefile": "hello: hello.c\n\tcc -O1 -o $@ $<\n",
				})
			},
			script: "make && ./hello",
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "cc -O1 -o hello hello.c", "hello from c")
				wantExec(t, filepath.Join(dir, "hello"))
			},
		},
		{
			name: "dev-server",
			setup: func(t *testing.T, e *env, dir string) {
				e.files(dir, map[string]string{"index.txt": "corpus dev server\n", "client.py": corpusDevClient})
			},
			// The client starts first and polls; the server listens half a
			// second later.
			script: fmt.Sprintf(`python3 client.py > client.out & client=$!
sleep 0.5
python3 -m http.server %d --bind 127.0.0.1 >/dev/null 2>server.log & server=$!
wait $client; rc=$?
kill $server; wait $server 2>/dev/null
cat client.out
exit $rc`, corpusPort),
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "body corpus dev server")
				m := regexp.MustCompile(`refused (\d+)`).FindStringSubmatch(r.stdout)
				if m == nil || m[1] == "0" {
					t.Errorf("the client never polled before the server listened (want refused ≥ 1):\n%s", r.stdout)
				}
			},
		},
		{
			name:   "top",
			needs:  lookTool("top"),
			script: "top -b -n 1 > top.txt && head -n 12 top.txt",
			check: func(t *testing.T, e *env, dir string, r result) {
				wantFile(t, filepath.Join(dir, "top.txt"), "load average", "PID")
			},
		},
		{
			name: "dev-stdout",
			// stdout and stderr are pipes (the harness's buffers).
			script: "test -p /dev/stdout && test -p /dev/stderr && echo hi > /dev/stdout && echo hi-err > /dev/stderr",
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "hi\n")
				wantOut(t, "stderr", r.stderr, "hi-err\n")
			},
		},
		{
			name:   "mkdir-p-existing",
			script: `mkdir -p /usr/bin && mkdir -p "$HOME" && mkdir -p /etc /usr && mkdir -p "$HOME/.ssh" && mkdir -p "$PWD" && echo MKDIR-OK`,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "MKDIR-OK")
			},
		},
		{
			name:  "less",
			needs: lookTool("less"),
			setup: func(t *testing.T, e *env, dir string) {
				e.files(dir, map[string]string{"notes.txt": "line one\nline two\n"})
			},
			script: "less -FX notes.txt < /dev/null",
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "line one\nline two\n")
			},
		},
		{
			// Cloning a project that carries a hook manager's files and a
			// Dev Containers folder (issue 23): nothing runs them until a
			// hook is installed or the person reopens the folder in a
			// container, so they are listed, not refused.
			name: "git-clone-tooling",
			setup: func(t *testing.T, e *env, dir string) {
				src := e.toolingRepo(t, "git")
				e.files(dir, map[string]string{"SRC": src})
			},
			script: `set -e
SRC=$(cat SRC)
git clone -q "$SRC" plain
git -c protocol.file.allow=always clone -q --recurse-submodules "$SRC" recursive
git -C plain status --porcelain; git -C recursive submodule status`,
			check: func(t *testing.T, e *env, dir string, r result) {
				for _, clone := range []string{"plain", "recursive"} {
					e.toolingCloneOK(t, filepath.Join(dir, clone), "git")
				}
				sub := filepath.Join(dir, "recursive", "sub")
				wantFile(t, filepath.Join(sub, ".pre-commit-config.yaml"), "repos")
				if out, err := e.gitOut(sub, "-c", "safe.directory=*", "log", "-1", "--format=%s"); err != nil || strings.TrimSpace(out) != "sub" {
					t.Errorf("the submodule is not checked out on the host: %q %v", out, err)
				}
			},
		},
		{
			name:  "hg-clone-tooling",
			needs: lookTool("hg"),
			setup: func(t *testing.T, e *env, dir string) {
				e.files(dir, map[string]string{"SRC": e.toolingRepo(t, "hg")})
			},
			// --pull clones as from a server: a local copy-clone takes the
			// source repository's lock, a write outside the workspace (a
			// true boundary).
			script: `set -e
hg clone -q --pull "$(cat SRC)" hgc
hg -R hgc status`,
			check: func(t *testing.T, e *env, dir string, r result) {
				e.toolingCloneOK(t, filepath.Join(dir, "hgc"), "hg")
				wantFile(t, filepath.Join(dir, "hgc", ".hg", "hgrc"), "[paths]", "default = ")
			},
		},
	}
}

// toolingFiles are a project's hook manager and Dev Containers files.
var toolingFiles = map[string]string{
	".husky/pre-commit":               "npm test\n",
	".pre-commit-config.yaml":         "repos: []\n",
	".devcontainer/devcontainer.json": "{\"image\": \"debian\", \"initializeCommand\": \"echo hi\"}\n",
	"README.md":                       "tooling\n",
}

// toolingRepo makes a repository (git, with a submodule; or hg) in the
// env's home holding toolingFiles, and returns its path.
func (e *env) toolingRepo(t *testing.T, vcs string) string {
	t.Helper()
	src := filepath.Join(e.home, "src-"+vcs+"-"+randHex(3))
	for name, content := range toolingFiles {
		e.writeFile(filepath.Join(src, name), content, 0o644)
	}
	if vcs == "hg" {
		e.hostRun(t, src, "hg", "init")
		e.hostRun(t, src, "hg", "commit", "-q", "-A", "-u", "t <t@example.com>", "-m", "tooling")
		return src
	}
	sub := filepath.Join(e.home, "sub-"+randHex(3))
	e.writeFile(filepath.Join(sub, ".pre-commit-config.yaml"), "repos: []\n", 0o644)
	e.hostGitIn(t, sub, "init", "-q")
	e.hostGitIn(t, sub, "add", "-A")
	e.hostGitIn(t, sub, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "sub")
	e.hostGitIn(t, src, "init", "-q")
	e.hostGitIn(t, src, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, "sub")
	e.hostGitIn(t, src, "add", "-A")
	e.hostGitIn(t, src, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "tooling")
	return src
}

// toolingCloneOK: the clone holds toolingFiles and is a clean work tree
// of its repository on the host.
func (e *env) toolingCloneOK(t *testing.T, clone, vcs string) {
	t.Helper()
	for name, content := range toolingFiles {
		wantFile(t, filepath.Join(clone, name), strings.TrimSpace(content))
	}
	var out string
	var err error
	if vcs == "hg" {
		cmd := e.hostCmd(context.Background(), clone, "hg", "status")
		var b []byte
		b, err = cmd.CombinedOutput()
		out = string(b)
	} else {
		out, err = e.gitOut(clone, "-c", "safe.directory=*", "status", "--porcelain")
	}
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("%s status in %s: %q %v (want a clean clone)", vcs, clone, out, err)
	}
}

func corpusCaseNamed(name string) corpusCase {
	for _, c := range corpusCases() {
		if c.name == name {
			return c
		}
	}
	panic("no corpus case " + name)
}

var corpusEnvs struct {
	sync.Mutex // guards m and inUse
	m          map[string]*env
	// inUse is held, per identity, by the test using its corpus env:
	// the corpus tests share the identity's one workspace (and its
	// caches and layer), so they take turns with it.
	inUse map[string]*sync.Mutex
}

// corpusEnv is the identity's corpus world (home with the harness's
// canary secrets and a settings-only ~/.npmrc, one workspace), shared by
// the corpus tests so that caches stay warm. It lives under the run's
// base directory, which TestMain removes. t has it to itself until t
// ends: another test asking for the same identity's waits.
func corpusEnv(t *testing.T, id identity) *env {
	t.Helper()
	corpusEnvs.Lock()
	if corpusEnvs.inUse == nil {
		corpusEnvs.inUse = map[string]*sync.Mutex{}
	}
	if corpusEnvs.inUse[id.name] == nil {
		corpusEnvs.inUse[id.name] = &sync.Mutex{}
	}
	inUse := corpusEnvs.inUse[id.name]
	corpusEnvs.Unlock()
	inUse.Lock()
	t.Cleanup(inUse.Unlock)
	corpusEnvs.Lock()
	defer corpusEnvs.Unlock()
	if e := corpusEnvs.m[id.name]; e != nil {
		c := *e
		c.t = t
		return &c
	}
	dir, err := os.MkdirTemp(baseDir, "corpus-"+id.name+"-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	e := &env{t: t, id: id, dir: dir, canary: "CANARY-" + randHex(8)}
	e.home = e.mkdir("home", 0o700)
	e.ws = e.mkdir("ws", 0o755)
	e.mkdir("outside", 0o755)
	e.writeFile(filepath.Join(e.home, ".ssh", "id_rsa"), "-----BEGIN KEY-----\n"+e.canary+"\n", 0o600)
	e.writeFile(filepath.Join(e.home, ".aws", "credentials"), "[default]\naws_secret_access_key="+e.canary+"\n", 0o600)
	// Only settings, no credentials: nothing here is a secret.
	e.writeFile(filepath.Join(e.home, ".npmrc"), "fund=false\naudit=false\nupdate-notifier=false\n", 0o644)
	// A home that has used Go before: a bare go command sets up its
	// telemetry directory (~/.config/go/telemetry) as it does for anyone.
	goBin := toolPath("go")
	if goBin == "" {
		t.Fatal("go is required for the corpus")
	}
	cmd := e.hostCmd(context.Background(), e.dir, goBin, "env", "GOVERSION")
	cmd.Env = append(cmd.Env, "GOTOOLCHAIN=local", "GOPROXY=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bare go env: %v\n%s", err, out)
	}
	if corpusEnvs.m == nil {
		corpusEnvs.m = map[string]*env{}
	}
	corpusEnvs.m[id.name] = e
	c := *e
	return &c
}

// forCorpus runs f for each workspace mode and identity, with the
// identity's shared corpus env; the identities of a mode run in parallel.
func forCorpus(t *testing.T, f func(t *testing.T, e *env, mode string)) {
	t.Helper()
	for _, mode := range []string{"layer", "direct"} {
		t.Run(mode, func(t *testing.T) {
			for _, id := range identities(t) {
				t.Run(id.name, func(t *testing.T) {
					t.Parallel()
					e := corpusEnv(t, id)
					if mode == "direct" {
						e.runArgs = []string{"--no-transaction"}
					}
					f(t, e, mode)
				})
			}
		})
	}
}

// runCase sets up a fresh directory for c and runs prefix+c.script in it
// under sandboxd (with extra flags), failing the test if the command
// itself failed or its effect is missing.
func (e *env) runCase(t *testing.T, c corpusCase, tag, prefix string, flags ...string) (result, string) {
	t.Helper()
	dir := e.mkdir(filepath.Join("ws", tag+"-"+c.name+"-"+randHex(3)), 0o755)
	if c.setup != nil {
		c.setup(t, e, dir)
	}
	// The workspace is the identity's one workspace (the case's directory
	// is the working directory inside it): sandboxd keeps its private
	// caches per workspace.
	args := append(append(append([]string{"run", "--workspace", e.ws}, e.runArgs...), flags...), "-c", prefix+c.script)
	timeout := c.timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	if timeout > 60*time.Second {
		// A case given more time is a heavy toolchain run.
		defer heavyBuild()()
	}
	r := e.corpusRun(dir, timeout, args...)
	if r.code != 0 {
		t.Errorf("the command failed under sandboxd (it succeeds bare)\n%s", r)
	}
	c.check(t, e, dir, r)
	return r, dir
}

// corpusRun runs sandboxd as sandboxdOpts does (same environment, a
// report), but with stdout and stderr pipes owned by the env's identity,
// as an agent's own pipes are: reopening them through /dev/stdout works
// bare for that identity (a pipe the root test process made would refuse
// the unprivileged user with EACCES before any sandbox is involved).
func (e *env) corpusRun(dir string, timeout time.Duration, args ...string) result {
	e.t.Helper()
	report := filepath.Join(e.mkdir("reports", 0o755), "report-"+randHex(4)+".json")
	args = append([]string{args[0], "--report", report}, args[1:]...)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	cmd.Env = []string{
		"HOME=" + e.home, "PATH=" + corpusPath, "LANG=C.UTF-8", "USER=" + e.id.name,
		"GOFLAGS=-mod=mod", "GOTOOLCHAIN=local", "GOPROXY=off",
	}
	cmd.Stdin = strings.NewReader("")
	var outs [2]bytes.Buffer
	var wg sync.WaitGroup
	var ends []*os.File
	for i := range outs {
		pr, pw, err := os.Pipe()
		if err != nil {
			e.t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			if err := pw.Chown(e.id.uid, e.id.gid); err != nil {
				e.t.Fatal(err)
			}
		}
		ends = append(ends, pw)
		wg.Add(1)
		go func() { defer wg.Done(); io.Copy(&outs[i], pr); pr.Close() }()
	}
	cmd.Stdout, cmd.Stderr = ends[0], ends[1]
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if os.Geteuid() == 0 && e.id.uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid), Groups: []uint32{}}
	}
	err := cmd.Start()
	for _, w := range ends {
		w.Close()
	}
	if err != nil {
		e.t.Fatalf("sandboxd: %v", err)
	}
	err = cmd.Wait()
	drained := make(chan struct{})
	go func() { wg.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-ctx.Done():
		e.t.Fatalf("something the command started still holds its stdout or stderr %v after it began", timeout)
	}
	r := result{stdout: outs[0].String(), stderr: outs[1].String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.t.Fatalf("sandboxd itself was killed by %v\n%s", ws.Signal(), r)
		}
	default:
		e.t.Fatalf("sandboxd: %v\n%s", err, r)
	}
	if ctx.Err() != nil {
		e.t.Fatalf("sandboxd did not finish within %v\n%s", timeout, r)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		e.t.Fatalf("no report: %v\n%s", err, r)
	}
	if err := json.Unmarshal(b, &r.report); err != nil {
		e.t.Fatalf("bad report: %v\n%s", err, b)
	}
	return r
}

// corpusBoundaries returns the report's boundaries (none if absent).
func corpusBoundaries(r result) []map[string]any {
	var out []map[string]any
	bs, _ := r.report["boundaries"].([]any)
	for _, b := range bs {
		if m, ok := b.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func boundaryTarget(b map[string]any) string {
	if p, _ := b["path"].(string); p != "" {
		return p
	}
	d, _ := b["destination"].(string)
	return d
}

// describeBoundaries lists boundaries one per distinct (surface,
// operation, target, decision, source), with a count, sorted.
func describeBoundaries(bs []map[string]any) string {
	n := map[string]int{}
	for _, b := range bs {
		n[fmt.Sprintf("%v %v %s decision=%v source=%v (%v)", b["surface"], b["operation"], boundaryTarget(b), b["decision"], b["source"], b["rationale"])]++
	}
	var lines []string
	for k, c := range n {
		lines = append(lines, fmt.Sprintf("  BOUNDARY %s ×%d", k, c))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

var deniedLine = regexp.MustCompile(`(?m)^sandboxd: denied .*$`)

// stderrDenials lists the denial blocks' first lines on stderr, with
// counts.
func stderrDenials(stderr string) string {
	n := map[string]int{}
	for _, l := range deniedLine.FindAllString(stderr, -1) {
		n[l]++
	}
	var lines []string
	for k, c := range n {
		lines = append(lines, fmt.Sprintf("  STDERR %s ×%d", k, c))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// mustBeQuiet fails unless the run reported no boundary at all, in the
// report and on stderr.
func mustBeQuiet(t *testing.T, r result) {
	t.Helper()
	bs := corpusBoundaries(r)
	if len(bs) == 0 && !deniedLine.MatchString(r.stderr) {
		return
	}
	t.Errorf("an everyday command reported %d boundaries (want none):\n%s\n%s",
		len(bs), describeBoundaries(bs), stderrDenials(r.stderr))
}

// skipUnlessAvailable skips a case whose tool this machine lacks, saying
// which (make test installs them all).
func (c corpusCase) skipUnlessAvailable(t *testing.T) {
	t.Helper()
	if c.needs != nil {
		if why := c.needs(); why != "" {
			t.Skip("skipped: " + why)
		}
	}
}

// TestCorpusQuiet: every everyday command does what it does bare and
// reports zero boundaries, as root and unprivileged, in both modes.
func TestCorpusQuiet(t *testing.T) {
	t.Parallel()
	forCorpus(t, func(t *testing.T, e *env, mode string) {
		for _, c := range corpusCases() {
			t.Run(c.name, func(t *testing.T) {
				c.skipUnlessAvailable(t)
				e := *e
				e.t = t
				r, _ := e.runCase(t, c, "quiet-"+mode, "")
				mustBeQuiet(t, r)
			})
		}
	})
}

// TestCorpusOneRealBoundary: the same commands plus one deliberate real
// boundary, tried twice — a new file outside the workspace (in a
// directory the identity owns, so only the sandbox stands in the way) or
// a read of the planted SSH key — report exactly that boundary, once,
// denied; the file is absent afterwards and the key's canary is
// nowhere, and the command still does what it does.
func TestCorpusOneRealBoundary(t *testing.T) {
	t.Parallel()
	cases := []string{"go-build", "npm-test", "python-multiprocessing", "git", "make-cc", "dev-server", "dev-stdout", "mkdir-p-existing"}
	forCorpus(t, func(t *testing.T, e *env, mode string) {
		for i, name := range cases {
			c := corpusCaseNamed(name)
			t.Run(c.name, func(t *testing.T) {
				c.skipUnlessAvailable(t)
				e := *e
				e.t = t
				var op, target, prefix string
				if i%2 == 0 {
					op, target = "make_reg", filepath.Join(e.dir, "outside", "corpus-"+c.name+"-"+randHex(4))
					prefix = fmt.Sprintf("echo corpus > %s 2>/dev/null; echo corpus > %[1]s 2>/dev/null; ", target)
				} else {
					op, target = "read_file", filepath.Join(e.home, ".ssh", "id_rsa")
					prefix = "cat ~/.ssh/id_rsa >/dev/null 2>&1; head -c1 ~/.ssh/id_rsa >/dev/null 2>&1; "
				}
				r, _ := e.runCase(t, c, "real-"+mode, prefix)
				e.noCanary(t, r)
				if op == "make_reg" {
					if _, err := os.Lstat(target); err == nil {
						t.Errorf("%s exists after the run", target)
					}
				}
				bs := corpusBoundaries(r)
				var hits, others []map[string]any
				for _, b := range bs {
					if b["surface"] == "filesystem" && b["operation"] == op && b["path"] == target {
						hits = append(hits, b)
					} else {
						others = append(others, b)
					}
				}
				if len(hits) != 1 {
					t.Errorf("want exactly one boundary filesystem %s %s, got %d:\n%s", op, target, len(hits), describeBoundaries(bs))
				} else if hits[0]["decision"] != "deny" {
					t.Errorf("the real boundary was decided %v, want deny", hits[0]["decision"])
				}
				if len(others) != 0 {
					t.Errorf("besides the one real boundary, %d others were reported:\n%s", len(others), describeBoundaries(others))
				}
				want := "sandboxd: denied " + op + " " + target
				if n := strings.Count(r.stderr, want+"\n"); n != 1 {
					t.Errorf("want one denial block for %s on stderr, got %d:\n%s", target, n, stderrDenials(r.stderr))
				}
				if n := len(deniedLine.FindAllString(r.stderr, -1)); n > 1 {
					t.Errorf("%d denial blocks on stderr, want only the real one:\n%s", n, stderrDenials(r.stderr))
				}
			})
		}
	})
}

// TestCorpusSessionNotLocked: a fast part of the corpus run ten times in
// one session, alternating the workspace modes, never locks the session
// down: no boundary is ever decided by the circuit breaker, the last
// round still does what it does, and a real boundary after the ten
// rounds is still decided by the policy, not by a lockdown.
func TestCorpusSessionNotLocked(t *testing.T) {
	t.Parallel()
	subset := []string{"go-build", "npm-test", "git", "make-cc", "dev-server", "top", "dev-stdout", "mkdir-p-existing", "less"}
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			t.Parallel()
			e := corpusEnv(t, id)
			session := "corpus-" + randHex(6)
			seen := map[string]int{}
			for round := 1; round <= 10; round++ {
				mode := map[bool]string{true: "layer", false: "direct"}[round%2 == 1]
				e.runArgs = nil
				if mode == "direct" {
					e.runArgs = []string{"--no-transaction"}
				}
				for _, name := range subset {
					c := corpusCaseNamed(name)
					if c.needs != nil && c.needs() != "" {
						continue
					}
					t.Run(fmt.Sprintf("round%02d-%s-%s", round, mode, name), func(t *testing.T) {
						e := *e
						e.t = t
						r, _ := e.runCase(t, c, fmt.Sprintf("session-%02d", round), "", "--session", session)
						for _, b := range corpusBoundaries(r) {
							seen[fmt.Sprintf("%v %v %s source=%v", b["surface"], b["operation"], boundaryTarget(b), b["source"])]++
							if b["source"] == "circuit-breaker" {
								t.Errorf("round %d: the session is locked down: %s decided by the circuit breaker (%v)", round, boundaryTarget(b), b["rationale"])
							}
						}
					})
				}
			}
			if len(seen) > 0 {
				var lines []string
				for k, n := range seen {
					lines = append(lines, fmt.Sprintf("  %s ×%d", k, n))
				}
				sort.Strings(lines)
				t.Logf("boundaries the session's runs reported (each counts toward the breaker):\n%s", strings.Join(lines, "\n"))
			}
			// The probe: one real boundary after the ten rounds.
			target := filepath.Join(e.dir, "outside", "corpus-probe-"+randHex(4))
			r := e.corpusRun(e.ws, 60*time.Second, "run", "--session", session, "-c", "echo x > "+target+" 2>/dev/null; echo PROBE")
			wantOut(t, "stdout", r.stdout, "PROBE")
			found := false
			for _, b := range corpusBoundaries(r) {
				if b["path"] == target && b["operation"] == "make_reg" {
					found = true
					if b["source"] == "circuit-breaker" {
						t.Errorf("after ten rounds the session is locked down: the probe's boundary was decided by the circuit breaker (%v)", b["rationale"])
					}
				}
			}
			if !found {
				t.Errorf("the probe's boundary %s was not reported:\n%s", target, describeBoundaries(corpusBoundaries(r)))
			}
			if _, err := os.Lstat(target); err == nil {
				t.Errorf("%s exists after the probe", target)
			}
		})
	}
}
