package quiet

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The processors count as idle once two windows of this length in a row
// kept them busy less than busyFraction of the time.
const (
	window       = 2 * time.Millisecond
	busyFraction = 0.10
)

// Wait returns once the machine is idle, or after max; it reports how
// long it waited. Where no root cgroup counts the machine's CPU time, it
// pauses for max.
func Wait(max time.Duration) time.Duration {
	start := time.Now()
	read := usageReader()
	if read == nil {
		time.Sleep(max)
		return max
	}
	cpus := float64(runtime.NumCPU())
	quietWindows := 0
	u0, t0 := read(), time.Now()
	for time.Since(start) < max {
		time.Sleep(window)
		u1, t1 := read(), time.Now()
		busy := float64(u1-u0) / (float64(t1.Sub(t0)) * cpus)
		if u1 >= u0 && busy < busyFraction {
			quietWindows++
		} else {
			quietWindows = 0
		}
		if quietWindows == 2 {
			break
		}
		u0, t0 = u1, t1
	}
	return time.Since(start)
}

// usageReader returns a reader of the machine's CPU time in
// nanoseconds, or nil when neither root cgroup file can be read: the
// root cgroup counts every task's, v1 in nanoseconds, v2 in cpu.stat's
// usage_usec.
func usageReader() func() int64 {
	for _, f := range []string{"/sys/fs/cgroup/cpuacct/cpuacct.usage", "/sys/fs/cgroup/cpu.stat"} {
		read := func() int64 { return usage(f) }
		if read() >= 0 {
			return read
		}
	}
	return nil
}

// usage is the CPU time the file f counts, in nanoseconds, or -1.
func usage(f string) int64 {
	b, err := os.ReadFile(f)
	if err != nil {
		return -1
	}
	s := strings.TrimSpace(string(b))
	if !strings.HasSuffix(f, "cpu.stat") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return -1
			}
			return n * 1000
		}
	}
	return -1
}
