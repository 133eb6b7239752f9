package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReleasesLockHandoff: a cache layer's lock that a pending release
// holds is waited for, and taken the moment the release lets it go; one
// that a live run holds (no pending release) is reported taken at once;
// after Close a run hands nothing over.
func TestReleasesLockHandoff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	open := func() int {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		return fd
	}
	held, next := open(), open()
	defer unix.Close(next)
	key, err := keyOf(held)
	if err != nil {
		t.Fatal(err)
	}
	p := NewReleases()
	if waited, err := p.lock(held, key); err != nil || waited {
		t.Fatalf("a free lock: waited %v, err %v", waited, err)
	}
	// A live run holds it: taken, at once.
	if _, err := p.lock(next, key); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Fatalf("a lock a live run holds: err %v, want EWOULDBLOCK", err)
	}
	// Its release is now pending: the next run waits for it.
	if !p.add([]fileKey{key}) {
		t.Fatal("an open Releases took nothing over")
	}
	got := make(chan error, 1)
	go func() {
		waited, err := p.lock(next, key)
		if err == nil && !waited {
			err = errors.New("took the lock without waiting")
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the lock was taken while the pending release held it: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	p.unlock(key, held)
	p.pending.Done()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	p.Close()
	if p.add(nil) || p.later(func() {}) {
		t.Error("a closed Releases took a release over")
	}
	var nilp *Releases
	if nilp.later(func() {}) {
		t.Error("a nil Releases took a release over")
	}
	nilp.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

// TestReleasesLockWaitBounded: a pending release that never lets its
// lock go does not hang the next run of the cache: after the bound it
// is told the lock is taken (an ephemeral layer), as beside a live run.
func TestReleasesLockWaitBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	var fds [2]int
	for i := range fds {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		fds[i] = fd
	}
	defer unix.Close(fds[1]) // fds[0] is closed by unlock
	key, err := keyOf(fds[0])
	if err != nil {
		t.Fatal(err)
	}
	p := NewReleases()
	p.wait = 100 * time.Millisecond
	if _, err := p.lock(fds[0], key); err != nil {
		t.Fatal(err)
	}
	if !p.add([]fileKey{key}) {
		t.Fatal("an open Releases took nothing over")
	}
	start := time.Now()
	waited, err := p.lock(fds[1], key)
	if !errors.Is(err, unix.EWOULDBLOCK) || !waited {
		t.Fatalf("a lock a stalled release holds: waited %v, err %v; want waited, EWOULDBLOCK", waited, err)
	}
	if d := time.Since(start); d < p.wait {
		t.Fatalf("gave up after %v, before the bound %v", d, p.wait)
	}
	p.unlock(key, fds[0])
	p.pending.Done()
	p.Close()
}
