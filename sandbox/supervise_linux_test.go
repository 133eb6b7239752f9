package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

// TestHelperAlone: a run ends before the helper has exited only when the
// kernel's list of the run's group holds the helper alone (or nothing);
// without a group, or when the list cannot be read, it never does.
func TestHelperAlone(t *testing.T) {
	const pid = 4242
	for _, tc := range []struct {
		name  string
		group func() ([]int, error)
		want  bool
	}{
		{"no group", nil, false},
		{"the helper alone", func() ([]int, error) { return []int{pid}, nil }, true},
		{"empty", func() ([]int, error) { return nil, nil }, true},
		{"a process of the command left", func() ([]int, error) { return []int{pid, pid + 1}, nil }, false},
		{"only another process", func() ([]int, error) { return []int{pid + 1}, nil }, false},
		{"unreadable", func() ([]int, error) { return nil, errors.New("EMFILE") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &helper{cmd: &exec.Cmd{Process: &os.Process{Pid: pid}}, group: tc.group}
			if got := h.alone(); got != tc.want {
				t.Errorf("alone() = %v, want %v", got, tc.want)
			}
		})
	}
}
