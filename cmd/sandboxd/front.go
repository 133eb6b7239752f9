package main

import (
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sibling"
	"golang.org/x/sys/unix"
)

// What the lean front (cmd/sandboxd-front, installed as sandboxd) and
// the core it executes (this program, installed beside it as
// sandboxd-core) agree on.
const (
	// frontStampEnv carries the front's build stamp to the core, which
	// removes it first thing.
	frontStampEnv = "SANDBOXD_FRONT_STAMP"
	// frontUnstamped is the stamp of a front go build made.
	frontUnstamped = "unstamped"
	coreName       = "sandboxd-core"
	frontName      = "sandboxd"
)

// fromFront reads and removes the front's stamp from the environment,
// before anything else can see it (a command must not inherit it), and
// says why this core refuses to go on ("" when it does not): a front of
// another build executed it. Without the variable, the core was run
// directly.
func fromFront() string {
	got, ok := os.LookupEnv(frontStampEnv)
	os.Unsetenv(frontStampEnv)
	if !ok {
		return ""
	}
	want := sandbox.BuildStamp()
	if want == "" {
		want = frontUnstamped
	}
	if got == want {
		return ""
	}
	return "sandboxd and its core " + coreName + " are of different builds (installed apart, or one replaced); reinstall both from one build (make build builds them together)"
}

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
	return "the lean front " + front + " takes runs through the daemon and executes this core, " + self + ", for everything else (their build stamps must match)"
}
