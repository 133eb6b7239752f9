package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/bench/internal/quiet"
	"github.com/sandboxd/sandboxd/bench/internal/scratch"
	"github.com/sandboxd/sandboxd/bench/internal/served"
	"github.com/sandboxd/sandboxd/bench/internal/stats"
)

// A phase line, as sandbox.LogPhase (and the daemon's and the helper's
// marks) write it with -v: the part of sandboxd that reached the phase,
// the time since that part's own origin and since the Unix epoch, and
// its process's CPU time (user+sys, without its children) by then.
var (
	phaseLine = regexp.MustCompile(`msg=(\w+) phase=("[^"]*"|\S+) at_us=(\d+)(?: unix_us=(\d+) cpu_us=(\d+))?`)
	helperCPU = regexp.MustCompile(`msg="helper cpu" user_us=(\d+) sys_us=(\d+)`)
)

// mark is one phase line of one run.
type mark struct {
	part, name      string
	at, unix, cpuUS int64
}

// phaseRun is one timed `sandboxd run -v -- true`: when the benchmark
// started the client (Unix µs), its wall time and CPU time (user+sys,
// with the children it waited for: embedded, the helper and the
// command), the phases every process of it logged, and the helper's
// CPU time with the command's, as its supervisor measured it.
type phaseRun struct {
	launch    int64
	wall, cpu time.Duration
	marks     []mark
	helper    time.Duration
}

// parsePhases adds the phase lines and the helper's CPU line in out to r.
func (r *phaseRun) parse(out []byte) {
	for _, m := range phaseLine.FindAllSubmatch(out, -1) {
		k := mark{part: string(m[1]), name: strings.Trim(string(m[2]), `"`)}
		k.at, _ = strconv.ParseInt(string(m[3]), 10, 64)
		k.unix, _ = strconv.ParseInt(string(m[4]), 10, 64)
		k.cpuUS, _ = strconv.ParseInt(string(m[5]), 10, 64)
		r.marks = append(r.marks, k)
	}
	if m := helperCPU.FindSubmatch(out); m != nil {
		u, _ := strconv.ParseInt(string(m[1]), 10, 64)
		s, _ := strconv.ParseInt(string(m[2]), 10, 64)
		r.helper = time.Duration(u+s) * time.Microsecond
	}
}

// timed runs cmd to its end and records its launch, wall and CPU time.
func timed(cmd *exec.Cmd) (phaseRun, []byte, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t := time.Now()
	err := cmd.Run()
	r := phaseRun{launch: t.UnixMicro(), wall: time.Since(t)}
	if err != nil {
		return r, out.Bytes(), fmt.Errorf("%v\n%s", err, out.Bytes())
	}
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return r, out.Bytes(), nil
}

// phaseTable runs `sandboxd run -v -- true` n times and prints when
// each phase it logs was reached, and with viaDaemon the same through a
// daemon of the benchmark's own that logs its phases (serve -v).
// Supervisor phases count from the start of sandbox.Run, helper phases
// from the helper's main, session phases from Runner.Run, plan phases
// from the plan's start, daemon phases from the exec handler's start,
// client phases from the client's request; "from launch" counts every
// phase from the benchmark's start of the client process.
func phaseTable(n int, bin string, viaDaemon bool, wsPolicy string) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	ws, cleanup, err := scratch.Workspace()
	if err != nil {
		return err
	}
	defer cleanup()
	if err := scratch.Policy(ws, wsPolicy); err != nil {
		return err
	}
	var runs []phaseRun
	for i := -5; i < n; i++ { // 5 warm-up runs
		r, out, err := timed(exec.Command(bin, "run", "-v", "--workspace", ws, "--", "true"))
		if err != nil {
			return fmt.Errorf("sandboxd run -v: %v", err)
		}
		r.parse(out)
		if i >= 0 {
			runs = append(runs, r)
		}
		quiet.Wait(maxSettle) // as run's runs do
	}
	printPhases("sandboxd run -v", runs, false)
	printTotals(runs, false, nil)
	if !viaDaemon {
		return nil
	}
	return daemonPhases(n, bin, ws)
}

