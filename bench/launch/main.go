// Command launch measures how long it takes to start and finish a trivial
// command under sandboxd (with and without boundary detection, with and
// without the workspace's copy-on-write layer), next to
// the same command under bare bash and under bubblewrap, interleaved in
// one run so that all see the same machine. It prints a Markdown table for docs/BENCHMARKS.md.
//
//	go run ./bench/launch -n 200 [-sandboxd bin/sandboxd] [-baseline OLD-BINARY] [-phases] [-home-files 100000] [-daemon] [-ws-policy FILE]
//
// Each command's CPU time (user+sys, with the children it waited for)
// is printed beside its wall time; a run through a daemon adds the
// daemon's CPU time, its own and its helpers'.
//
// After each run the benchmark waits until the machine's processors are
// idle again (bench/internal/quiet), so that what one run leaves to do
// after its end (a daemon's release of its helper and the pool's refill
// after the report, the kernel's teardown of bubblewrap's network
// namespace) is not timed in the next run, which is another contender's;
// the daemon's CPU per run counts it. The waits are printed below the
// table.
//
// With -daemon (root), sandboxd also runs through a daemon of the
// benchmark's own (sandboxd serve; sandboxd run --daemon), once with its
// pool of ready helpers and once without (serve --ready-helpers 0: every
// run a miss), each daemon's pool figures printed after the table; and as
// an agent adapter's request straight to the first daemon's socket (no
// client process). With -baseline too, the older build's daemon runs
// beside them.
//
// With -phases, the runs are repeated with -v and every phase the
// client, the daemon, the session, the supervisor and the helper log is
// placed on one time line from the client's launch, with the CPU time
// its process spent since its mark before (phases.go); with -daemon too,
// for runs through a daemon of its own that logs (sandboxd serve -v).
//
// With -home-files, sandboxd also runs with HOME set to an empty home
// and to a home of that many files (the credential scan walks it): with
// the scan's index as the previous run left it, and with the index
// removed before each run (the first launch after an upgrade).
// With -ws-policy, FILE is every run's workspace policy (copied into
// the scratch workspace as .sandboxd.toml before the warm-up runs).
// With -baseline, the same sandboxd commands run under an older build
// too, interleaved with the rest, so a change's cost is measured side by
// side.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/bench/internal/quiet"
	"github.com/sandboxd/sandboxd/bench/internal/scratch"
	"github.com/sandboxd/sandboxd/bench/internal/served"
	"github.com/sandboxd/sandboxd/bench/internal/stats"
	"github.com/sandboxd/sandboxd/daemon"
	"golang.org/x/sys/unix"
)

type contender struct {
	name string
	argv []string
	env  []string // added to the environment
	// before runs before each timed run (untimed).
	before func()
	took   []time.Duration
	// cpu is each run's CPU time, user+sys, with the children it
	// waited for.
	cpu []time.Duration
	// daemon is the daemon's pid, whose CPU time each run adds to
	// daemonCPU (0: the run needs none).
	daemon    int
	daemonCPU served.CPU
	// served is the daemon the run goes through, whose pool of ready
	// helpers is read after the runs (nil: none, or not this one's).
	served *served.Daemon
	// do, if set, is the run, made by the benchmark itself instead of a
	// process (an agent adapter's request to the daemon's socket).
	do func() error
	// settled is how long each run's end waited for an idle machine.
	settled []time.Duration
}

// maxSettle bounds the wait for an idle machine after each run.
const maxSettle = 500 * time.Millisecond

// once runs c once in ws and records its wall and CPU time.
func (c *contender) once(ws string) error {
	if c.before != nil {
		c.before()
	}
	var d0 served.CPU
	if c.daemon != 0 {
		d0 = served.ReadCPU(c.daemon)
	}
	if c.do != nil {
		var r0, r1 unix.Rusage
		unix.Getrusage(unix.RUSAGE_SELF, &r0)
		t := time.Now()
		if err := c.do(); err != nil {
			return fmt.Errorf("%s: %v", c.name, err)
		}
		c.took = append(c.took, time.Since(t))
		unix.Getrusage(unix.RUSAGE_SELF, &r1)
		c.cpu = append(c.cpu, time.Duration(r1.Utime.Nano()+r1.Stime.Nano()-r0.Utime.Nano()-r0.Stime.Nano()))
	} else {
		cmd := exec.Command(c.argv[0], c.argv[1:]...)
		cmd.Env = append(os.Environ(), c.env...)
		cmd.Dir = ws
		t := time.Now()
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %v", c.name, err)
		}
		c.took = append(c.took, time.Since(t))
		c.cpu = append(c.cpu, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
	}
	// What the run left behind (a daemon's release and refill after its
	// report, the kernel's teardown of namespaces) ends before the next
	// run, whoever's it is, and counts in the daemon's CPU.
	c.settled = append(c.settled, quiet.Wait(maxSettle))
	if c.daemon != 0 {
		c.daemonCPU = c.daemonCPU.Add(served.ReadCPU(c.daemon).Sub(d0))
	}
	return nil
}

