package layer

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/publicerr"
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
		out.Conflicts = append(out.Conflicts, Conflict{Path: o.Path, Why: "the workspace no longer allows it (" + publicerr.Reason(err) + "); not committed"})
		return nil
	}
	return err
}

// applier carries out a commit's ops in order and records each as done
// (in batches, see journal.markDone).
type applier struct {
	ws    int
	s     *stager
	j     *journal
	out   *Outcome
	runID string
}

// apply carries out op i (see applyOp). A removal is recorded as done
// before anything after it starts, and starts only when everything before
// it is recorded: recovery replays the first op not recorded unchecked
// when it is a removal (it may be half done), which must never remove
// what a later op put there.
func (a *applier) apply(i int, o *op, check bool) error {
	if o.Kind == "remove" {
		a.j.flushDone()
	}
	if err := applyOp(a.ws, a.s, o, check, a.out, a.runID); err != nil {
		a.j.flushDone()
		return err
	}
	a.j.markDone(i)
	if o.Kind == "remove" {
		a.j.flushDone()
	}
	return nil
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
	// Done already (before a crash): a staged file or directory is
	// renamed away, a symlink is in place. Each is atomic. A commit's own
	// first run knows its staged files are all there.
	if (o.Kind != "place" && o.Kind != "placedir") || s.replay {
		if done, err := applied(pfd, name, s, o); err != nil || done {
			return err
		}
	}
	if o.Kind == "placedir" {
		return placeDir(ws, pfd, name, s, o, out, runID)
	}
	if o.Kind == "place" && check && o.Expect != nil && o.Expect.Absent {
		// Nothing was there: rename only if nothing is there still.
		if handled, err := placeNew(ws, pfd, name, s, o, out, runID); handled {
			return err
		}
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
		out.Conflicts = append(out.Conflicts, Conflict{Path: o.Path, Why: "its directory in the workspace is no longer a plain directory below the workspace (" + publicerr.Reason(err) + "); not committed"})
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

// placeNew renames o's staged file to name in pfd unless something is
// there (renameat2 RENAME_NOREPLACE: the check and the rename are one),
// which makes it a change during the commit. It is not handled when the
// file system cannot rename so (or across these directories), and the
// caller goes the general way.
func placeNew(ws, pfd int, name string, s *stager, o *op, out *Outcome, runID string) (bool, error) {
	if err := validName(o.Stage); err != nil {
		return true, err
	}
	err := renameNoReplace(s.fd, o.Stage, pfd, name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.EEXIST):
		return changedDuringCommit(ws, s, o, out, runID)
	case errors.Is(err, unix.EXDEV):
		return false, nil
	}
	return true, err
}

// renameNoReplace renames old in from to name in to unless name exists
// (EEXIST): renameat2 RENAME_NOREPLACE, or, on a file system without it,
// a look and a rename.
func renameNoReplace(from int, old string, to int, name string) error {
	err := unix.Renameat2(from, old, to, name, unix.RENAME_NOREPLACE)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		return err
	}
	if _, err := lstatAt(to, name); !errors.Is(err, unix.ENOENT) {
		if err == nil {
			return unix.EEXIST
		}
		return err
	}
	return unix.Renameat(from, old, to, name)
}

// placeDir renames o's staged directory (a new directory with everything
// below it) to name in pfd. When something took the name during the
// commit, the staged entries are moved into it if it is a directory
// (mergeDir), else the staged directory is kept beside it under its
// conflict name: what the workspace holds is never replaced.
func placeDir(ws, pfd int, name string, s *stager, o *op, out *Outcome, runID string) error {
	if err := validName(o.Stage); err != nil {
		return err
	}
	err := renameNoReplace(s.fd, o.Stage, pfd, name)
	if !errors.Is(err, unix.EEXIST) {
		return err
	}
	wfd, err := openBeneath(pfd, name, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		saved := name + conflictSuffix + short(runID)
		return saveBeside(s.fd, o.Stage, pfd, saved, o.Path, relJoin(filepath.Dir(o.Path), saved), out)
	}
	defer unix.Close(wfd)
	sfd, err := openBeneath(s.fd, o.Stage, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return err
	}
	defer unix.Close(sfd)
	if err := mergeDir(sfd, wfd, o.Path, out, runID); err != nil {
		return err
	}
	unix.Unlinkat(s.fd, o.Stage, unix.AT_REMOVEDIR) // empty unless a name was taken
	return nil
}

// mergeDir moves every entry of the staged directory src into the
// workspace directory dst (at workspace path rel), made there during the
// commit: a directory into a directory of the same name, anything else
// beside what has the name, under its conflict name.
func mergeDir(src, dst int, rel string, out *Outcome, runID string) error {
	names, err := readDirNames(src)
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, n := range names {
		err := renameNoReplace(src, n, dst, n)
		if err == nil {
			continue
		}
		if !errors.Is(err, unix.EEXIST) {
			return err
		}
		p := relJoin(rel, n)
		if handled, err := mergeSubdir(src, dst, n, p, out, runID); handled {
			if err != nil {
				return err
			}
			continue
		}
		saved := n + conflictSuffix + short(runID)
		if err := saveBeside(src, n, dst, saved, p, relJoin(rel, saved), out); err != nil {
			return err
		}
	}
	return nil
}

// mergeSubdir merges the staged directory n of src into the directory n
// of dst, when both are directories (else it is not handled).
func mergeSubdir(src, dst int, n, p string, out *Outcome, runID string) (bool, error) {
	if st, err := lstatAt(src, n); err != nil || fileType(&st) != unix.S_IFDIR {
		return false, nil
	}
	sub, err := openBeneath(dst, n, unix.O_PATH|unix.O_DIRECTORY)
	if err != nil {
		return false, nil
	}
	defer unix.Close(sub)
	ssub, err := openBeneath(src, n, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return true, err
	}
	defer unix.Close(ssub)
	return true, mergeDir(ssub, sub, p, out, runID)
}

// saveBeside moves the staged old in from to saved in to (the command's
// version of p kept beside the workspace's, at savedPath) and records the
// conflict; a saved name taken too is a conflict left uncommitted.
func saveBeside(from int, old string, to int, saved, p, savedPath string, out *Outcome) error {
	err := renameNoReplace(from, old, to, saved)
	switch {
	case err == nil:
		out.Conflicts = append(out.Conflicts, Conflict{Path: p, SavedAs: savedPath, Why: "created in the workspace during the commit; the workspace's version stays"})
		return nil
	case errors.Is(err, unix.EEXIST):
		out.Conflicts = append(out.Conflicts, Conflict{Path: p, Why: "created in the workspace during the commit, and the name for the command's version was taken; not committed"})
		return nil
	}
	return err
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
	case "place", "placedir":
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
	defer unix.Close(src)
	var st unix.Stat_t
	if err := unix.Fstat(src, &st); err != nil {
		return err
	}
	tmp := ".sandboxd-copy-" + o.Stage
	unix.Unlinkat(pfd, tmp, 0)
	fd, err := unix.Openat(pfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	if _, err := copyFD(fd, src, -1, make([]byte, copyBuffer)); err != nil {
		unix.Close(fd)
		return err
	}
	if s.chown {
		unix.Fchown(fd, int(st.Uid), int(st.Gid))
	}
	unix.Fchmod(fd, st.Mode&0o1777)
	unix.UtimesNanoAt(fd, "", []unix.Timespec{st.Atim, st.Mtim}, unix.AT_EMPTY_PATH)
	if err := unix.Close(fd); err != nil {
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
