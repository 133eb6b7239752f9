package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/sandbox"
	"golang.org/x/sys/unix"
)

// helperName is the separate helper binary's name, beside sandboxd's own
// executable (cmd/sandboxd-helper; `make build` builds both).
const helperName = "sandboxd-helper"

// helperChoice is which program a run starts as its helper.
type helperChoice struct {
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

// describe is doctor's and -v's sentence for the choice.
func (c helperChoice) describe() string {
	if c.File != nil {
		return "the lean helper binary " + c.Path + " (its build stamp must be sandboxd's: checked at every run)"
	}
	return "sandboxd itself (" + c.Path + "): " + c.Why
}

// log says which helper the runs start, at -v.
func (c helperChoice) log(log *slog.Logger) {
	log.Debug("sandbox helper", "path", c.Path, "separate", c.File != nil, "why", c.Why)
}

// findHelper finds the separate helper beside this executable and opens
// it once, for every run of the process. A stamped build only (an
// unstamped one has nothing a helper could prove it shares), and only a
// helper nobody but its owner can change (trustedHelper); otherwise, or
// when there is none, sandboxd runs itself as its helper, as before the
// split. The runs execute the open file (sandbox.Spec.Helper), never the
// path again.
func findHelper() helperChoice {
	self, _ := os.Executable()
	if real, err := filepath.EvalSymlinks(self); err == nil {
		self = real
	}
	c := helperChoice{Path: self}
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
	return helperChoice{File: f, Path: filepath.Join(filepath.Dir(self), helperName)}
}

// openHelper opens dir's sandboxd-helper when helperFault finds nothing
// wrong with it, or says why not and whether one is there (refused).
// owner is the uid owning sandboxd's own executable; root, whether this
// process runs as root.
func openHelper(dir string, owner int, root bool) (f *os.File, why string, refused bool) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS}
	dfd, err := unix.Openat2(unix.AT_FDCWD, dir, &how)
	if err != nil {
		return nil, "its directory " + dir + " cannot be opened", false
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, helperName, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, "there is no " + helperName + " beside it", false
	}
	if err != nil {
		return nil, helperName + " beside it cannot be opened", true
	}
	f = os.NewFile(uintptr(fd), filepath.Join(dir, helperName))
	if why = helperFault(dfd, fd, owner, root); why == "" {
		why = ancestorFault(dir, owner, root)
	}
	if why != "" {
		f.Close()
		return nil, helperName + " beside it is not used: " + why, true
	}
	return f, "", false
}

// helperFault says what is wrong with the helper fd in the directory dfd,
// or "" when nothing is.
func helperFault(dfd, fd, owner int, root bool) string {
	var dst, st unix.Stat_t
	if unix.Fstat(dfd, &dst) != nil || unix.Fstat(fd, &st) != nil {
		return "it cannot be examined"
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "it is not a regular file"
	}
	if why := trustedHelper(dst, owner, root); why != "" {
		return "its directory " + why
	}
	if dst.Mode&0o001 == 0 {
		return "its directory may not be passed through by everyone (a run's helper starts as the caller's uid)"
	}
	if why := trustedHelper(st, owner, root); why != "" {
		return "it " + why
	}
	if st.Mode&0o111 != 0o111 {
		return "it is not executable by everyone (a run's helper starts as the caller's uid)"
	}
	return ""
}

// ancestorFault says which directory above dir someone other than root
// (or sandboxd's owner) could change, or "" when none: a run executes
// the helper by its path, so whoever could rename a directory on the way
// could put another program there.
func ancestorFault(dir string, owner int, root bool) string {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return "the directory " + d + " above it cannot be examined"
		}
		// A sticky directory (/tmp) lets nobody rename or remove what
		// others own in it; the owner of what lies below is checked next.
		why := trustedHelper(st, owner, root)
		if why == writableWhy && st.Mode&unix.S_ISVTX != 0 {
			why = ""
		}
		if why != "" {
			return "the directory " + d + " above it " + why
		}
		if st.Mode&0o001 == 0 {
			// A run executes the helper by this path as the caller's
			// uid, which must be let through every directory.
			return "the directory " + d + " above it may not be passed through by everyone (a run's helper starts as the caller's uid)"
		}
		if d == "/" {
			return ""
		}
	}
}

// trustedHelper says why a file or directory with st may not hold
// sandboxd's helper, or "" when it may: owned by root or by owner (the
// owner of sandboxd's own executable, who could replace that one too),
// by root alone when this process is root, and writable by its owner
// alone. Anyone else who could change it would run code as every
// caller's helper, before any of the sandbox's confinement.
func trustedHelper(st unix.Stat_t, owner int, root bool) string {
	switch {
	case root && st.Uid != 0:
		return fmt.Sprintf("is owned by uid %d, not root (sandboxd runs as root)", st.Uid)
	case st.Uid != 0 && int(st.Uid) != owner:
		return fmt.Sprintf("is owned by uid %d, neither root nor sandboxd's owner (uid %d)", st.Uid, owner)
	case st.Mode&0o022 != 0:
		return writableWhy
	}
	return ""
}

// writableWhy is trustedHelper's reason for a file others may write.
const writableWhy = "may be written by its group or others"
