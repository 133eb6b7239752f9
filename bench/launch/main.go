// Command launch measures how long it takes to start and finish a trivial
// command under sandboxd (with and without boundary detection, with and
// without the workspace's copy-on-write layer), next to
// the same command under bare bash and under bubblewrap, interleaved in
// one run so that all see the same machine. It prints a Markdown table for docs/BENCHMARKS.md.
//
//	go run ./bench/launch -n 200 [-sandboxd bin/sandboxd] [-baseline OLD-BINARY] [-phases]
//
// With -baseline, the same sandboxd commands run under an older build
// too, interleaved with the rest, so a change's cost is measured side by
// side.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/bench/internal/scratch"
	"github.com/sandboxd/sandboxd/bench/internal/stats"
)

type contender struct {
	name string
	argv []string
	took []time.Duration
}

func main() {
	n := flag.Int("n", 200, "runs per command")
	bin := flag.String("sandboxd", "bin/sandboxd", "the sandboxd binary")
	phases := flag.Bool("phases", false, "also print where sandboxd's time goes (medians of its -v phases)")
	baseline := flag.String("baseline", "", "an older sandboxd binary to run side by side")
	flag.Parse()
	err := run(*n, *bin, *baseline)
	if err == nil && *phases {
		err = phaseTable(*n, *bin)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "launch:", err)
		os.Exit(1)
	}
}

func run(n int, bin, baseline string) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if baseline != "" {
		if baseline, err = filepath.Abs(baseline); err != nil {
			return err
		}
	}
	ws, cleanup, err := scratch.Workspace()
	if err != nil {
		return err
	}
	defer cleanup()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return fmt.Errorf("bubblewrap is needed for the baseline: %w", err)
	}
	cs := []*contender{
		{name: "bash -c true", argv: []string{"bash", "-c", "true"}},
		{name: "bwrap --unshare-all ... true", argv: []string{bwrap, "--unshare-all", "--die-with-parent",
			"--ro-bind", "/", "/", "--bind", ws, ws, "--dev", "/dev", "--proc", "/proc", "true"}},
		{name: "sandboxd run --detect off -- true", argv: []string{bin, "run", "--detect", "off", "--workspace", ws, "--", "true"}},
		{name: "sandboxd run --no-transaction -- true", argv: []string{bin, "run", "--no-transaction", "--workspace", ws, "--", "true"}},
		{name: "sandboxd run -- true", argv: []string{bin, "run", "--workspace", ws, "--", "true"}},
	}
	if baseline != "" {
		for _, c := range cs[2:] {
			cs = append(cs, &contender{name: "baseline: " + c.name, argv: append([]string{baseline}, c.argv[1:]...)})
		}
	}
	// Warm up caches (the compiled seccomp filter, page cache).
	for _, c := range cs {
		for i := 0; i < 5; i++ {
			if out, err := exec.Command(c.argv[0], c.argv[1:]...).CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %v\n%s", c.name, err, out)
			}
		}
	}
	for i := 0; i < n; i++ {
		for _, c := range cs {
			cmd := exec.Command(c.argv[0], c.argv[1:]...)
			cmd.Dir = ws
			t := time.Now()
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%s: %v", c.name, err)
			}
			c.took = append(c.took, time.Since(t))
		}
	}
	bw := stats.Median(cs[1].took)
	fmt.Printf("| command | runs | median | p10 | p90 | median / bwrap |\n|---|---|---|---|---|---|\n")
	for _, c := range cs {
		m := stats.Median(c.took)
		fmt.Printf("| `%s` | %d | %s | %s | %s | %.2f |\n", c.name, len(c.took), ms(m),
			ms(stats.Pct(c.took, 10)), ms(stats.Pct(c.took, 90)), float64(m)/float64(bw))
	}
	return nil
}

// phaseTable runs `sandboxd run -v -- true` n times and prints the median
// time at which each phase it logs was reached. Supervisor phases count
// from the start of sandbox.Run, helper phases from the helper's main.
func phaseTable(n int, bin string) error {
	ws, cleanup, err := scratch.Workspace()
	if err != nil {
		return err
	}
	defer cleanup()
	at := map[string][]time.Duration{}
	var order []string
	re := regexp.MustCompile(`msg=(supervisor|helper) phase=("[^"]*"|\S+) at_us=(\d+)`)
	for i := 0; i < n; i++ {
		out, err := exec.Command(bin, "run", "-v", "--workspace", ws, "--", "true").CombinedOutput()
		if err != nil {
			return fmt.Errorf("sandboxd run -v: %v\n%s", err, out)
		}
		for _, m := range re.FindAllStringSubmatch(string(out), -1) {
			name := m[1] + ": " + strings.Trim(m[2], `"`)
			us, _ := strconv.Atoi(m[3])
			if _, ok := at[name]; !ok {
				order = append(order, name)
			}
			at[name] = append(at[name], time.Duration(us)*time.Microsecond)
		}
	}
	fmt.Printf("\n| phase (sandboxd run -v) | reached at (median) |\n|---|---|\n")
	for _, name := range order {
		fmt.Printf("| %s | %s |\n", name, ms(stats.Median(at[name])))
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }
