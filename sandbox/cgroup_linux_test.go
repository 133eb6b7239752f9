package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// A group's name tells whether its maker, a process of this pid
// namespace, is gone; anything it cannot tell keeps the group.
func TestMakerGone(t *testing.T) {
	ns := ownPidNS()
	if ns == "0" {
		t.Skip("no pid namespace to name")
	}
	dead := exec.Command("/bin/true")
	dead.Dir, dead.Env = "/", []string{}
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		gone bool
	}{
		{"sandboxd-" + ns + "-" + strconv.Itoa(dead.Process.Pid) + "-0123abcd", true},
		{groupName("0123abcd"), false},
		{"sandboxd-1" + ns + "-" + strconv.Itoa(dead.Process.Pid) + "-0123abcd", false},
		{"sandboxd-0123abcd", false},
		{"sandboxd-" + ns + "-x-0123abcd", false},
		{"sandboxd-" + ns + "--1-0123abcd", false},
	} {
		if got := makerGone(c.name, ns); got != c.gone {
			t.Errorf("makerGone(%q) = %v, want %v", c.name, got, c.gone)
		}
	}
	if makerGone("sandboxd-0-"+strconv.Itoa(dead.Process.Pid)+"-0123abcd", "0") {
		t.Error("a maker in an unknown pid namespace was taken for gone")
	}
}

// The groups a killed sandboxd's runs left are removed at once, tasks
// and all; a live run's group, even empty, stays.
func TestRemoveStaleGroups(t *testing.T) {
	info := probeCgroups()
	if info.PidsDir == "" {
		t.Skip("no pids cgroup to make groups in: ", info.Reason)
	}
	dead := exec.Command("/bin/true")
	dead.Dir, dead.Env = "/", []string{}
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(info.PidsDir, "sandboxd-"+ownPidNS()+"-"+strconv.Itoa(dead.Process.Pid)+"-test"+strconv.Itoa(os.Getpid()))
	live := filepath.Join(info.PidsDir, groupName("test"))
	for _, g := range []string{gone, live} {
		if err := os.Mkdir(g, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(g) })
	}
	// A task left in the killed run's group.
	left := exec.Command("/bin/sleep", "300")
	left.Dir, left.Env = "/", []string{}
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	defer left.Process.Kill()
	if err := os.WriteFile(filepath.Join(gone, "cgroup.procs"), []byte(strconv.Itoa(left.Process.Pid)), 0); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- left.Wait() }()
	RemoveStaleGroups()
	if _, err := os.Stat(gone); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed run's group is still there: %v", err)
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Error("the killed run's task survived")
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live run's group was removed: %v", err)
	}
}
