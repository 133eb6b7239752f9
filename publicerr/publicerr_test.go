package publicerr

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestPublicSentenceOnly(t *testing.T) {
	internal := fmt.Errorf("sandbox: socketpair: %w", fs.ErrPermission)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{Wrap(internal, "the sandbox could not be set up"), "the sandbox could not be set up"},
		{fmt.Errorf("run: %w", Wrap(internal, "the sandbox could not be set up")), "the sandbox could not be set up"},
		{New("workspace / is a system directory"), "workspace / is a system directory"},
		{internal, "fallback"},
	} {
		got := Message(tc.err, "fallback")
		if got != tc.want {
			t.Errorf("Message(%v) = %q, want %q", tc.err, got, tc.want)
		}
		if strings.Contains(got, "socketpair") {
			t.Errorf("the internal cause leaked: %q", got)
		}
	}
	if !errors.Is(Wrap(internal, "x"), fs.ErrPermission) {
		t.Error("the cause is not reachable with errors.Is")
	}
}

func TestInternalKeepsTheCause(t *testing.T) {
	internal := fmt.Errorf("sandbox: socketpair: %w", fs.ErrPermission)
	deeper := Wrap(fmt.Errorf("landlock: create ruleset: %w", fs.ErrInvalid), "the ruleset could not be made")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{internal, "sandbox: socketpair: permission denied"},
		{New("workspace / is a system directory"), "workspace / is a system directory"},
		{Wrap(internal, "the sandbox could not be set up"), "the sandbox could not be set up [cause: sandbox: socketpair: permission denied]"},
		{fmt.Errorf("run: %w", Wrap(internal, "the sandbox could not be set up")), "run: the sandbox could not be set up [cause: sandbox: socketpair: permission denied]"},
		{Wrap(deeper, "setup failed"), "setup failed [cause: the ruleset could not be made [cause: landlock: create ruleset: invalid argument]]"},
		{Errorf(internal, "workspace %s is not readable", "/home/u/p"), "workspace /home/u/p is not readable [cause: sandbox: socketpair: permission denied]"},
	} {
		if got := Internal(tc.err); got != tc.want {
			t.Errorf("Internal(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestErrorfShowsOnlyItsSentence(t *testing.T) {
	err := Errorf(fs.ErrNotExist, "workspace %s does not exist", "/home/u/p")
	if got := Message(err, ""); got != "workspace /home/u/p does not exist" {
		t.Errorf("Message = %q", got)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Error("the cause is not reachable with errors.Is")
	}
}

func TestReasonIsTheOSsWordsOrSandboxds(t *testing.T) {
	_, openErr := os.Open(filepath.Join(t.TempDir(), "missing"))
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{openErr, "no such file or directory"},
		{fmt.Errorf("layer: stage %s: %w", "/home/u/.local/state/sandboxd/txn/1.stage", syscall.EACCES), "permission denied"},
		{fmt.Errorf("cgroup: %w", &fs.PathError{Op: "mkdir", Path: "/sys/fs/cgroup/x", Err: syscall.EROFS}), "read-only file system"},
		{fmt.Errorf("wrapped: %w", fs.ErrNotExist), "no such file or directory"},
		{Wrap(syscall.EPERM, "the pids controller is not delegated"), "the pids controller is not delegated"},
		{errors.New("kernelaudit: netlink message cut short"), Unknown},
	} {
		if got := Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