// daemonPhases is phaseTable's run through a daemon.
func daemonPhases(n int, bin, ws string) error {
	d, err := startLoggingDaemon(bin)
	if err != nil {
		return err
	}
	defer d.stop()
	var runs []phaseRun
	var before, after served.CPU
	for i := -5; i < n; i++ {
		if i == 0 {
			before = served.ReadCPU(d.cmd.Process.Pid)
		}
		cmd := exec.Command(bin, "run", "--daemon", "-v", "--workspace", ws, "--", "true")
		cmd.Env = append(os.Environ(), "SANDBOXD_SOCKET="+d.socket)
		r, out, err := timed(cmd)
		if err != nil {
			return fmt.Errorf("sandboxd run --daemon -v: %v", err)
		}
		r.parse(out)
		logged, err := d.next()
		if err != nil {
			return err
		}
		r.parse(logged)
		if i >= 0 {
			runs = append(runs, r)
		}
		quiet.Wait(maxSettle)
	}
	after = served.ReadCPU(d.cmd.Process.Pid)
	printPhases("sandboxd run --daemon -v -- true, sandboxd serve -v", runs, true)
	per := after.Sub(before).Per(n)
	printTotals(runs, true, &per)
	return nil
}

// processOf is the process a part of sandboxd runs in.
func processOf(part string, viaDaemon bool) string {
	switch {
	case part == "helper":
		return "helper"
	case part == "client" || part == "cli":
		return "client"
	case viaDaemon:
		return "daemon"
	}
	return "client"
}

