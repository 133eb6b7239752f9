package sandbox

import (
	"bufio"
	"errors"
	"io"
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

// A usage mark set after the group's usage passed it (a fast writer, a
// busy machine: the kernel registers a mark an RCU grace period after it
// is asked) notes the writers at once: the kernel signals a crossing
// only, and none will come.
func TestMarkPassedBeforeSet(t *testing.T) {
	cg, err := newCgroup(probeCgroups(), groupName("marktest"+strconv.Itoa(os.Getpid())), Limits{Memory: 256 << 20})
	if err != nil || cg.v2 || !cg.memory {
		t.Skipf("no v1 memory group to watch (%v)", err)
	}
	defer cg.remove()
	dir := t.TempDir()
	shm, err := os.MkdirTemp("/dev/shm", "marktest-")
	if err != nil {
		t.Skip("no /dev/shm: ", err)
	}
	defer os.RemoveAll(shm)
	writing := filepath.Join(dir, "being-written")
	// It waits on stdin until it is in the group, then fills tmpfs
	// pages the group is charged for, a file open for writing meanwhile.
	cmd := exec.Command("/bin/sh", "-c", `read go; exec 3>"$1"; head -c 48000000 /dev/zero > "$2/fill"; echo filled; exec sleep 30`,
		"sh", writing, shm)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for _, g := range []string{cg.memDir, cg.pidsDir} {
		if err := os.WriteFile(filepath.Join(g, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	io.WriteString(stdin, "go\n")
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "filled\n" {
		t.Fatalf("the writer did not fill: %q, %v", line, err)
	}
	if u, err := cg.usage(); err != nil || u < 32<<20 {
		t.Fatalf("usage %d (%v), want over the mark", u, err)
	}
	w := &limitWatch{near: map[string]map[int]bool{}, marked: make(chan struct{})}
	w.watchMark(cg, 32<<20)
	defer w.stopAll()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.near[writing]) == 0 {
		t.Fatalf("the writers when the mark was set: %v, want %s", w.near, writing)
	}
}
