package proctree

import (
	"os"
	"os/exec"
	"slices"
	"testing"
)

// A child and its own child are below this process; RSS reads a live
// process and gives 0 for one that is gone.
func TestDescendants(t *testing.T) {
	cmd := exec.Command("bash", "-c", "sleep 30 & wait")
	cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/bin:/bin"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var below []int
	for range 100 {
		if below = Descendants(os.Getpid()); len(below) >= 2 {
			break
		}
		exec.Command("sleep", "0.02").Run()
	}
	if !slices.Contains(below, cmd.Process.Pid) || len(below) < 2 {
		t.Fatalf("below this process: %v (bash is %d)", below, cmd.Process.Pid)
	}
	if RSS(os.Getpid()) <= 0 || RSS(1<<22+1) != 0 || PSS(os.Getpid()) <= 0 || PSS(os.Getpid()) > RSS(os.Getpid()) {
		t.Fatal("RSS or PSS")
	}
}
