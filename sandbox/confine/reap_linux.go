package confine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// reapUntil waits for the command, reaping every other process on the way
// and forwarding signals to the command's process group.
//
// xfsz is set when a process it reaps was killed by SIGXFSZ: it wrote
// past the file-size limit.
func reapUntil(pid int, ns bool, sigs <-chan os.Signal, ctl <-chan wire.Kind, xfsz *bool) unix.WaitStatus {
	for {
		for {
			var ws unix.WaitStatus
			got, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err != nil || got <= 0 {
				break
			}
			if ws.Signaled() && ws.Signal() == unix.SIGXFSZ {
				*xfsz = true
			}
			if got == pid && (ws.Exited() || ws.Signaled()) {
				return ws
			}
		}
		select {
		case sig := <-sigs:
			if sig == unix.SIGCHLD {
				continue
			}
			unix.Kill(-pid, sig.(unix.Signal))
		case k := <-ctl:
			switch k {
			case wire.Terminate:
				killAll(ns, unix.SIGTERM)
			case wire.Kill:
				killAll(ns, unix.SIGKILL)
			}
		}
	}
}

// reapAll waits until the helper has no children left, so none of the
// command's processes can log a denial after the end marker.
func reapAll(ns bool) {
	for {
		_, err := unix.Wait4(-1, nil, 0, nil)
		if err != nil { // ECHILD: none left
			return
		}
	}
}

// killAll signals every process of the sandbox but the helper, and
// reports whether it reached them all. In a pid namespace kill(-1)
// reaches all of them; without one the helper is a child subreaper, so
// every orphan is its child and is found in /proc: for SIGKILL it kills
// and reaps until none is left, and gives up (false) after 1000 rounds
// against a command that forks faster, leaving the rest to the run's
// cgroup.
func killAll(ns bool, sig unix.Signal) bool {
	if ns {
		unix.Kill(-1, sig)
		return true
	}
	for round := 0; round < 1000; round++ {
		kids := children()
		if len(kids) == 0 {
			return true
		}
		for _, k := range kids {
			unix.Kill(k, sig)
		}
		if sig != unix.SIGKILL {
			return true
		}
		for {
			if got, err := unix.Wait4(-1, nil, unix.WNOHANG, nil); err != nil || got <= 0 {
				break
			}
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

func children() []int {
	var out []int
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "children"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			var n int
			if _, err := fmt.Sscan(f, &n); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}
