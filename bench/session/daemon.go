package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/bench/internal/scratch"
)

// daemonProc is `sandboxd serve` on a socket of the benchmark's own,
// with its pool of ready helpers as serve makes it by default.
type daemonProc struct {
	pid             int
	socket, metrics string
	stop            func()
}

// startDaemon starts it (as bench/launch's daemonContender does) and
// waits until it listens.
func startDaemon(bin string) (*daemonProc, error) {
	dir, cleanup, err := scratch.Workspace()
	if err != nil {
		return nil, err
	}
	metrics, err := freeLoopback()
	if err != nil {
		cleanup()
		return nil, err
	}
	socket := filepath.Join(dir, "run", "sandboxd.sock")
	d := exec.Command(bin, "serve", "--socket", socket, "--metrics-addr", metrics)
	d.Dir, d.Env = "/", os.Environ()
	if err := d.Start(); err != nil {
		cleanup()
		return nil, err
	}
	stop := func() {
		d.Process.Signal(os.Interrupt)
		d.Wait()
		cleanup()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("the daemon did not listen (it runs as root)")
		}
	}
	return &daemonProc{pid: d.Process.Pid, socket: socket, metrics: metrics, stop: stop}, nil
}

// freeLoopback is a loopback address with a port free now.
func freeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// scrape reads a daemon's figures for its pool of ready helpers.
func scrape(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("the daemon's metrics: %w", err)
	}
	defer resp.Body.Close()
	v := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if ok && strings.HasPrefix(name, "sandboxd_ready_helper") {
			v[name], _ = strconv.ParseFloat(val, 64)
		}
	}
	return v, sc.Err()
}

// poolFigures is the pool's hit rate over the timed sessions (since
// before, the figures the warm-up left) and the CPU its preparation took
// per helper made.
func poolFigures(before map[string]float64, addr string) string {
	after, err := scrape(addr)
	if err != nil {
		return "pool: no figures (" + err.Error() + ")"
	}
	d := func(name string) float64 {
		return after["sandboxd_ready_helper_"+name] - before["sandboxd_ready_helper_"+name]
	}
	hits, misses := d("hits_total"), d("misses_total")
	if hits+misses == 0 {
		return "pool: no claims in the timed sessions"
	}
	used := hits + d("expired_total")
	per := 0.0
	if used > 0 {
		per = d("prepare_cpu_seconds_total") / used * 1000
	}
	return fmt.Sprintf("pool of ready helpers over the timed sessions: %.0f hits, %.0f misses (hit rate %.1f %%), "+
		"preparation %.2f ms CPU per helper made", hits, misses, 100*hits/(hits+misses), per)
}

// userHZ is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const userHZ = 100

// procCPU is a process's CPU time, its own and its waited-for children's.
type procCPU struct{ self, children time.Duration }

func (a procCPU) add(b procCPU) procCPU {
	return procCPU{self: a.self + b.self, children: a.children + b.children}
}

func (a procCPU) sub(b procCPU) procCPU {
	return procCPU{self: a.self - b.self, children: a.children - b.children}
}

func (a procCPU) per(n int) procCPU {
	return procCPU{self: a.self / time.Duration(n), children: a.children / time.Duration(n)}
}

// readProcCPU reads /proc/PID/stat's utime, stime, cutime and cstime
// (zero when it cannot).
func readProcCPU(pid int) procCPU {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(b, ')')
	if err != nil || i < 0 {
		return procCPU{}
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return procCPU{}
	}
	tick := func(s string) time.Duration {
		v, _ := strconv.ParseInt(s, 10, 64)
		return time.Duration(v) * time.Second / userHZ
	}
	// Fields 14-17 of the line; f[0] is field 3.
	return procCPU{self: tick(f[11]) + tick(f[12]), children: tick(f[13]) + tick(f[14])}
}
