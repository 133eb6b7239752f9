package served

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

// Daemon is `sandboxd serve` on a socket in a scratch directory of its
// own, its metrics on a free loopback port.
type Daemon struct {
	Pid             int
	Socket, Metrics string
	stop            func()
}

// Start starts bin serve with args added and waits until it listens
// (it runs as root).
func Start(bin string, args ...string) (*Daemon, error) {
	dir, cleanup, err := scratch.Workspace()
	if err != nil {
		return nil, err
	}
	metrics, err := FreeLoopback()
	if err != nil {
		cleanup()
		return nil, err
	}
	socket := filepath.Join(dir, "run", "sandboxd.sock")
	d := exec.Command(bin, append([]string{"serve", "--socket", socket, "--metrics-addr", metrics,
		"--audit-dir", filepath.Join(dir, "audit"), "--audit-key", filepath.Join(dir, "audit.key")}, args...)...)
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
	return &Daemon{Pid: d.Process.Pid, Socket: socket, Metrics: metrics, stop: stop}, nil
}

// Stop ends the daemon and removes its directory.
func (d *Daemon) Stop() { d.stop() }

// FreeLoopback is a loopback address with a port free now.
func FreeLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// Pool reads the daemon's figures for its pool of ready helpers
// (sandboxd_ready_helper*, by series name).
func (d *Daemon) Pool() (map[string]float64, error) {
	resp, err := http.Get("http://" + d.Metrics + "/metrics")
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

// PoolFigures says the pool's hit rate between two readings of Pool
// (before nil: since the start) and the CPU its preparation took per
// helper made.
func PoolFigures(before, after map[string]float64) string {
	d := func(name string) float64 {
		return after["sandboxd_ready_helper_"+name] - before["sandboxd_ready_helper_"+name]
	}
	hits, misses := d("hits_total"), d("misses_total")
	if hits+misses == 0 {
		return "pool: no claims"
	}
	used := hits + d("expired_total")
	per := 0.0
	if used > 0 {
		per = d("prepare_cpu_seconds_total") / used * 1000
	}
	return fmt.Sprintf("pool of ready helpers: %.0f hits, %.0f misses (hit rate %.1f %%), preparation %.2f ms CPU per helper made",
		hits, misses, 100*hits/(hits+misses), per)
}

// userHZ is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const userHZ = 100

// CPU is a process's CPU time, its own and its waited-for children's.
type CPU struct{ Self, Children time.Duration }

func (a CPU) Add(b CPU) CPU { return CPU{Self: a.Self + b.Self, Children: a.Children + b.Children} }
func (a CPU) Sub(b CPU) CPU { return CPU{Self: a.Self - b.Self, Children: a.Children - b.Children} }
func (a CPU) Per(n int) CPU {
	return CPU{Self: a.Self / time.Duration(n), Children: a.Children / time.Duration(n)}
}

// ReadCPU reads /proc/PID/stat's utime, stime, cutime and cstime (zero
// when it cannot).
func ReadCPU(pid int) CPU {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(b, ')')
	if err != nil || i < 0 {
		return CPU{}
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 15 {
		return CPU{}
	}
	tick := func(s string) time.Duration {
		v, _ := strconv.ParseInt(s, 10, 64)
		return time.Duration(v) * time.Second / userHZ
	}
	// Fields 14-17 of the line; f[0] is field 3.
	return CPU{Self: tick(f[11]) + tick(f[12]), Children: tick(f[13]) + tick(f[14])}
}
