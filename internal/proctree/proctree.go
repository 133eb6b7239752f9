package proctree

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Descendants are the processes below pid, as /proc shows them now.
func Descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command's name, which may hold spaces
		// and parentheses: the state, then the parent's pid.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// RSS is a process's resident set in KiB (0 when it is gone): pages it
// shares with others count in full.
func RSS(pid int) int64 { return kB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:") }

// PSS is a process's proportional set in KiB (0 when it is gone): a page
// shared by n processes counts 1/n in each, so the PSS of processes adds
// up to the memory they hold together.
func PSS(pid int) int64 { return kB(fmt.Sprintf("/proc/%d/smaps_rollup", pid), "Pss:") }

// kB reads the "key: N kB" line of a /proc file.
func kB(path, key string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
