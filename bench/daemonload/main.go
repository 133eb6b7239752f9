// Command daemonload measures the daemon under load against the same work
// done embedded: 200 commands at once plus 1000 boundary decisions.
//
//	go run ./bench/daemonload [-sandboxd bin/sandboxd] [-execs 200] [-reviews 1000] [-rounds 3]
//
// Through the daemon (root; a daemon of the benchmark's own): execs
// commands at once through POST /v1/exec while reviews boundaries are
// decided through POST /v1/review by 16 clients. Embedded: execs
// `sandboxd run --no-daemon` processes at once whose commands meet
// reviews/execs boundaries each (secrets read, files written outside
// the workspace), so the same number of commands and decisions is done.
// Rounds alternate the two. It prints, per side, the wall time, the
// commands and decisions per second, the p50 and p99 of a command's
// latency (and of a review's), and the peaks of the summed resident (RSS)
// and proportional (PSS) memory of every process involved (the daemon
// and its sandboxes, or every embedded run and its sandbox), sampled
// every 50 ms.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/bench/internal/scratch"
	"github.com/sandboxd/sandboxd/bench/internal/stats"
	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/internal/proctree"
)

// outcome is one side's round.
type outcome struct {
	wall             time.Duration
	execs, reviews   []time.Duration
	peakRSS, peakPSS int64 // KiB
	failed           int
	commands, checks int
}

func main() {
	bin := flag.String("sandboxd", "bin/sandboxd", "the sandboxd binary")
	execs := flag.Int("execs", 200, "commands at once")
	reviews := flag.Int("reviews", 1000, "boundary decisions")
	rounds := flag.Int("rounds", 3, "rounds of each side, alternated")
	flag.Parse()
	if err := run(*bin, *execs, *reviews, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "daemonload:", err)
		os.Exit(1)
	}
}

func run(bin string, execs, reviews, rounds int) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the daemon runs as root")
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	ws, cleanup, err := scratch.Workspace()
	if err != nil {
		return err
	}
	defer cleanup()
	home, outside := ws+"-home", ws+"-outside"
	defer os.RemoveAll(home)
	for _, d := range []string{filepath.Join(home, ".ssh"), outside} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	defer os.RemoveAll(outside)
	os.WriteFile(filepath.Join(home, ".ssh", "id_rsa"), []byte("-----BEGIN KEY-----\n"), 0o600)
	socket, pid, stop, err := startDaemon(bin, execs)
	if err != nil {
		return err
	}
	defer stop()
	c, err := daemon.Connect(context.Background(), socket, 0)
	if err != nil {
		return err
	}
	w := work{bin: bin, ws: ws, home: home, outside: outside, execs: execs, reviews: reviews}
	var viaDaemon, embedded []outcome
	for r := range rounds {
		fmt.Fprintf(os.Stderr, "round %d of %d\n", r+1, rounds)
		viaDaemon = append(viaDaemon, w.throughDaemon(c, pid))
		embedded = append(embedded, w.embedded())
	}
	fmt.Printf("%d commands at once and %d boundary decisions, %d rounds alternated (medians of the rounds; latencies over every round)\n\n", execs, reviews, rounds)
	fmt.Println("| | wall | commands/s | decisions/s | command p50 | command p99 | review p50 | review p99 | peak RSS, summed | peak PSS, summed | failed |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	row("through the daemon", viaDaemon)
	row("embedded (sandboxd run --no-daemon)", embedded)
	return nil
}

func row(name string, rounds []outcome) {
	var walls, ex, rv []time.Duration
	var rss, pss []time.Duration // KiB, carried as durations for stats
	failed, commands, checks := 0, 0, 0
	for _, o := range rounds {
		walls, ex, rv = append(walls, o.wall), append(ex, o.execs...), append(rv, o.reviews...)
		rss, pss = append(rss, time.Duration(o.peakRSS)), append(pss, time.Duration(o.peakPSS))
		failed, commands, checks = failed+o.failed, o.commands, o.checks
	}
	wall := stats.Median(walls)
	review := func(p int) string {
		if len(rv) == 0 {
			return "(in the runs)"
		}
		return ms(stats.Pct(rv, p))
	}
	fmt.Printf("| %s | %.2f s | %.1f | %.1f | %s | %s | %s | %s | %.0f MiB | %.0f MiB | %d |\n", name, wall.Seconds(),
		float64(commands)/wall.Seconds(), float64(checks)/wall.Seconds(), ms(stats.Pct(ex, 50)), ms(stats.Pct(ex, 99)),
		review(50), review(99), float64(stats.Median(rss))/1024, float64(stats.Median(pss))/1024, failed)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000) }

// work is what each side does.
type work struct {
	bin, ws, home, outside string
	execs, reviews         int
}

// boundariesPerRun is how many boundaries each embedded command meets so
// that the embedded side decides as many as the daemon's reviews.
func (w work) boundariesPerRun() int { return max(1, w.reviews/w.execs) }

