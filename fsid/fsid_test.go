package fsid

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// self is this process's own identity.
func self(t *testing.T) ID {
	t.Helper()
	groups, err := os.Getgroups()
	if err != nil {
		t.Fatal(err)
	}
	return ID{UID: os.Geteuid(), GID: os.Getegid(), Groups: groups, Umask: 0o022}
}

// TestDoAsSelf: a process acting for itself needs no privilege, and its
// umask is the caller's, not the process's.
func TestDoAsSelf(t *testing.T) {
	dir := t.TempDir()
	id := self(t)
	id.Umask = 0o027
	err := Do(id, func() error {
		return os.WriteFile(filepath.Join(dir, "f"), nil, 0o666)
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 {
		t.Errorf("created with mode %v under umask 027, want 0640", st.Mode().Perm())
	}
}

// TestDoAsAnotherUnprivileged: without root, another user's identity is
// refused outright, and f never runs.
func TestDoAsAnotherUnprivileged(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("needs an unprivileged process (make test runs this package as root only)")
	}
	id := self(t)
	id.UID++
	ran := false
	err := Do(id, func() error { ran = true; return nil })
	if !errors.Is(err, ErrCannotAct) || ran {
		t.Fatalf("Do as uid %d from uid %d: err %v, ran %v", id.UID, os.Geteuid(), err, ran)
	}
}

// TestDoAsAnotherUser: as root, the kernel decides for the caller — a
// directory of another user's is closed, the caller's own is open, what
// Do creates belongs to the caller, and the credentials never reach
// another goroutine.
func TestDoAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to take on another user's identity")
	}
	base := t.TempDir()
	// t.TempDir's directories are root's and 0700: open them to all.
	for d := base; d != filepath.Dir(os.TempDir()); d = filepath.Dir(d) {
		if d != os.TempDir() {
			os.Chmod(d, 0o755)
		}
	}
	alice := ID{UID: 64101, GID: 64101, Groups: []int{64101}, Umask: 0o022}
	bob := ID{UID: 64102, GID: 64102, Groups: []int{64102, 64199}, Umask: 0o022}
	mk := func(name string, id ID, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, id.UID, id.GID); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	aliceDir, bobDir := mk("alice", alice, 0o700), mk("bob", bob, 0o700)
	groupDir := filepath.Join(base, "group")
	os.Mkdir(groupDir, 0o770)
	os.Chown(groupDir, 0, 64199)
	os.Chmod(groupDir, 0o770)

	err := Do(alice, func() error { return os.WriteFile(filepath.Join(bobDir, "x"), []byte("a"), 0o644) })
	if !errors.Is(err, os.ErrPermission) {
		t.Errorf("alice wrote into bob's 0700 directory: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(bobDir, "x")); err == nil {
		t.Error("a file appeared in bob's directory")
	}
	if err := Do(alice, func() error { return Access(bobDir, unix.R_OK) }); err == nil {
		t.Error("Access says alice may read bob's 0700 directory")
	}
	if err := Do(bob, func() error { return Access(groupDir, unix.W_OK) }); err != nil {
		t.Errorf("bob's supplementary group does not open the group's directory: %v", err)
	}
	if err := Do(alice, func() error { return Access(groupDir, unix.W_OK) }); err == nil {
		t.Error("alice, outside the group, may write the group's directory")
	}
	if err := Do(alice, func() error { return os.WriteFile(filepath.Join(aliceDir, "mine"), nil, 0o666) }); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(aliceDir, "mine"), &st); err != nil {
		t.Fatal(err)
	}
	if int(st.Uid) != alice.UID || int(st.Gid) != alice.GID || st.Mode&0o777 != 0o644 {
		t.Errorf("file made as alice: uid %d gid %d mode %o", st.Uid, st.Gid, st.Mode&0o777)
	}
	// Many goroutines after: none runs as alice.
	for i := 0; i < 50; i++ {
		if err := Do(alice, func() error { return nil }); err != nil {
			t.Fatal(err)
		}
		if fsuid, _ := unix.SetfsuidRetUid(-1); fsuid != 0 {
			t.Fatalf("a goroutine of the test runs with fsuid %d", fsuid)
		}
		if err := os.WriteFile(filepath.Join(bobDir, "root"), nil, 0o600); err != nil {
			t.Fatalf("root lost its rights after Do: %v", err)
		}
	}
}

// TestTakeGroups: TakeGroups leaves the thread's fsuid as it was and
// gives it the caller's groups.
func TestTakeGroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to change groups")
	}
	id := ID{UID: 64101, GID: 64101, Groups: []int{64101, 64150}}
	err := onThread(func() error {
		if err := TakeGroups(id); err != nil {
			return err
		}
		g, _ := unix.Getgroups()
		fsuid, _ := unix.SetfsuidRetUid(-1)
		if fsuid != 0 || len(g) != 2 {
			return errors.New("fork thread: wrong credentials")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
