package runcmd

import (
	"log/slog"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/sibling"
	"golang.org/x/sys/unix"
)

// helperName is the separate helper binary's name, beside sandboxd's own
// executable (cmd/sandboxd-helper; `make build` builds both).
const helperName = "sandboxd-helper"

// HelperChoice is which program a run starts as its helper.
type HelperChoice struct {
	// File is the separate helper, open (O_PATH) and checked; nil:
	// sandboxd itself (/proc/self/exe).
	File *os.File
	// Path is where File was found, or sandboxd's own executable.
	Path string
	// Why says why sandboxd runs itself (File nil), as a sentence.
	Why string
	// Refused: a helper is there but may not be trusted (Why says why),
	// which doctor warns of.
	Refused bool
}

// Describe is doctor's and -v's sentence for the choice.
func (c HelperChoice) Describe() string {
	if c.File != nil {
		return "the lean helper binary " + c.Path + " (its build stamp must be sandboxd's: checked at every run)"
	}
	return "sandboxd itself (" + c.Path + "): " + c.Why
}

// Log says which helper the runs start, at -v.
func (c HelperChoice) Log(log *slog.Logger) {
	log.Debug("sandbox helper", "path", c.Path, "separate", c.File != nil, "why", c.Why)
}

// FindHelper finds the separate helper beside this executable and opens
// it once, for every run of the process. A stamped build only (an
// unstamped one has nothing a helper could prove it shares), and only a
// helper nobody but its owner can change (trustedHelper); otherwise, or
// when there is none, sandboxd runs itself as its helper, as before the
// split. The runs execute the open file (sandbox.Spec.Helper), never the
// path again.
func FindHelper() HelperChoice {
	self, _ := os.Executable()
	if real, err := filepath.EvalSymlinks(self); err == nil {
		self = real
	}
	c := HelperChoice{Path: self}
	if sandbox.BuildStamp() == "" {
		c.Why = "an unstamped build (go build or go run rather than make build) never runs a separate helper"
		return c
	}
	if self == "" {
		c.Why = "its own executable's path cannot be read"
		return c
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		c.Why = "its own executable cannot be examined"
		return c
	}
	f, why, refused := openHelper(filepath.Dir(self), int(st.Uid), os.Geteuid() == 0)
	if f == nil {
		c.Why, c.Refused = why, refused
		return c
	}
	return HelperChoice{File: f, Path: filepath.Join(filepath.Dir(self), helperName)}
}

// openHelper opens dir's sandboxd-helper when package sibling finds
// nothing wrong with it, or says why not and whether one is there
// (refused). owner is the uid owning sandboxd's own executable; root,
// whether this process runs as root.
func openHelper(dir string, owner int, root bool) (f *os.File, why string, refused bool) {
	return sibling.Open(dir, helperName, owner, root, "a run's helper starts as the caller's uid")
}