// throughDaemon runs one round through the daemon pid.
func (w work) throughDaemon(c *daemon.Client, pid int) outcome {
	ctx := context.Background()
	dctx := daemon.Context{Env: []string{"HOME=" + w.home, "PATH=/usr/bin:/bin"}, Cwd: w.ws, Workspace: w.ws, Umask: 0o22, Session: "bench"}
	out := outcome{commands: w.execs, checks: w.reviews}
	var mu sync.Mutex
	sample := sampleMemory(func() []int { return append(proctree.Descendants(pid), pid) })
	start := time.Now()
	var wg sync.WaitGroup
	for i := range w.execs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			code := -1
			err := c.Exec(ctx, daemon.ExecRequest{Argv: []string{"bash", "-c", fmt.Sprintf("echo %d > f%d; cat f%d >/dev/null", i, i, i)},
				Context: dctx, Retries: 1}, nil, func(l daemon.ExecLine) {
				if n, ok := l.ExitCode(); l.Type == "report" && ok {
					code = n
				}
			})
			mu.Lock()
			out.execs = append(out.execs, time.Since(t0))
			if err != nil || code != 0 {
				out.failed++
			}
			mu.Unlock()
		}()
	}
	jobs := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				q := daemon.ReviewRequest{Context: dctx, Surface: "filesystem", Operation: "make_reg", Path: filepath.Join(w.outside, fmt.Sprintf("r%d", i)), Command: "touch x"}
				if i%2 == 0 {
					q.Operation, q.Path = "read_file", filepath.Join(w.home, ".ssh", "id_rsa")
				}
				t0 := time.Now()
				var a daemon.ReviewAnswer
				err := c.Do(ctx, "POST", "/v1/review", q, &a)
				mu.Lock()
				out.reviews = append(out.reviews, time.Since(t0))
				if err != nil {
					out.failed++
				}
				mu.Unlock()
			}
		}()
	}
	for i := range w.reviews {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	out.wall = time.Since(start)
	out.peakRSS, out.peakPSS = sample()
	c.CloseIdle()
	return out
}

// embedded runs one round of embedded runs.
func (w work) embedded() outcome {
	out := outcome{commands: w.execs, checks: w.execs * w.boundariesPerRun()}
	var mu sync.Mutex
	var pids sync.Map
	sample := sampleMemory(func() []int {
		var all []int
		pids.Range(func(k, _ any) bool {
			all = append(all, k.(int))
			all = append(all, proctree.Descendants(k.(int))...)
			return true
		})
		return all
	})
	start := time.Now()
	var wg sync.WaitGroup
	for i := range w.execs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			script := fmt.Sprintf("echo %d > f%d; cat f%d >/dev/null", i, i, i)
			for b := range w.boundariesPerRun() {
				if b%2 == 0 {
					script += "; cat ~/.ssh/id_rsa 2>/dev/null"
				} else {
					script += fmt.Sprintf("; touch %s 2>/dev/null", filepath.Join(w.outside, fmt.Sprintf("e%d-%d", i, b)))
				}
			}
			cmd := exec.Command(w.bin, "run", "--no-daemon", "--workspace", w.ws, "--session", "bench", "--retries", "1", "-c", script+"; true")
			cmd.Dir, cmd.Env = w.ws, []string{"HOME=" + w.home, "PATH=/usr/bin:/bin"}
			t0 := time.Now()
			err := cmd.Start()
			if err == nil {
				pids.Store(cmd.Process.Pid, true)
				err = cmd.Wait()
				pids.Delete(cmd.Process.Pid)
			}
			mu.Lock()
			out.execs = append(out.execs, time.Since(t0))
			if err != nil {
				out.failed++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	out.wall = time.Since(start)
	out.peakRSS, out.peakPSS = sample()
	return out
}

// sampleMemory samples the summed resident (RSS) and proportional (PSS)
// memory of the processes pids names every 50 ms until the returned
// function is called, which returns the peaks in KiB. RSS counts a page
// shared by many processes (the binary's text) in each; PSS shares it
// out, so its sum is what they hold together.
func sampleMemory(pids func() []int) func() (int64, int64) {
	done, result := make(chan struct{}), make(chan [2]int64)
	go func() {
		var peak [2]int64
		for {
			var rss, pss int64
			for _, p := range pids() {
				rss += proctree.RSS(p)
				pss += proctree.PSS(p)
			}
			peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
			select {
			case <-done:
				result <- peak
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() (int64, int64) { close(done); p := <-result; return p[0], p[1] }
}

// startDaemon starts `sandboxd serve` on a socket of the benchmark's own.
func startDaemon(bin string, execs int) (string, int, func(), error) {
	dir, cleanup, err := scratch.Workspace()
	if err != nil {
		return "", 0, nil, err
	}
	socket := filepath.Join(dir, "run", "sandboxd.sock")
	d := exec.Command(bin, "serve", "--socket", socket, "--max-execs", strconv.Itoa(execs),
		"--audit-dir", filepath.Join(dir, "audit"), "--audit-key", filepath.Join(dir, "audit.key"))
	d.Dir, d.Env = "/", os.Environ()
	if err := d.Start(); err != nil {
		cleanup()
		return "", 0, nil, err
	}
	stop := func() {
		d.Process.Signal(os.Interrupt)
		d.Wait()
		cleanup()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(socket); err == nil {
			return socket, d.Process.Pid, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", 0, nil, fmt.Errorf("the daemon did not listen")
		}
	}
}
