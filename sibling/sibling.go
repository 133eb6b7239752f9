package sibling

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Open opens dir's program name (O_PATH) when nothing is wrong with it
// (fault), or says why not and whether one is there (refused). owner is
// the uid owning this process's own executable; root, whether this
// process runs as root; user says who the program runs as, for the
// sentence that says why everyone must be let through ("a run's helper
// starts as the caller's uid").
func Open(dir, name string, owner int, root bool, user string) (f *os.File, why string, refused bool) {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS}
	dfd, err := unix.Openat2(unix.AT_FDCWD, dir, &how)
	if err != nil {
		return nil, "its directory " + dir + " cannot be opened", false
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, "there is no " + name + " beside it", false
	}
	if err != nil {
		return nil, name + " beside it cannot be opened", true
	}
	f = os.NewFile(uintptr(fd), filepath.Join(dir, name))
	if why = fault(dfd, fd, owner, root, user); why == "" {
		why = ancestorFault(dir, owner, root, user)
	}
	if why != "" {
		f.Close()
		return nil, name + " beside it is not used: " + why, true
	}
	return f, "", false
}

// fault says what is wrong with the program fd in the directory dfd, or
// "" when nothing is.
func fault(dfd, fd, owner int, root bool, user string) string {
	var dst, st unix.Stat_t
	if unix.Fstat(dfd, &dst) != nil || unix.Fstat(fd, &st) != nil {
		return "it cannot be examined"
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "it is not a regular file"
	}
	if why := Trusted(dst, owner, root); why != "" {
		return "its directory " + why
	}
	if dst.Mode&0o001 == 0 {
		return "its directory may not be passed through by everyone (" + user + ")"
	}
	if why := Trusted(st, owner, root); why != "" {
		return "it " + why
	}
	if st.Mode&0o111 != 0o111 {
		return "it is not executable by everyone (" + user + ")"
	}
	return ""
}

// ancestorFault says which directory above dir someone other than root
// (or sandboxd's owner) could change, or "" when none: a run executes
// the helper by its path, so whoever could rename a directory on the way
// could put another program there.
func ancestorFault(dir string, owner int, root bool, user string) string {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		var st unix.Stat_t
		if err := unix.Lstat(d, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return "the directory " + d + " above it cannot be examined"
		}
		// A sticky directory (/tmp) lets nobody rename or remove what
		// others own in it; the owner of what lies below is checked next.
		why := Trusted(st, owner, root)
		if why == writableWhy && st.Mode&unix.S_ISVTX != 0 {
			why = ""
		}
		if why != "" {
			return "the directory " + d + " above it " + why
		}
		if st.Mode&0o001 == 0 {
			// A run executes the helper by this path as the caller's
			// uid, which must be let through every directory.
			return "the directory " + d + " above it may not be passed through by everyone (" + user + ")"
		}
		if d == "/" {
			return ""
		}
	}
}

// Trusted says why a file or directory with st may not hold a program of
// sandboxd's, or "" when it may: owned by root or by owner (the
// owner of sandboxd's own executable, who could replace that one too),
// by root alone when this process is root, and writable by its owner
// alone. Anyone else who could change it would run code as every
// caller (as a run's helper: before any of the sandbox's confinement).
func Trusted(st unix.Stat_t, owner int, root bool) string {
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

// writableWhy is Trusted's reason for a file others may write.
const writableWhy = "may be written by its group or others"

// Named gives a program executed through a descriptor of it
// (/proc/self/fd/N: the front executes sandboxd-run and the core so,
// and sandboxd-run the core) the name its argv[0] gives it. The kernel
// names such a process after the descriptor ("6"), and ps, top and
// pgrep would show that; an exec by path names it after the file, as
// this does (the kernel keeps 15 bytes). It renames the main thread,
// whose name is the process's, by prctl: writing /proc/self/comm would
// be a write a sandbox's ruleset refuses, and reports, when sandboxd
// runs inside one.
func Named(argv0 string) {
	name := filepath.Base(argv0)
	if name == "." || name == "/" {
		return
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if unix.Gettid() != unix.Getpid() {
		return // not on the main thread: the name stays
	}
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return
	}
	unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(p)), 0, 0, 0)
}
