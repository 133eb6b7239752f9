// Command audit measures the audit log (package audit): Append's
// throughput with one writer, with 4 goroutines of one process and with
// 4 processes on one chain; Append's latency for a realistic decision
// event (about 600 bytes on its line), which is what an audit write adds
// to one decision; and Verify over a log of a million records with
// GOMAXPROCS=1 (one core). It prints Markdown for docs/BENCHMARKS.md.
//
//	go run ./bench/audit [-dir /var/lib/sandboxd-bench] [-n 200000] [-verify 1000000] [-runs 3]
//
// The log is written on -dir's file system (a disk, not a tmpfs, for the
// figures to mean anything) and removed at the end. Appends are durable
// as the package promises (the write returned); checkpoints sync.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/bench/internal/stats"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-child" {
		child(os.Args[2:])
		return
	}
	dir := flag.String("dir", ".", "directory to make the throw-away log in (on the disk to measure)")
	n := flag.Int("n", 200000, "appends per throughput case")
	verifyN := flag.Int("verify", 1000000, "records in the log Verify reads")
	runs := flag.Int("runs", 3, "Verify runs")
	flag.Parse()
	ctx := context.Background()
	base, err := os.MkdirTemp(*dir, "audit-bench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(base)

	fmt.Printf("| case | appends | time | appends/s | p50 | p99 |\n|---|---|---|---|---|---|\n")
	lat, d := appendCase(ctx, filepath.Join(base, "one"), *n, 1)
	row("one writer", *n, d, lat)
	lat, d = appendCase(ctx, filepath.Join(base, "goroutines"), *n, 4)
	row("4 goroutines, one process", *n, d, lat)
	d = processCase(filepath.Join(base, "procs"), *n, 4)
	row("4 processes", *n, d, nil)

	cfg := config(filepath.Join(base, "verify"))
	appendCase(ctx, cfg.Dir, *verifyN-2-*verifyN/1024, 1) // genesis and checkpoints make up the rest
	files, err := audit.Files(cfg.Dir)
	if err != nil {
		log.Fatal(err)
	}
	pub, err := audit.ReadPublicKey(filepath.Join(cfg.Dir, audit.PublicKeyName))
	if err != nil {
		log.Fatal(err)
	}
	var size int64
	for _, f := range files {
		st, _ := os.Stat(f)
		size += st.Size()
	}
	runtime.GOMAXPROCS(1)
	fmt.Printf("\n| Verify, GOMAXPROCS=1 | records | files | bytes | time | records/s |\n|---|---|---|---|---|---|\n")
	for r := range *runs {
		start := time.Now()
		s, err := audit.Verify(ctx, files, pub)
		el := time.Since(start)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("| run %d | %d | %d | %d | %.2f s | %.0f |\n", r+1, s.Records, s.Files, size, el.Seconds(), float64(s.Records)/el.Seconds())
	}
}

func config(dir string) audit.Config {
	return audit.Config{Dir: dir, KeyFile: filepath.Join(filepath.Dir(dir), "audit.key")}
}

// appendCase appends n decisions from g goroutines and returns each
// Append's latency and the whole time.
func appendCase(ctx context.Context, dir string, n, g int) ([]time.Duration, time.Duration) {
	l, err := audit.Open(ctx, config(dir))
	if err != nil {
		log.Fatal(err)
	}
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range g {
		wg.Go(func() {
			for i := w; i < n; i += g {
				t := time.Now()
				if _, err := l.Append(ctx, decision(i)); err != nil {
					log.Fatal(err)
				}
				lat[i] = time.Since(t)
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	if err := l.Close(ctx); err != nil {
		log.Fatal(err)
	}
	return lat, d
}

// processCase runs p processes of this program appending n/p each.
func processCase(dir string, n, p int) time.Duration {
	l, err := audit.Open(context.Background(), config(dir))
	if err != nil {
		log.Fatal(err)
	}
	l.Close(context.Background())
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	var cmds []*exec.Cmd
	start := time.Now()
	for range p {
		cmd := exec.Command(self, "-child", dir, strconv.Itoa(n/p))
		cmd.Dir, cmd.Env, cmd.Stderr = dir, os.Environ(), os.Stderr
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			log.Fatal(err)
		}
	}
	return time.Since(start)
}

func child(args []string) {
	n, _ := strconv.Atoi(args[1])
	appendCase(context.Background(), args[0], n, 1)
}

func row(name string, n int, d time.Duration, lat []time.Duration) {
	p50, p99 := "–", "–"
	if lat != nil {
		s := stats.Sorted(lat)
		p50, p99 = fmt.Sprintf("%.1f µs", us(stats.Pct(s, 50))), fmt.Sprintf("%.1f µs", us(stats.Pct(s, 99)))
	}
	fmt.Printf("| %s | %d | %.2f s | %.0f | %s | %s |\n", name, n, d.Seconds(), float64(n)/d.Seconds(), p50, p99)
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// decision is a realistic decision event: about 600 bytes on its line.
func decision(i int) audit.Event {
	uid := 1000 + i%3
	return audit.Event{Kind: audit.KindDecision, UID: &uid, Session: "0b6f1c9e-5a1d-4f3e-9d2c-1f7e8a9b0c3d", Agent: "claude-code",
		Command: "npm install --save-dev typescript@5.9 && npx tsc -p tsconfig.build.json", Cwd: "/home/dev/src/webapp",
		Surface: "network", Operation: "connect", Target: "registry.npmjs.org:443",
		RequestHash: "9f2c1b7e4d3a5f6e8b0c1d2e3f405162738495a6b7c8d9e0f1a2b3c4d5e6f708", Outcome: "allow", Source: "model",
		Risk: "low", Authorization: "the user asked to install the TypeScript compiler",
		Rationale: "Installing a pinned dev dependency from the public npm registry matches the user's request.",
		ReviewMS:  int64(800 + i%700), Note: "event " + strconv.Itoa(i)}
}
