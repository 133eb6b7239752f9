// Command session times an agent-like session of 30 everyday commands
// (ls, cat, grep, sed, find, git status/diff/log/commit, go test and vet,
// node --test, pytest, two edits) in a small project, as whole
// sessions: bare (`bash -c CMD` in the workspace), through a daemon of
// the benchmark's own (`sandboxd run --daemon --workspace WS -- bash -c
// CMD`, sandboxd serve with its pool of ready helpers; root only) and
// embedded (`sandboxd run --no-daemon ...`). It prints a Markdown table
// for docs/BENCHMARKS.md.
//
//	go run ./bench/session -n 5 [-sandboxd bin/sandboxd]
//
// After one warm-up session of each variant, round i runs one session
// of each, in an order that rotates with i. A session's time is the sum
// of its commands' wall times; between sessions the project is reset,
// untimed, to the commit and the uncommitted change every session starts
// from. Every command must exit as it did bare, and every sandboxed
// one's report must say the same and show no boundary, or the benchmark
// fails. Go's test results are cached after the warm-up in every
// variant, as for an agent that re-runs unchanged tests.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/bench/internal/scratch"
	"github.com/sandboxd/sandboxd/bench/internal/served"
	"github.com/sandboxd/sandboxd/bench/internal/stats"
)

// A variant is one way of running the session's commands.
type variant int

const (
	bare variant = iota
	viaDaemon
	embedded
	nVariants
)

func (v variant) String() string {
	return [...]string{"bare (`bash -c CMD`)", "`sandboxd run --daemon`", "`sandboxd run --no-daemon` (embedded)"}[v]
}

func main() {
	n := flag.Int("n", 5, "rounds (timed sessions per variant)")
	bin := flag.String("sandboxd", "bin/sandboxd", "the sandboxd binary")
	flag.Parse()
	if err := run(*n, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "session:", err)
		os.Exit(1)
	}
}

// bench is one run of the benchmark.
type bench struct {
	bin, ws, reports, base string
	env                    []string
	steps                  []step
	d                      *served.Daemon
	seq                    int
	// end is the project's tree and status after the first session;
	// every session must leave the same.
	end string
	// took[v][i] are step i's times in variant v's timed sessions.
	took [nVariants][][]time.Duration
	// total and cpu are each timed session's wall time and the CPU
	// time of the processes it started, with their children.
	total, cpu [nVariants][]time.Duration
	// daemonCPU is the daemon's CPU over the timed daemon sessions.
	daemonCPU served.CPU
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
	reports, err := os.MkdirTemp("", "session-reports-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(reports)
	b := &bench{bin: bin, ws: ws, reports: reports, env: append(os.Environ(),
		"GOTOOLCHAIN=local", "GOPROXY=off", "GOFLAGS=-mod=mod", "GOWORK=off",
		"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_PAGER=cat", "PAGER=cat")}
	python := pythonWithPytest(b.env)
	if python == "" {
		return errors.New("neither python3 on PATH nor /usr/bin/python3 has pytest")
	}
	if _, err := exec.LookPath("node"); err != nil {
		return fmt.Errorf("node is needed for `node --test`: %w", err)
	}
	b.steps = steps(python)
	if b.base, err = makeProject(ws, b.env); err != nil {
		return err
	}
	if b.d, err = served.Start(bin); err != nil {
		return err
	}
	defer b.d.Stop()
	load0 := loadAverage()
	pool0, err := b.measure(n)
	if err != nil {
		return err
	}
	b.print(n, pool0, load0)
	return nil
}

// measure runs a warm-up session of each variant, then n rounds, and
// returns the daemon's pool figures as the warm-up left them.
func (b *bench) measure(n int) (map[string]float64, error) {
	for v := range nVariants {
		b.took[v] = make([][]time.Duration, len(b.steps))
		if err := b.session(v, false); err != nil {
			return nil, err
		}
	}
	pool0, err := b.d.Pool()
	if err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		for k := range nVariants {
			if err := b.session((variant(i)+k)%nVariants, true); err != nil {
				return nil, err
			}
		}
	}
	return pool0, nil
}

// session resets the project and runs the session's steps in variant v,
// recording their times when timed.
func (b *bench) session(v variant, timed bool) error {
	if err := resetProject(b.ws, b.env, b.base); err != nil {
		return err
	}
	var total, cpu time.Duration
	d0 := served.ReadCPU(b.d.Pid)
	for i, s := range b.steps {
		took, used, err := b.once(v, s)
		if err != nil {
			return fmt.Errorf("%s, step %d `%s`: %w", v, i+1, s.cmd, err)
		}
		total += took
		cpu += used
		if timed {
			b.took[v][i] = append(b.took[v][i], took)
		}
	}
	if err := b.checkEnd(v); err != nil {
		return err
	}
	if timed {
		b.total[v] = append(b.total[v], total)
		b.cpu[v] = append(b.cpu[v], cpu)
		if v == viaDaemon {
			b.daemonCPU = b.daemonCPU.Add(served.ReadCPU(b.d.Pid).Sub(d0))
		}
	}
	return nil
}