// printPhases prints the median time each phase was reached: since its
// part's origin, and since the client's launch; the difference to the
// row before; and the CPU time its process spent since that process's
// mark before (for a client or helper's first mark: since it started).
func printPhases(title string, runs []phaseRun, viaDaemon bool) {
	type row struct {
		name              string
		at, fromLaunch    []time.Duration
		cpu               []time.Duration
		medianFromLaunch  time.Duration
		process, firstCPU string
	}
	rows := map[string]*row{}
	var order []*row
	for _, r := range runs {
		ms := slices.Clone(r.marks)
		slices.SortStableFunc(ms, func(a, b mark) int { return int(a.unix - b.unix) })
		last := map[string]int64{} // process: its CPU at its mark before
		for _, m := range ms {
			name := m.part + ": " + m.name
			w := rows[name]
			if w == nil {
				w = &row{name: name, process: processOf(m.part, viaDaemon)}
				rows[name] = w
				order = append(order, w)
			}
			w.at = append(w.at, time.Duration(m.at)*time.Microsecond)
			w.fromLaunch = append(w.fromLaunch, time.Duration(m.unix-r.launch)*time.Microsecond)
			prev, seen := last[w.process]
			if seen || w.process != "daemon" {
				w.cpu = append(w.cpu, time.Duration(m.cpuUS-prev)*time.Microsecond)
			}
			last[w.process] = m.cpuUS
		}
	}
	var exited []time.Duration
	for _, r := range runs {
		exited = append(exited, r.wall)
	}
	order = append(order, &row{name: "client: exited", fromLaunch: exited, process: "client"})
	for _, w := range order {
		w.medianFromLaunch = stats.Median(w.fromLaunch)
	}
	slices.SortStableFunc(order, func(a, b *row) int { return int(a.medianFromLaunch - b.medianFromLaunch) })
	fmt.Printf("\n| phase (%s) | reached at (median) | from launch (median) | after the row before | CPU of its process since its mark before (median) | process |\n|---|---|---|---|---|---|\n", title)
	var prev time.Duration
	for _, w := range order {
		at, cpu := "", ""
		if len(w.at) > 0 {
			at = ms(stats.Median(w.at))
		}
		if len(w.cpu) > 0 {
			cpu = ms(stats.Median(w.cpu))
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", w.name, at, ms(w.medianFromLaunch), ms(w.medianFromLaunch-prev), cpu, w.process)
		prev = w.medianFromLaunch
	}
}

// printTotals prints each process's wall and CPU time: the client's as
// its wait status says (embedded, with the helper and the command it
// waited for), the helper's (with the command's) as the supervisor's
// wait said, and with a daemon, the daemon's own CPU per exec from its
// marks and from /proc (per, averaged over the runs: /proc counts in
// clock ticks).
func printTotals(runs []phaseRun, viaDaemon bool, per *served.CPU) {
	var wall, cpu, helper, own, daemon []time.Duration
	for _, r := range runs {
		wall, cpu, helper = append(wall, r.wall), append(cpu, r.cpu), append(helper, r.helper)
		if !viaDaemon {
			own = append(own, r.cpu-r.helper)
			continue
		}
		var first, last int64 = -1, -1
		for _, m := range r.marks {
			switch {
			case m.part == "daemon" && m.name == "request read":
				first = m.cpuUS
			case m.part == "daemon" && m.name == "report sent":
				last = m.cpuUS
			}
		}
		if first >= 0 && last >= 0 {
			daemon = append(daemon, time.Duration(last-first)*time.Microsecond)
		}
	}
	fmt.Printf("\n| process | wall (median) | CPU, user+sys (median) |\n|---|---|---|\n")
	if viaDaemon {
		fmt.Printf("| client (`sandboxd run --daemon`) | %s | %s |\n", ms(stats.Median(wall)), ms(stats.Median(cpu)))
		if len(daemon) > 0 {
			fmt.Printf("| daemon, its exec handler (from `request read` to `report sent`) | | %s |\n", ms(stats.Median(daemon)))
		}
		fmt.Printf("| daemon, own, per exec (mean over the runs, /proc/PID/stat; idle time between runs included) | | %s |\n", ms(per.Self))
		fmt.Printf("| helper, with the command | | %s |\n", ms(stats.Median(helper)))
		fmt.Printf("| daemon's children per exec (mean, /proc/PID/stat: the helpers with their commands) | | %s |\n", ms(per.Children))
		return
	}
	fmt.Printf("| client (`sandboxd run`), with the helper and the command it waited for | %s | %s |\n", ms(stats.Median(wall)), ms(stats.Median(cpu)))
	fmt.Printf("| client, own (without its helper) | | %s |\n", ms(stats.Median(own)))
	fmt.Printf("| helper, with the command | | %s |\n", ms(stats.Median(helper)))
}

// loggingDaemon is `sandboxd serve -v` on a socket of the benchmark's
// own, its log kept for next.
type loggingDaemon struct {
	cmd    *exec.Cmd
	socket string
	log    *syncBuffer
	read   int // how much of log next has returned
	stop   func()
}

// startLoggingDaemon starts it and waits until it listens.
func startLoggingDaemon(bin string) (*loggingDaemon, error) {
	dir, cleanup, err := scratch.Workspace()
	if err != nil {
		return nil, err
	}
	d := &loggingDaemon{socket: filepath.Join(dir, "run", "sandboxd.sock"), log: &syncBuffer{}}
	d.cmd = exec.Command(bin, "serve", "-v", "--socket", d.socket,
		"--audit-dir", filepath.Join(dir, "audit"), "--audit-key", filepath.Join(dir, "audit.key"))
	d.cmd.Dir, d.cmd.Env, d.cmd.Stderr = "/", os.Environ(), d.log
	if err := d.cmd.Start(); err != nil {
		cleanup()
		return nil, err
	}
	d.stop = func() {
		d.cmd.Process.Signal(os.Interrupt)
		d.cmd.Wait()
		cleanup()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(d.socket); err == nil {
			return d, nil
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("the daemon did not listen (it runs as root)")
		}
	}
}

// next is what the daemon logged for the exec that just ended, once it
// has logged its last phase (which it may do after the client is gone).
func (d *loggingDaemon) next() ([]byte, error) {
	end := []byte(`msg=daemon phase="report sent"`)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b := d.log.from(d.read)
		if i := bytes.Index(b, end); i >= 0 {
			j := bytes.IndexByte(b[i:], '\n')
			if j >= 0 {
				d.read += i + j + 1
				return b[:i+j+1], nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the daemon logged no end of the exec:\n%s", b)
		}
	}
}

// syncBuffer is a buffer one goroutine writes and another reads.
type syncBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b = append(s.b, p...)
	return len(p), nil
}

// from is a copy of what was written from offset i on.
func (s *syncBuffer) from(i int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]byte(nil), s.b[i:]...)
}
