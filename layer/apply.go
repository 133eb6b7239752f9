package layer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// applyOp carries out one op in the workspace ws. With check, the
// workspace entry must still be what the plan saw; if it changed since
// (an outside edit racing the commit), the op becomes a conflict instead,
// as does an op the workspace's present state rules out (a directory that
// became a mount, lost its write permission, ...). Other errors (I/O, no
// space) stop the commit; recovery resumes it. Every op can be run again
// after a crash and ends in the same state.
func applyOp(ws int, s *stager, o *op, check bool, out *Outcome, runID string) error {
	err := applyOne(ws, s, o, check, out, runID)
	if err != nil && stateError(err) {
		out.Conflicts = append(out.Conflicts, Conflict{Path: o.Path, Why: "the workspace no longer allows it (" + err.Error() + "); not committed"})
		return nil
	}
	return err
}

// stateError: the error comes from what the workspace holds now, not from
// the commit's own failure.
func stateError(err error) bool {
	for _, e := range []unix.Errno{unix.ENOENT, unix.ENOTDIR, unix.ELOOP, unix.EXDEV, unix.EBUSY,
		unix.ENOTEMPTY, unix.EEXIST, unix.EISDIR, unix.EACCES, unix.EPERM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func applyOne(ws int, s *stager, o *op, check bool, out *Outcome, runID string) error {
	if err := validRel(o.Path); err != nil {
		return err
	}
	pfd, name, err := parentOf(ws, o.Path)
	if err != nil {
		return parentGone(err, o, out)
	}
	defer unix.Close(pfd)
	// Done already (before a crash): a staged file is renamed away, a
	// symlink is in place. Either is atomic.
	if done, err := applied(pfd, name, s, o); err != nil || done {
		return err
	}
	if check && o.Expect != nil && !still(pfd, name, o.Expect) {
		if handled, err := changedDuringCommit(ws, s, o, out, runID); handled {
			return err
		}
	}
	switch o.Kind {
	case "remove":
		return removeAt(pfd, name)
	case "mkdir":
		return mkdirOver(pfd, name)
	case "place":
		return place(pfd, name, s, o)
	case "symlink":
		return symlinkOver(pfd, name, s, o, runID)
	case "meta":
		return setDirMeta(pfd, name, s, o)
	}
	return fmt.Errorf("unknown op %q", o.Kind)
}

// parentGone handles an op whose parent directory in the workspace could
// not be opened (err, from parentOf): nil when there is nothing to do
// there or the op became a conflict, else err.
func parentGone(err error, o *op, out *Outcome) error {
	if errors.Is(err, unix.ENOENT) && (o.Kind == "remove" || o.Kind == "meta") {
		return nil
	}
	if unreachable(err) {
		// The way there changed under the commit (a directory became a
		// symlink or a mount, or went away): nothing is written there.
		out.Conflicts = append(out.Conflicts, Conflict{Path: o.Path, Why: "its directory in the workspace is no longer a plain directory below the workspace (" + err.Error() + "); not committed"})
		return nil
	}
	return err
}

// changedDuringCommit handles an op whose workspace entry is no longer
// what the plan saw. handled says the op is settled (as a conflict, or,
// for a place, by placing the file under its conflict name instead) and
// err is its result; a mkdir or meta op is not handled and goes ahead.
func changedDuringCommit(ws int, s *stager, o *op, out *Outcome, runID string) (handled bool, err error) {
	switch o.Kind {
	case "place":
		saved := o.Path + conflictSuffix + short(runID)
		if strings.HasSuffix(o.Path, saved[len(o.Path):]) {
			// Already the saved copy's name, and taken: keep what is there.
			out.Conflicts = append(out.Conflicts, Conflict{Path: o.Path, Why: "the name for the command's version was taken during the commit; not committed"})
			return true, nil
		}
		out.Conflicts = append(out.Conflicts, Conflict{Path: o.Path, SavedAs: saved, Why: "changed in the workspace during the commit; the workspace's version stays"})
		alt := *o
		alt.Path, alt.Expect = saved, &expect{Absent: true}
		return true, applyOne(ws, s, &alt, true, out, runID)
	case "remove", "symlink":
		out.Conflicts = append(out.Conflicts, Conflict{Path: o.Path, Why: "changed in the workspace during the commit; the workspace's version stays"})
		return true, nil
	}
	return false, nil
}

// mkdirOver makes the directory name in pfd; a directory already there
// is kept, anything else there is removed first.
func mkdirOver(pfd int, name string) error {
	err := unix.Mkdirat(pfd, name, 0o700)
	if errors.Is(err, unix.EEXIST) {
		st, serr := lstatAt(pfd, name)
		if serr == nil && fileType(&st) == unix.S_IFDIR {
			return nil
		}
		if err := removeAt(pfd, name); err != nil {
			return err
		}
		err = unix.Mkdirat(pfd, name, 0o700)
	}
	return err
}

// symlinkOver makes o's symlink beside name in pfd, with its owner and
// times, and renames it over name.
func symlinkOver(pfd int, name string, s *stager, o *op, runID string) error {
	tmp := ".sandboxd-link-" + short(runID)
	unix.Unlinkat(pfd, tmp, 0)
	if err := unix.Symlinkat(o.Target, pfd, tmp); err != nil {
		return err
	}
	if s.chown {
		if err := unix.Fchownat(pfd, tmp, o.UID, o.GID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	if o.Mtime != 0 {
		ts := []unix.Timespec{unix.NsecToTimespec(o.Atime), unix.NsecToTimespec(o.Mtime)}
		if err := unix.UtimesNanoAt(pfd, tmp, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return replaceWith(pfd, tmp, name)
}

// setDirMeta sets the owner, mode and times of the directory name in pfd.
func setDirMeta(pfd int, name string, s *stager, o *op) error {
	fd, err := openBeneath(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if unreachable(err) {
		return nil // gone, or no longer a directory: nothing to set
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if s.chown {
		if err := unix.Fchown(fd, o.UID, o.GID); err != nil {
			return err
		}
	}
	if err := unix.Fchmod(fd, o.Mode); err != nil {
		return err
	}
	if o.Mtime != 0 {
		ts := []unix.Timespec{unix.NsecToTimespec(o.Atime), unix.NsecToTimespec(o.Mtime)}
		return unix.UtimesNanoAt(fd, "", ts, unix.AT_EMPTY_PATH)
	}
	return nil
}

// applied reports whether a place or symlink op has already happened.
func applied(pfd int, name string, s *stager, o *op) (bool, error) {
	switch o.Kind {
	case "place":
		if s.fd < 0 {
			return true, nil // staging gone: every file was placed
		}
		if err := validName(o.Stage); err != nil {
			return false, err
		}
		_, err := lstatAt(s.fd, o.Stage)
		return errors.Is(err, unix.ENOENT), nil
	case "symlink":
		buf := make([]byte, len(o.Target)+1)
		n, err := unix.Readlinkat(pfd, name, buf)
		return err == nil && string(buf[:n]) == o.Target, nil
	}
	return false, nil
}

// place moves a staged file to name in pfd, replacing what is there (a
// directory is removed first).
func place(pfd int, name string, s *stager, o *op) error {
	err := replaceFrom(s.fd, o.Stage, pfd, name)
	if !errors.Is(err, unix.EXDEV) {
		return err
	}
	// Another mount: copy next to the target, then rename into place.
	src, err := openBeneath(s.fd, o.Stage, unix.O_RDONLY)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(src), o.Stage)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(src, &st); err != nil {
		return err
	}
	tmp := ".sandboxd-copy-" + o.Stage
	unix.Unlinkat(pfd, tmp, 0)
	_, dst, err := copyInto(pfd, tmp, f, 0o600, make([]byte, copyBuffer))
	if err != nil {
		return err
	}
	fd := int(dst.Fd())
	if s.chown {
		unix.Fchown(fd, int(st.Uid), int(st.Gid))
	}
	unix.Fchmod(fd, st.Mode&0o1777)
	unix.UtimesNanoAt(fd, "", []unix.Timespec{st.Atim, st.Mtim}, unix.AT_EMPTY_PATH)
	if err := dst.Close(); err != nil {
		return err
	}
	if err := replaceWith(pfd, tmp, name); err != nil {
		return err
	}
	return unix.Unlinkat(s.fd, o.Stage, 0)
}

// replaceWith renames tmp over name in the same directory, removing a
// directory at name first.
func replaceWith(dir int, tmp, name string) error { return replaceFrom(dir, tmp, dir, name) }

func replaceFrom(from int, old string, to int, name string) error {
	err := unix.Renameat(from, old, to, name)
	if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
		if err := removeAt(to, name); err != nil {
			return err
		}
		err = unix.Renameat(from, old, to, name)
	}
	return err
}

// unreachable errors come from resolving a path that now leaves the
// workspace, crosses a mount or lost a directory.
func unreachable(err error) bool {
	return errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ENOENT)
}

// still reports whether name in dir is what e says.
func still(dir int, name string, e *expect) bool {
	st, err := lstatAt(dir, name)
	if errors.Is(err, unix.ENOENT) {
		return e.Absent
	}
	if err != nil {
		return false
	}
	return !e.Absent && st.Ino == e.Ino && nanos(st.Ctime) == e.Ctime
}

func validName(n string) error {
	if n == "" || n != filepath.Base(n) || n == "." || n == ".." {
		return fmt.Errorf("bad staged name %q", n)
	}
	if _, err := strconv.Atoi(n); err != nil {
		return fmt.Errorf("bad staged name %q", n)
	}
	return nil
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