// once runs a step in variant v and returns its wall time and the CPU
// time of the process it started, with its children. It must exit as
// the step does bare, and a sandboxed run's report must agree and show
// no boundary.
func (b *bench) once(v variant, s step) (time.Duration, time.Duration, error) {
	b.seq++
	report := filepath.Join(b.reports, fmt.Sprintf("%d.json", b.seq))
	argv := []string{"bash", "-c", s.cmd}
	env := b.env
	switch v {
	case viaDaemon:
		argv = append([]string{b.bin, "run", "--daemon", "--report", report, "--workspace", b.ws, "--"}, argv...)
		env = append(env[:len(env):len(env)], "SANDBOXD_SOCKET="+b.d.Socket)
	case embedded:
		argv = append([]string{b.bin, "run", "--no-daemon", "--report", report, "--workspace", b.ws, "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = b.ws, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t := time.Now()
	err := cmd.Run()
	took := time.Since(t)
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return 0, 0, err
	}
	status := cmd.ProcessState.ExitCode()
	used := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if status != s.exit {
		return 0, 0, fmt.Errorf("exit status %d, bare %d:\n%s", status, s.exit, out.Bytes())
	}
	if v != bare {
		if err := checkReport(report, status); err != nil {
			return 0, 0, fmt.Errorf("%w\n%s", err, out.Bytes())
		}
	}
	return took, used, nil
}

// checkEnd compares the project's committed tree and its status after a
// session with the first session's: the edits and the commit must have
// landed in the workspace alike in every variant.
func (b *bench) checkEnd(v variant) error {
	tree, err := gitIn(b.ws, b.env, "rev-parse", "HEAD^{tree}")
	if err != nil {
		return err
	}
	status, err := gitIn(b.ws, b.env, "status", "--porcelain")
	if err != nil {
		return err
	}
	end := tree + status
	if b.end == "" {
		b.end = end
	}
	if end != b.end {
		return fmt.Errorf("%s: the session left the project as\n%s\nnot as the first did:\n%s", v, end, b.end)
	}
	return nil
}

// checkReport reads a sandboxed run's report: it must give the exit
// status the process had, no error and no boundary.
func checkReport(report string, status int) error {
	var r struct {
		ExitCode   int               `json:"exit_code"`
		Error      string            `json:"error"`
		Boundaries []json.RawMessage `json:"boundaries"`
	}
	data, err := os.ReadFile(report)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("%s: report: %w", report, err)
	}
	switch {
	case r.ExitCode != status:
		return fmt.Errorf("the report says exit code %d, the process exited %d: %s", r.ExitCode, status, data)
	case r.Error != "":
		return fmt.Errorf("the report has an error: %s", data)
	case len(r.Boundaries) > 0:
		return fmt.Errorf("the report shows %d boundaries (the session should cross none): %s", len(r.Boundaries), data)
	}
	return nil
}

// print writes the tables: the sessions, the daemon's pool and CPU, and
// each step's medians.
func (b *bench) print(n int, pool0 map[string]float64, load0 string) {
	bm := stats.Median(b.total[bare])
	fmt.Printf("| variant | sessions (N) | total, median | p10 | p90 | median / bare | added per command | CPU of the processes started, per session (median) |\n|---|---|---|---|---|---|---|---|\n")
	for v := range nVariants {
		t := b.total[v]
		m := stats.Median(t)
		fmt.Printf("| %s | %d | %s | %s | %s | %.2f | %s | %s |\n", v, len(t), sec(m), sec(stats.Pct(t, 10)),
			sec(stats.Pct(t, 90)), float64(m)/float64(bm), ms((m-bm)/time.Duration(len(b.steps))), sec(stats.Median(b.cpu[v])))
	}
	per := b.daemonCPU.Per(n)
	fmt.Printf("\n%d commands per session; one warm-up session per variant before the %d rounds; "+
		"CPU is the started processes' own with their children's (user+sys).\n", len(b.steps), n)
	fmt.Printf("The daemon's CPU per session (mean, /proc/PID/stat, its idle time between the runs included): "+
		"its own %s + its helpers' with their commands %s.\n", sec(per.Self), sec(per.Children))
	figures := "pool: no figures"
	if pool, err := b.d.Pool(); err == nil {
		figures = served.PoolFigures(pool0, pool)
	}
	fmt.Printf("The daemon's %s, over the timed sessions.\n", figures)
	fmt.Printf("Load average (1, 5, 15 min) before the warm-up: %s; after: %s.\n", load0, loadAverage())
	fmt.Printf("\n| # | command | bare median | daemon median | daemon − bare | embedded median |\n|---|---|---|---|---|---|\n")
	for i, s := range b.steps {
		bs, ds, es := stats.Median(b.took[bare][i]), stats.Median(b.took[viaDaemon][i]), stats.Median(b.took[embedded][i])
		fmt.Printf("| %d | `%s` | %s | %s | %s | %s |\n", i+1, oneLine(s.cmd), ms(bs), ms(ds), ms(ds-bs), ms(es))
	}
}

// oneLine is a step as a table cell shows it: a heredoc by its first line.
func oneLine(step string) string {
	if first, _, ok := strings.Cut(step, "\n"); ok {
		step = first + " …"
	}
	return strings.ReplaceAll(step, "|", `\|`)
}

// loadAverage is /proc/loadavg's first three fields.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], ", ")
	}
	return "unknown"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func sec(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }
