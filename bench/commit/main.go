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
//	go run ./bench/commit -n 5 [-files 10000,30000] [-big 1073741824] [-dir /var/lib/sandboxd-bench] [-sandboxd bin/sandboxd] [-before OLD-BINARY] [-detect-off]
//
// -before adds another sandboxd binary's layer runs to the same
// interleaved loop (a change's before and after, side by side);
// -detect-off adds both sandboxd modes with --detect off (no write
// observed), which leaves the layer and its commit alone against bash.
//
// The workspace must be on a disk (not a tmpfs) for the figures to mean
// anything: -dir says where it is made. Between runs the small files are
// moved out of the workspace, not deleted, and deleted only at the end:
// ext4 without a journal skips, one by one, every inode freed in the last
// minute when it allocates one (recently_deleted), in the last six while
// the inode table's block is not written back (and each new inode in it
// dirties it again), so deleting tens of thousands of files between runs
// makes the next runs' creations scan past them and vary tenfold. For the
// same reason the command first syncs and waits -settle for deletions
// made before it (by an earlier run of it, say) to age.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	n := flag.Int("n", 5, "runs per command")
	files := flag.String("files", "10000,30000", "small-file cases: files per case, comma-separated (empty: none)")
	big := flag.Int64("big", 1<<30, "size of the large file in bytes (0: no large-file case)")
	bin := flag.String("sandboxd", "bin/sandboxd", "the sandboxd binary")
	dir := flag.String("dir", ".", "directory to make the throw-away workspace in (on the disk to measure)")
	settle := flag.Duration("settle", 7*time.Minute, "wait before the first run, for inodes freed earlier to age (see the doc)")
	before := flag.String("before", "", "another sandboxd binary whose layer runs join the loop")
	detectOff := flag.Bool("detect-off", false, "add both sandboxd modes with --detect off")
	flag.Parse()
	var counts []int
	for _, f := range strings.Split(*files, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		c, err := strconv.Atoi(f)
		if err != nil || c <= 0 {
			fmt.Fprintln(os.Stderr, "commit: bad -files", *files)
			os.Exit(2)
		}
		counts = append(counts, c)
	}
	if err := run(*n, counts, *big, *bin, *dir, *settle, *before, *detectOff); err != nil {
		fmt.Fprintln(os.Stderr, "commit:", err)
		os.Exit(1)
	}
}

type contender struct {
	name   string
	argv   []string
	took   []time.Duration
	cpu    []time.Duration // user + system, the command's whole tree
	commit []time.Duration
}

var tookRE = regexp.MustCompile(`msg="layer committed".* took=([0-9.]+[a-zµ]+)`)

type workload struct {
	title, script, copy string
}

func run(n int, counts []int, big int64, bin, dir string, settle time.Duration, before string, detectOff bool) error {
	bin, _ = filepath.Abs(bin)
	if before != "" {
		before, _ = filepath.Abs(before)
	}
	root, err := os.MkdirTemp(dir, ".bench-ws-")
	if err != nil {
		return err
	}
	root, _ = filepath.Abs(root)
	defer func() {
		os.RemoveAll(root)
		exec.Command("sync").Run()
	}()
	ws, aside := filepath.Join(root, "ws"), filepath.Join(root, "aside")
	if err := os.Mkdir(ws, 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(aside, 0o755); err != nil {
		return err
	}
	var loads []workload
	for _, files := range counts {
		loads = append(loads, workload{title: fmt.Sprintf("%d files of 100 bytes", files), script: fmt.Sprintf(`/usr/bin/python3 -c '
import os
os.makedirs("out", exist_ok=True)
for i in range(%d):
    with open(f"out/f{i}", "w") as f: f.write("x" * 100)
'`, files)})
	}
	if big > 0 {
		src := "/dev/shm/sandboxd-bench-big"
		defer os.Remove(src)
		loads = append(loads, workload{title: fmt.Sprintf("one file of %d MiB", big>>20), script: fmt.Sprintf("head -c %d /dev/zero > big", big),
			copy: fmt.Sprintf("head -c %d /dev/zero > %s && cp %s big && rm %s", big, src, src, src)})
	}
	exec.Command("sync").Run()
	time.Sleep(settle)
	moved := 0
	for _, w := range loads {
		cs := contenders(w.script, bin, ws, before, detectOff)
		if w.copy != "" {
			cs = append(cs, &contender{name: "bash: write to tmpfs, then cp (the layer's path without sandboxd)", argv: []string{"bash", "-c", w.copy}})
		}
		// A new order each round (the same sequence every time the
		// benchmark runs): no contender always runs after the same other.
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < n; i++ {
			for _, k := range rng.Perm(len(cs)) {
				c := cs[k]
				// Out of the workspace (and of its scan), not deleted.
				if err := os.Rename(filepath.Join(ws, "out"), filepath.Join(aside, strconv.Itoa(moved))); err == nil {
					moved++
				}
				os.Remove(filepath.Join(ws, "big"))
				exec.Command("sync").Run()
				if err := c.once(ws); err != nil {
					return err
				}
			}
		}
		fmt.Printf("\n| %s | runs | median | × bash | CPU (median) | commit alone (median) |\n|---|---|---|---|---|---|\n", w.title)
		for _, c := range cs {
			commit := "—"
			if len(c.commit) > 0 {
				commit = ms(median(c.commit))
			}
			fmt.Printf("| %s | %d | %s | %.2f | %s | %s |\n", c.name, len(c.took), ms(median(c.took)),
				float64(median(c.took))/float64(median(cs[0].took)), ms(median(c.cpu)), commit)
		}
	}
	return nil
}

// contenders are the commands that run script in the workspace ws.
func contenders(script, bin, ws, before string, detectOff bool) []*contender {
	cs := []*contender{
		{name: "bash", argv: []string{"bash", "-c", script}},
		{name: "sandboxd --no-transaction", argv: []string{bin, "run", "--no-transaction", "--workspace", ws, "-c", script}},
		{name: "sandboxd (layer, then commit)", argv: []string{bin, "run", "-v", "--workspace", ws, "-c", script}},
	}
	if before != "" {
		cs = append(cs, &contender{name: "sandboxd before (layer, then commit)", argv: []string{before, "run", "-v", "--workspace", ws, "-c", script}})
	}
	if detectOff {
		cs = append(cs,
			&contender{name: "sandboxd --detect off --no-transaction", argv: []string{bin, "run", "--detect", "off", "--no-transaction", "--workspace", ws, "-c", script}},
			&contender{name: "sandboxd --detect off (layer, then commit)", argv: []string{bin, "run", "-v", "--detect", "off", "--workspace", ws, "-c", script}})
		if before != "" {
			cs = append(cs, &contender{name: "sandboxd before --detect off (layer, then commit)", argv: []string{before, "run", "-v", "--detect", "off", "--workspace", ws, "-c", script}})
		}
	}
	return cs
}

// once runs c in the workspace ws and records its time, its CPU and, from
// sandboxd's log, its commit's.
func (c *contender) once(ws string) error {
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Dir = ws
	t := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", c.name, err, out)
	}
	c.took = append(c.took, time.Since(t))
	c.cpu = append(c.cpu, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
	if m := tookRE.FindSubmatch(out); m != nil {
		if d, err := time.ParseDuration(string(m[1])); err == nil {
			c.commit = append(c.commit, d)
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
