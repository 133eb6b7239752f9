package main

import (
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/sibling"
	"golang.org/x/sys/unix"
)

// The names make build installs sandboxd's programs under (runcmd).
const (
	coreName  = runcmd.CoreName
	frontName = runcmd.FrontName
)

// sandboxdPath is the program to name wherever sandboxd writes its own
// path for later (the agents' hooks and Claude Code's shell prefix):
// the front beside this executable when this one is installed as the
// core (make build's layout), else this executable. The helper and the
// evidence reader are this executable's own business and keep
// /proc/self/exe.
func sandboxdPath() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	if filepath.Base(self) != coreName {
		return self, nil
	}
	// The front is named only when it passes the checks the front makes
	// of this core (package sibling): an agent's hook runs it for every
	// command, so a front others could have put there is never written.
	dir := filepath.Dir(self)
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		return self, nil
	}
	f, _, _ := sibling.Open(dir, frontName, int(st.Uid), os.Geteuid() == 0, "an agent's hook starts it for every command")
	if f == nil {
		return self, nil
	}
	f.Close()
	return filepath.Join(dir, frontName), nil
}

// frontDetail is doctor's sentence on which programs run as sandboxd:
// the core (this one) and the front that names it, or this one alone.
func frontDetail() string {
	self, err := os.Executable()
	if err != nil {
		return "its own executable's path cannot be read"
	}
	front, err := sandboxdPath()
	if err != nil || front == self {
		return self + " runs every command itself (no lean front " + frontName + " beside a core " + coreName + ")"
	}
	run := "no lean " + runcmd.RunName + " beside it, so this core takes embedded runs too"
	var st unix.Stat_t
	if unix.Stat("/proc/self/exe", &st) != nil {
		return "its own executable cannot be examined"
	}
	if f, _, _ := sibling.Open(filepath.Dir(self), runcmd.RunName, int(st.Uid), os.Geteuid() == 0, "the front starts it for every embedded run"); f != nil {
		f.Close()
		run = "the lean " + runcmd.RunName + " beside it takes embedded runs, asking this core only for the model reviewer's prompts"
	}
	return "the lean front " + front + " takes runs through the daemon and executes this core, " + self + ", for everything else; " + run + " (their build stamps must match)"
}
