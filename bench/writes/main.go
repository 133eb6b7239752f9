// Command writes times a build-like burst of file writes in the
// workspace — create, write and close 10 000 small files, then remove
// them — under bare bash, under bubblewrap and under sandboxd with
// detection off and on (when on, its seccomp filter stops every creating
// open for the supervisor to observe), with and without the copy-on-write
// layer, interleaved, and prints a Markdown table for docs/BENCHMARKS.md.
//
//	go run ./bench/writes -n 5 [-files 10000] [-sandboxd bin/sandboxd]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/sandboxd/sandboxd/bench/internal/scratch"
)

func main() {
	n := flag.Int("n", 5, "runs per command")
	files := flag.Int("files", 10000, "files per run")
	bin := flag.String("sandboxd", "bin/sandboxd", "the sandboxd binary")
	flag.Parse()
	if err := run(*n, *files, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "writes:", err)
		os.Exit(1)
	}
}

func run(n, files int, bin string) error {
	bin, _ = filepath.Abs(bin)
	ws, cleanup, err := scratch.Workspace()
	if err != nil {
		return err
	}
	defer cleanup()
	script := fmt.Sprintf(`/usr/bin/python3 -c '
import os
os.makedirs("out", exist_ok=True)
for i in range(%d):
    with open(f"out/f{i}", "w") as f: f.write("x")
for i in range(%d):
    os.unlink(f"out/f{i}")
'`, files, files)
	cs := []struct {
		name string
		argv []string
		took []time.Duration
	}{
		{name: "bash", argv: []string{"bash", "-c", script}},
		{name: "bwrap", argv: []string{"bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
			"--bind", ws, ws, "--chdir", ws, "--dev", "/dev", "--proc", "/proc", "bash", "-c", script}},
		{name: "sandboxd --detect off (nothing observed)", argv: []string{bin, "run", "--detect", "off", "--workspace", ws, "-c", script}},
		{name: "sandboxd (writes observed)", argv: []string{bin, "run", "--workspace", ws, "-c", script}},
		{name: "sandboxd --no-transaction (writes observed, straight to the workspace)", argv: []string{bin, "run", "--no-transaction", "--workspace", ws, "-c", script}},
	}
	for i := 0; i < n; i++ {
		for j := range cs {
			c := &cs[j]
			cmd := exec.Command(c.argv[0], c.argv[1:]...)
			cmd.Dir = ws
			t := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %v\n%s", c.name, err, out)
			}
			c.took = append(c.took, time.Since(t))
		}
	}
	fmt.Printf("| %d files created, written, removed | runs | median | per file |\n|---|---|---|---|\n", files)
	for _, c := range cs {
		sort.Slice(c.took, func(a, b int) bool { return c.took[a] < c.took[b] })
		m := c.took[len(c.took)/2]
		fmt.Printf("| %s | %d | %.1f ms | %.1f µs |\n", c.name, n, float64(m.Microseconds())/1000, float64(m.Microseconds())/float64(files))
	}
	return nil
}