func main() {
	n := flag.Int("n", 200, "runs per command")
	bin := flag.String("sandboxd", "bin/sandboxd", "the sandboxd binary")
	phases := flag.Bool("phases", false, "also print where sandboxd's time goes (medians of its -v phases)")
	baseline := flag.String("baseline", "", "an older sandboxd binary to run side by side")
	homeFiles := flag.Int("home-files", 0, "also run with an empty home and a home of this many files")
	viaDaemon := flag.Bool("daemon", false, "also run through a daemon of the benchmark's own (sandboxd serve; root only)")
	wsPolicy := flag.String("ws-policy", "", "a workspace policy (.sandboxd.toml) for every run")
	flag.Parse()
	err := run(*n, *bin, *baseline, *homeFiles, *viaDaemon, *wsPolicy)
	if err == nil && *phases {
		err = phaseTable(*n, *bin, *viaDaemon, *wsPolicy)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "launch:", err)
		os.Exit(1)
	}
}

func run(n int, bin, baseline string, homeFiles int, viaDaemon bool, wsPolicy string) error {
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
	if err := scratch.Policy(ws, wsPolicy); err != nil {
		return err
	}
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
	more, cleanup, err := moreContenders(bin, baseline, ws, homeFiles, viaDaemon)
	if err != nil {
		return err
	}
	defer cleanup()
	cs = append(cs, more...)
	// Warm up caches (the compiled seccomp filter, page cache); the
	// warm-up runs are not kept.
	for _, c := range cs {
		for i := 0; i < 5; i++ {
			if err := c.once(ws); err != nil {
				return err
			}
		}
		c.took, c.cpu, c.daemonCPU, c.settled = nil, nil, served.CPU{}, nil
	}
	for i := 0; i < n; i++ {
		for _, c := range cs {
			if err := c.once(ws); err != nil {
				return err
			}
		}
	}
	printTimes(cs)
	return nil
}

// printTimes prints each contender's wall time, its CPU time and, for a
// run through a daemon, the daemon's (its own and its helpers', per
// run: the mean, as /proc counts it in clock ticks).
func printTimes(cs []*contender) {
	bw := stats.Median(cs[1].took)
	fmt.Printf("| command | runs | median | p10 | p90 | median / bwrap | CPU, user+sys (median) | daemon's CPU per run, own + helpers (mean) |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range cs {
		m := stats.Median(c.took)
		daemon := ""
		if c.daemon != 0 {
			per := c.daemonCPU.Per(len(c.took))
			daemon = ms(per.Self) + " + " + ms(per.Children)
		}
		fmt.Printf("| `%s` | %d | %s | %s | %s | %.2f | %s | %s |\n", c.name, len(c.took), ms(m),
			ms(stats.Pct(c.took, 10)), ms(stats.Pct(c.took, 90)), float64(m)/float64(bw), ms(stats.Median(c.cpu)), daemon)
	}
	var settled []time.Duration
	for _, c := range cs {
		settled = append(settled, c.settled...)
	}
	fmt.Printf("\nAfter each run, a wait for idle processors: median %s, p90 %s, max %s (bounded at %s)\n",
		ms(stats.Median(settled)), ms(stats.Pct(settled, 90)), ms(stats.Pct(settled, 100)), ms(maxSettle))
	for _, c := range cs {
		if c.served != nil {
			after, err := c.served.Pool()
			figures := "(no figures: " + fmt.Sprint(err) + ")"
			if err == nil {
				figures = served.PoolFigures(nil, after)
			}
			fmt.Printf("\n`%s`: %s\n", c.name, figures)
		}
	}
}

