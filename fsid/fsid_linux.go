package fsid

import (
	"errors"
	"fmt"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"
)

// ID is a caller's file-system identity.
type ID struct {
	// UID and GID are the caller's user and primary group.
	UID, GID int
	// Groups are the caller's supplementary groups (nil: none).
	Groups []int
	// Umask is the caller's: files Do creates get no bit it masks.
	Umask uint32
}

// ErrCannotAct means this process may not take on the caller's identity
// (it is not root, and the caller is someone else).
var ErrCannotAct = errors.New("fsid: this process cannot act as the caller")

// Do runs f with id's file-system identity and returns its error. f runs
// on a goroutine locked to a fresh thread that ends with it; goroutines
// f starts do not carry the identity (give them a Do of their own).
func Do(id ID, f func() error) error {
	return onThread(func() error {
		if err := become(id, true); err != nil {
			return err
		}
		return f()
	})
}

// TakeGroups gives the calling thread id's supplementary groups, for
// starting a process whose Credential is id's uid and gid: the child
// inherits them (its Credential keeps them, NoSetGroups), while the
// thread keeps the fsuid the parent needs to write the child's id maps.
// The caller must have locked its goroutine to the thread and never
// unlock it, so that the runtime ends the thread with the goroutine.
func TakeGroups(id ID) error { return setGroups(id) }

// onThread runs f on a goroutine locked to its thread and never unlocked:
// the runtime ends the thread with the goroutine, so the credentials f's
// thread took on die with it.
func onThread(f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		done <- f()
	}()
	return <-done
}

// become gives the current thread id's groups, umask, fsgid and fsuid,
// and checks that each took: setfsuid and setfsgid fail silently.
func become(id ID, umask bool) error {
	if id.UID < 0 || id.GID < 0 {
		return fmt.Errorf("%w: no such ids (%d, %d)", ErrCannotAct, id.UID, id.GID)
	}
	if err := setGroups(id); err != nil {
		return err
	}
	if umask {
		// The umask belongs to the file-system context the process's
		// threads share; this thread takes a copy of its own first.
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return fmt.Errorf("fsid: a file-system context of the thread's own: %w", err)
		}
		unix.Umask(int(id.Umask & 0o777))
	}
	unix.SetfsgidRetGid(id.GID)
	if got, _ := unix.SetfsgidRetGid(-1); got != id.GID {
		return fmt.Errorf("%w: fsgid %d, not %d", ErrCannotAct, got, id.GID)
	}
	unix.SetfsuidRetUid(id.UID)
	if got, _ := unix.SetfsuidRetUid(-1); got != id.UID {
		return fmt.Errorf("%w: fsuid %d, not %d", ErrCannotAct, got, id.UID)
	}
	return nil
}

// setGroups gives the current thread id's supplementary groups, unless
// it has them already (an unprivileged process acting for itself may
// not call setgroups at all).
func setGroups(id ID) error {
	have, err := unix.Getgroups()
	if err != nil {
		return fmt.Errorf("fsid: groups: %w", err)
	}
	want := slices.Clone(id.Groups)
	slices.Sort(want)
	want = slices.Compact(want)
	slices.Sort(have)
	have = slices.Compact(have)
	if slices.Equal(have, want) {
		return nil
	}
	// x/sys/unix's Setgroups is the raw system call: this thread only.
	if err := unix.Setgroups(want); err != nil {
		return fmt.Errorf("%w: groups: %w", ErrCannotAct, err)
	}
	return nil
}

// Access reports whether id may open path as mode asks (unix.R_OK,
// W_OK, X_OK), as the kernel decides for id: permission bits, ACLs,
// LSMs, read-only mounts and immutable files. Call it inside Do.
func Access(path string, mode uint32) error {
	// AT_EACCESS: the thread's own (fs) ids, not the real ones.
	return unix.Faccessat2(unix.AT_FDCWD, path, mode, unix.AT_EACCESS)
}
