// Command corpus times everyday commands — a Go module's build, test and
// vet, a day of git, make with a C compiler, Python multiprocessing and,
// when node is installed, node's test runner — bare (`bash -c CMD` in the
// workspace) and under `sandboxd run --workspace WS -- bash -c CMD`,
// interleaved (one of each per command per round) after 2 warm-up runs
// each, so that Go's build cache, sandboxd's private cache for the
// workspace and the page cache are warm for both. Every sandboxed run
// writes a report, and must exit 0 and report no boundaries. It prints a
// Markdown table for docs/BENCHMARKS.md.
//
//	go run ./bench/corpus -n 10 [-sandboxd bin/sandboxd]
//
// The Go build changes one constant before every run (bare and sandboxed),
// so that each build compiles and links instead of hitting the cache; the
// git case runs in a new subdirectory every time; make cleans first.
package main

import (
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

// A job is one everyday command, run in dir (relative to the workspace).
type job struct {
	name string
	dir  string
	// script returns the bash command for run number i (unique across
	// both variants).
	script func(i int) string
	// prep runs untimed before every run.
	prep func(i int) error
	bare []time.Duration
	sbx  []time.Duration
}

func main() {
	n := flag.Int("n", 10, "rounds (runs per command and variant)")
	bin := flag.String("sandboxd", "bin/sandboxd", "the sandboxd binary")
	flag.Parse()
	if err := run(*n, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "corpus:", err)
		os.Exit(1)
	}
}

// bench is one run of the corpus.
type bench struct {
	bin, ws, reports string
	env              []string
	seq              int
	boundaries       int
	bounded          []string // jobs whose reports had boundaries
}

func run(n int, bin string) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	ws, cleanup, err := scratch.Workspace()
	if err != nil {
		return err
	}
	defer cleanup()
	reports, err := os.MkdirTemp("", "corpus-reports-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(reports)
	jobs, skipped, err := fixtures(ws)
	if err != nil {
		return err
	}
	b := &bench{bin: bin, ws: ws, reports: reports, env: append(os.Environ(),
		"GOTOOLCHAIN=local", "GOPROXY=off", "GOFLAGS=", "GOWORK=off",
		"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com",
		"GIT_CONFIG_NOSYSTEM=1")}
	if err := b.measure(jobs, n); err != nil {
		return err
	}
	b.print(jobs, n, skipped)
	return nil
}

// measure warms each job up twice per variant, then runs n rounds, bare
// and sandboxed one after the other.
func (b *bench) measure(jobs []*job, n int) error {
	for _, j := range jobs {
		for i := 0; i < 2; i++ {
			for _, sandboxed := range []bool{false, true} {
				if _, err := b.once(j, sandboxed); err != nil {
					return err
				}
			}
		}
	}
	for i := 0; i < n; i++ {
		for _, j := range jobs {
			d, err := b.once(j, false)
			if err != nil {
				return err
			}
			j.bare = append(j.bare, d)
			if d, err = b.once(j, true); err != nil {
				return err
			}
			j.sbx = append(j.sbx, d)
		}
	}
	return nil
}

// once runs j once and returns how long it took.
func (b *bench) once(j *job, sandboxed bool) (time.Duration, error) {
	b.seq++
	if j.prep != nil {
		if err := j.prep(b.seq); err != nil {
			return 0, fmt.Errorf("%s: prepare: %w", j.name, err)
		}
	}
	argv := []string{"bash", "-c", j.script(b.seq)}
	report := filepath.Join(b.reports, fmt.Sprintf("%d.json", b.seq))
	if sandboxed {
		argv = append([]string{b.bin, "run", "--report", report, "--workspace", b.ws, "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = filepath.Join(b.ws, j.dir)
	cmd.Env = b.env
	t := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(t)
	if err != nil {
		return 0, fmt.Errorf("%s (sandboxd: %v): %v\n%s", j.name, sandboxed, err, out)
	}
	if sandboxed {
		return took, b.check(j, report)
	}
	return took, nil
}

// check reads a sandboxed run's report: it must say exit 0, and any
// boundary in it is counted (the corpus should report none).
func (b *bench) check(j *job, report string) error {
	var r struct {
		ExitCode   int               `json:"exit_code"`
		Boundaries []json.RawMessage `json:"boundaries"`
	}
	data, err := os.ReadFile(report)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("%s: report: %w", report, err)
	}
	if r.ExitCode != 0 {
		return fmt.Errorf("%s: report says exit code %d", j.name, r.ExitCode)
	}
	if len(r.Boundaries) > 0 {
		b.boundaries += len(r.Boundaries)
		b.bounded = append(b.bounded, fmt.Sprintf("%s: %s", j.name, data))
	}
	return nil
}

// print writes the Markdown table and what the runs reported.
func (b *bench) print(jobs []*job, n int, skipped []string) {
	fmt.Printf("| command | bare median | sandboxd median | ratio (sandboxd/bare) | bare p90 | sandboxd p90 |\n|---|---|---|---|---|---|\n")
	for _, j := range jobs {
		bm, sm := stats.Median(j.bare), stats.Median(j.sbx)
		fmt.Printf("| %s | %s | %s | %.2f | %s | %s |\n", j.name, ms(bm), ms(sm),
			float64(sm)/float64(bm), ms(stats.Pct(j.bare, 90)), ms(stats.Pct(j.sbx, 90)))
	}
	fmt.Printf("\nN = %d rounds (runs per command and variant), after 2 warm-up runs each.\n", n)
	for _, s := range skipped {
		fmt.Printf("Left out: %s.\n", s)
	}
	total := (n + 2) * len(jobs)
	if b.boundaries == 0 {
		fmt.Printf("Boundaries reported: none, in all %d sandboxed runs (warm-ups included); every one exited 0.\n", total)
		return
	}
	fmt.Printf("WARNING: %d boundaries reported over %d sandboxed runs; the corpus should report none:\n", b.boundaries, total)
	for _, s := range b.bounded {
		fmt.Println("  " + s)
	}
}

// fixtures writes every job's files into ws and returns the jobs, and
// what was left out and why.
func fixtures(ws string) ([]*job, []string, error) {
	files := map[string]string{
		"gomod/go.mod":          "module example.com/corpus\n\ngo 1.22\n",
		"gomod/main.go":         goMain,
		"gomod/lib/lib.go":      goLib,
		"gomod/lib/stamp.go":    stamp(0),
		"gomod/lib/lib_test.go": goLibTest,
		"c/Makefile":            "OBJS = a.o b.o c.o d.o e.o\n\nprog: $(OBJS)\n\tcc -o $@ $(OBJS)\n\n%.o: %.c\n\tcc -O2 -c -o $@ $<\n\nclean:\n\trm -f prog $(OBJS)\n",
		"py/pool.py":            pyPool,
		"git/.keep":             "",
	}
	for i, f := range []string{"a", "b", "c", "d", "e"} {
		src := fmt.Sprintf("#include <stdio.h>\n\nint %s(int x) { int t = 0; for (int i = 0; i < x; i++) t += i * %d; return t; }\n", f, i+1)
		if f == "a" {
			src = "#include <stdio.h>\n\nint b(int), c(int), d(int), e(int);\n\nint main(void) { printf(\"%d\\n\", b(3) + c(4) + d(5) + e(6)); return 0; }\n"
		}
		files["c/"+f+".c"] = src
	}
	var skipped []string
	node := true
	if _, err := exec.LookPath("node"); err != nil {
		node = false
		skipped = append(skipped, "`node --test` (node is not installed)")
	} else {
		files["node/sum.test.js"] = nodeTest
	}
	for name, body := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return nil, nil, err
		}
	}
	return corpusJobs(ws, node), skipped, nil
}