// homeContenders are sandboxd runs with an empty home and with a home
// of n files, its credential scan's index kept or removed before each.
func homeContenders(bin, ws string, n int) ([]*contender, func(), error) {
	homes, err := os.MkdirTemp(filepath.Dir(ws), ".bench-homes-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { os.RemoveAll(homes) }
	empty, big := filepath.Join(homes, "empty"), filepath.Join(homes, "big")
	if err := os.MkdirAll(empty, 0o700); err != nil {
		cleanup()
		return nil, nil, err
	}
	if err := fillHome(big, n); err != nil {
		cleanup()
		return nil, nil, err
	}
	argv := []string{bin, "run", "--workspace", ws, "--", "true"}
	index := filepath.Join(big, ".local", "state", "sandboxd", "credstores.index")
	return []*contender{
		{name: "sandboxd run -- true, empty home", argv: argv, env: []string{"HOME=" + empty}},
		{name: fmt.Sprintf("sandboxd run -- true, home of %d files, indexed", n), argv: argv, env: []string{"HOME=" + big}},
		{name: fmt.Sprintf("sandboxd run -- true, home of %d files, no index", n), argv: argv, env: []string{"HOME=" + big},
			before: func() { os.Remove(index) }},
	}, cleanup, nil
}

// fillHome makes a home of n files the way people's homes are: most in
// ordinary directories of 50 (documents, downloads, unpacked archives),
// a quarter in git work trees (which the credential scan skips), a few
// in tools' dot-directories, and a handful of credential stores.
func fillHome(home string, n int) error {
	write := func(p string) error {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, []byte("x\n"), 0o600)
	}
	for i := 0; i < n; i++ {
		var p string
		switch d := i / 50; {
		case i%4 == 3:
			p = filepath.Join(home, "src", fmt.Sprintf("repo%d", d%40), fmt.Sprintf("pkg%d", d), fmt.Sprintf("f%d.go", i))
		case i%20 == 1:
			p = filepath.Join(home, ".config", fmt.Sprintf("tool%d", d%30), fmt.Sprintf("f%d.json", i))
		default:
			p = filepath.Join(home, "Documents", fmt.Sprintf("d%d", d%50), fmt.Sprintf("e%d", d), fmt.Sprintf("f%d.txt", i))
		}
		if err := write(p); err != nil {
			return err
		}
	}
	for r := 0; r < 40; r++ {
		if err := os.MkdirAll(filepath.Join(home, "src", fmt.Sprintf("repo%d", r), ".git"), 0o755); err != nil {
			return err
		}
	}
	for _, p := range []string{".zsh_history", ".pgpass", ".config/git/credentials", "Documents/d1/passwords.txt", ".config/tool1/token"} {
		if err := write(filepath.Join(home, p)); err != nil {
			return err
		}
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

// moreContenders are the optional ones: through a daemon, and with homes
// of homeFiles files; cleanup ends and removes what they needed.
func moreContenders(bin, baseline, ws string, homeFiles int, viaDaemon bool) ([]*contender, func(), error) {
	var cs []*contender
	var undo []func()
	cleanup := func() {
		for _, f := range undo {
			f()
		}
	}
	if viaDaemon {
		// With its pool of ready helpers, and without (every run a miss);
		// and an agent adapter's request straight to the first one.
		for _, ready := range []string{"", "0"} {
			c, stop, err := daemonContender(bin, ws, ready)
			if err != nil {
				cleanup()
				return nil, func() {}, err
			}
			undo = append(undo, stop)
			cs = append(cs, c)
		}
		a, err := adapterContender(cs[0], ws)
		if err != nil {
			cleanup()
			return nil, func() {}, err
		}
		cs = append(cs, a)
		if baseline != "" {
			// The older build's daemon, as it serves.
			b, stop, err := daemonContender(baseline, ws, "")
			if err != nil {
				cleanup()
				return nil, func() {}, err
			}
			b.name = "baseline: " + b.name
			undo = append(undo, stop)
			cs = append(cs, b)
		}
	}
	if homeFiles > 0 {
		more, stop, err := homeContenders(bin, ws, homeFiles)
		if err != nil {
			cleanup()
			return nil, func() {}, err
		}
		undo = append(undo, stop)
		cs = append(cs, more...)
	}
	return cs, cleanup, nil
}

// daemonContender starts `sandboxd serve` of the benchmark's own (with
// --ready-helpers ready, unless "") and is `sandboxd run --daemon -- true`
// through it; stop ends the daemon.
func daemonContender(bin, ws, ready string) (*contender, func(), error) {
	var args []string
	name := "sandboxd run --daemon -- true"
	if ready != "" {
		args = []string{"--ready-helpers", ready}
		name = "sandboxd run --daemon -- true, serve --ready-helpers " + ready
	}
	d, err := served.Start(bin, args...)
	if err != nil {
		return nil, nil, err
	}
	return &contender{name: name, argv: []string{bin, "run", "--daemon", "--workspace", ws, "--", "true"},
		env: []string{"SANDBOXD_SOCKET=" + d.Socket}, daemon: d.Pid, served: d}, d.Stop, nil
}

// adapterContender is an agent adapter's request to d's daemon: POST
// /v1/exec for `true` on a connection the benchmark keeps, as pi's or an
// MCP client's adapter makes it, with no client process.
func adapterContender(d *contender, ws string) (*contender, error) {
	socket := strings.TrimPrefix(d.env[0], "SANDBOXD_SOCKET=")
	c, err := daemon.Connect(context.Background(), socket, os.Getuid())
	if err != nil {
		return nil, err
	}
	req := daemon.ExecRequest{Argv: []string{"true"}, Retries: 1,
		Context: daemon.Context{Env: os.Environ(), Cwd: ws, Umask: 0o022, Workspace: ws}}
	do := func() error {
		code := -1
		err := c.Exec(context.Background(), req, nil, func(l daemon.ExecLine) {
			if n, ok := l.ExitCode(); l.Type == "report" && ok {
				code = n
			}
		})
		if err == nil && code != 0 {
			err = fmt.Errorf("exit %d", code)
		}
		return err
	}
	return &contender{name: "adapter's request to the daemon's socket (POST /v1/exec, true)", do: do,
		daemon: d.daemon, env: d.env}, nil
}
