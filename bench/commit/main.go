// Command commit measures what the transactional layer costs a command
// that writes: many small files, and one large file. Each command runs
// under sandboxd with the layer (writes held, then committed) and with
// --no-transaction (written straight through), interleaved, next to bare
// bash writing the same, and, for the large file, to bash writing it to a
// tmpfs and cp'ing it into the workspace: the same bytes moved the same
// way as the layer and its commit, without sandboxd. The commit alone is
// taken from sandboxd's own debug log. It prints Markdown tables for
// docs/BENCHMARKS.md.
//
//	go run ./bench/commit -n 5 [-files 10000] [-big 1073741824] [-sandboxd bin/sandboxd]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/sandboxd/sandboxd/bench/internal/scratch"
)

func main() {
	n := flag.Int("n", 5, "runs per command")
	files := flag.Int("files", 10000, "small files")
	big := flag.Int64("big", 1<<30, "size of the large file in bytes")
	bin := flag.String("sandboxd", "bin/sandboxd", "the sandboxd binary")
	flag.Parse()
	if err := run(*n, *files, *big, *bin); err != nil {
		fmt.Fprintln(os.Stderr, "commit:", err)
		os.Exit(1)
	}
}

type contender struct {
	name   string
	argv   []string
	took   []time.Duration
	commit []time.Duration
}

var tookRE = regexp.MustCompile(`msg="layer committed".* took=([0-9.]+[a-zµ]+)`)

func run(n, files int, big int64, bin string) error {
	bin, _ = filepath.Abs(bin)
	ws, cleanup, err := scratch.Workspace()
	if err != nil {
		return err
	}
	defer cleanup()
	small := fmt.Sprintf(`/usr/bin/python3 -c '
import os
os.makedirs("out", exist_ok=True)
for i in range(%d):
    with open(f"out/f{i}", "w") as f: f.write("x" * 100)
'`, files)
	large := fmt.Sprintf("head -c %d /dev/zero > big", big)
	src := "/dev/shm/sandboxd-bench-big"
	defer os.Remove(src)
	for _, w := range []struct {
		title, script, copy string
	}{
		{fmt.Sprintf("%d files of 100 bytes", files), small, ""},
		{fmt.Sprintf("one file of %d MiB", big>>20), large, fmt.Sprintf("head -c %d /dev/zero > %s && cp %s big && rm %s", big, src, src, src)},
	} {
		cs := []*contender{
			{name: "bash", argv: []string{"bash", "-c", w.script}},
			{name: "sandboxd --no-transaction", argv: []string{bin, "run", "--no-transaction", "--workspace", ws, "-c", w.script}},
			{name: "sandboxd (layer, then commit)", argv: []string{bin, "run", "-v", "--workspace", ws, "-c", w.script}},
		}
		if w.copy != "" {
			cs = append(cs, &contender{name: "bash: write to tmpfs, then cp (the layer's path without sandboxd)", argv: []string{"bash", "-c", w.copy}})
		}
		for i := 0; i < n; i++ {
			for _, c := range cs {
				os.RemoveAll(filepath.Join(ws, "out"))
				os.Remove(filepath.Join(ws, "big"))
				exec.Command("sync").Run()
				cmd := exec.Command(c.argv[0], c.argv[1:]...)
				cmd.Dir = ws
				t := time.Now()
				out, err := cmd.CombinedOutput()
				if err != nil {
					return fmt.Errorf("%s: %v\n%s", c.name, err, out)
				}
				c.took = append(c.took, time.Since(t))
				if m := tookRE.FindSubmatch(out); m != nil {
					if d, err := time.ParseDuration(string(m[1])); err == nil {
						c.commit = append(c.commit, d)
					}
				}
			}
		}
		fmt.Printf("\n| %s | runs | median | commit alone (median) |\n|---|---|---|---|\n", w.title)
		for _, c := range cs {
			commit := "—"
			if len(c.commit) > 0 {
				commit = ms(median(c.commit))
			}
			fmt.Printf("| %s | %d | %s | %s |\n", c.name, len(c.took), ms(median(c.took)), commit)
		}
	}
	return nil
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
