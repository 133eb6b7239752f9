// Command latency measures how long a denial takes to become something the
// supervisor can act on: from just before a denied open to the arrival of
// Landlock's audit record on the multicast socket (kernel audit path), and
// from just before an observed open to its seccomp notification being
// received (user notification path). Needs root (kernel audit).
//
//	go run ./bench/latency -n 2000
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"github.com/sandboxd/sandboxd/kernelaudit"
	"github.com/sandboxd/sandboxd/landlock"
	"github.com/sandboxd/sandboxd/seccomp"
	"golang.org/x/sys/unix"
)

func now() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func main() {
	n := flag.Int("n", 2000, "denials per path")
	child := flag.String("child", "", "internal")
	dir := flag.String("dir", "", "internal")
	flag.Parse()
	if *child == "audit" {
		os.Exit(auditChild(*dir, *n))
	}
	if d := os.Getenv("SANDBOXD_LATENCY_NOTIFY"); d != "" {
		notifyLatency(d, *n)
	}
	if err := run(*n); err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		os.Exit(1)
	}
}

func run(n int) error {
	dir, err := os.MkdirTemp("", "sandboxd-latency-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	a, err := auditLatency(dir, n)
	if err != nil {
		return err
	}
	s, err := notifyLatency(dir, n)
	if err != nil {
		return err
	}
	fmt.Printf("| path | denials | p50 | p99 | max |\n|---|---|---|---|---|\n")
	for _, r := range []struct {
		name string
		d    []time.Duration
	}{{"Landlock denial -> audit record received", a}, {"observed call -> seccomp notification received", s}} {
		sort.Slice(r.d, func(i, j int) bool { return r.d[i] < r.d[j] })
		p := func(q int) string {
			return fmt.Sprintf("%.1f µs", float64(r.d[(len(r.d)-1)*q/100].Nanoseconds())/1000)
		}
		fmt.Printf("| %s | %d | %s | %s | %s |\n", r.name, len(r.d), p(50), p(99), p(100))
	}
	return nil
}

// auditLatency runs a child that denies itself n opens, each of a unique
// path, writing the time before each open to stdout.
func auditLatency(dir string, n int) ([]time.Duration, error) {
	for i := 0; i < n; i++ {
		os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), nil, 0o600)
	}
	h, err := kernelaudit.Acquire(kernelaudit.DefaultDir)
	if err != nil {
		return nil, err
	}
	defer h.Release()
	l, err := kernelaudit.Listen()
	if err != nil {
		return nil, err
	}
	defer l.Close()
	arrived := map[string]int64{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			typ, text, err := l.Next()
			if errors.Is(err, kernelaudit.ErrOverrun) {
				continue
			}
			if err != nil {
				return
			}
			t := now()
			if r, err := landlock.ParseRecord(typ, text); err == nil && strings.HasPrefix(r.Path, dir+"/") {
				arrived[r.Path] = t
				if len(arrived) == n {
					return
				}
			}
		}
	}()
	cmd := exec.Command(os.Args[0], "-child", "audit", "-dir", dir, "-n", strconv.Itoa(n))
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("audit child: %w", err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	l.Close()
	var d []time.Duration
	for i, line := range strings.Fields(string(out)) {
		sent, _ := strconv.ParseInt(line, 10, 64)
		if t, ok := arrived[filepath.Join(dir, strconv.Itoa(i))]; ok {
			d = append(d, time.Duration(t-sent))
		}
	}
	if len(d) < n {
		return nil, fmt.Errorf("only %d of %d records arrived", len(d), n)
	}
	return d, nil
}

func auditChild(dir string, n int) int {
	attr := llsys.RulesetAttr{HandledAccessFS: llsys.AccessFSReadFile}
	fd, err := llsys.LandlockCreateRuleset(&attr, 0)
	if err != nil {
		return 2
	}
	runtime.LockOSThread()
	unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	if llsys.LandlockRestrictSelf(fd, 0) != nil {
		return 3
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		t := now()
		unix.Open(filepath.Join(dir, strconv.Itoa(i)), unix.O_RDONLY, 0)
		fmt.Fprintf(&b, "%d\n", t)
		time.Sleep(200 * time.Microsecond) // a command's pace, not a flood
	}
	os.Stdout.WriteString(b.String())
	return 0
}

// notifyLatency observes n creating opens in this process (a goroutine
// answers), from just before the call to the notification's receipt.
func notifyLatency(dir string, n int) ([]time.Duration, error) {
	prog, err := seccomp.Compile(seccomp.Build(seccomp.Options{Observe: true}))
	if err != nil {
		return nil, err
	}
	// The filter is permanent: run it in a child copy of this program.
	if os.Getenv("SANDBOXD_LATENCY_NOTIFY") == "" {
		cmd := exec.Command(os.Args[0], "-n", strconv.Itoa(n))
		cmd.Env = append(os.Environ(), "SANDBOXD_LATENCY_NOTIFY="+dir)
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("notify child: %w", err)
		}
		var d []time.Duration
		for _, f := range strings.Fields(string(out)) {
			v, _ := strconv.ParseInt(f, 10, 64)
			d = append(d, time.Duration(v))
		}
		return d, nil
	}
	runtime.LockOSThread()
	unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
	fd, err := seccomp.InstallWithListener(prog)
	if err != nil {
		return nil, err
	}
	l := seccomp.NewListener(fd)
	got := make(chan int64, 1)
	go func() {
		for {
			n, ok, err := l.Receive(1000)
			if err != nil {
				return
			}
			if ok {
				got <- now()
				l.Continue(n.ID)
			}
		}
	}()
	var b strings.Builder
	for i := 0; i < n; i++ {
		t := now()
		f, _ := unix.Open(filepath.Join(dir, "w"+strconv.Itoa(i)), unix.O_CREAT|unix.O_WRONLY, 0o644)
		unix.Close(f)
		fmt.Fprintf(&b, "%d\n", <-got-t)
	}
	os.Stdout.WriteString(b.String())
	os.Exit(0)
	return nil, nil
}