// corpusJobs lists the commands timed in ws (node --test when node is
// installed).
func corpusJobs(ws string, node bool) []*job {
	stampFile := filepath.Join(ws, "gomod/lib/stamp.go")
	fixed := func(s string) func(int) string { return func(int) string { return s } }
	jobs := []*job{
		{name: "`go build ./...` (one constant changed before each run)", dir: "gomod", script: fixed("go build ./..."),
			prep: func(i int) error { return os.WriteFile(stampFile, []byte(stamp(i)), 0o644) }},
		{name: "`go test -count=1 ./...`", dir: "gomod", script: fixed("go test -count=1 ./..."),
			prep: func(int) error { return os.WriteFile(stampFile, []byte(stamp(0)), 0o644) }},
		{name: "`go vet ./...`", dir: "gomod", script: fixed("go vet ./...")},
		{name: "git: init, add 50 files, commit, branch, commit, rebase, `gc -q`", dir: "git", script: func(i int) string {
			return strings.Join([]string{
				fmt.Sprintf("git init -q -b main r%d", i), fmt.Sprintf("cd r%d", i),
				"for k in $(seq 50); do echo $k > f$k; done",
				"git add . && git commit -qm one",
				"git checkout -qb topic && echo t > t && git add t && git commit -qm two",
				"git checkout -q main && echo m > m && git add m && git commit -qm three",
				"git checkout -q topic && git rebase -q main",
				"git gc -q",
			}, " && ")
		}},
		{name: "`make` (5 C files, cc -O2; cleaned before)", dir: "c", script: fixed("make -s"),
			prep: func(int) error {
				for _, f := range []string{"prog", "a.o", "b.o", "c.o", "d.o", "e.o"} {
					if err := os.Remove(filepath.Join(ws, "c", f)); err != nil && !os.IsNotExist(err) {
						return err
					}
				}
				return nil
			}},
		{name: "python3: `Pool(2)`, spawn, 1000 squares", dir: "py", script: fixed("python3 pool.py")},
	}
	if node {
		jobs = append(jobs, &job{name: "`node --test` (one file, two tests)", dir: "node", script: fixed("node --test sum.test.js")})
	}
	return jobs
}

// The corpus's fixture sources.
const (
	goMain = `package main

import (
	"fmt"

	"example.com/corpus/lib"
)

func main() { fmt.Println(lib.Sum(lib.Squares(10)), lib.Stamp) }
`
	goLib = `// Package lib is the corpus module's library.
package lib

import "strings"

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

// Words splits s on spaces and upper-cases every word.
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

func TestWords(t *testing.T) {
	if w := Words(" a bc  d "); len(w) != 3 || w[1] != "BC" {
		t.Fatalf("Words = %q", w)
	}
}
`
	pyPool = `import multiprocessing as mp


def square(x):
    return x * x


if __name__ == "__main__":
    mp.set_start_method("spawn")
    with mp.Pool(2) as p:
        assert sum(p.map(square, range(1000))) == sum(x * x for x in range(1000))
`
	nodeTest = `const test = require('node:test');
const assert = require('node:assert');

test('sums', () => {
  assert.strictEqual([1, 2, 3].reduce((a, b) => a + b, 0), 6);
});

test('async', async () => {
  await new Promise((r) => setTimeout(r, 1));
  assert.ok(true);
});
`
)

// stamp is the Go module's one changing source file.
func stamp(i int) string {
	return fmt.Sprintf("package lib\n\n// Stamp changes before every timed build.\nconst Stamp = %d\n", i)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
