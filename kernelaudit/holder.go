package kernelaudit

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/atomicfile"
	"golang.org/x/sys/unix"
)

// DefaultDir is where holders coordinate: machine-wide and root-only. A
// state file left there by a holder that crashed before a reboot is
// recognised (audit is off again) and discarded.
// The directory keeps the package's former name: a daemon of an earlier
// build may have left a holder's state there, and the next must find it.
const DefaultDir = "/run/sandboxd/kaudit"

// MinBacklog is the backlog limit Landlock's records need under bursts.
const MinBacklog = 8192

// saved is what the first holder found and changed.
type saved struct {
	Mask         uint32 `json:"mask"` // which fields sandboxd changed
	Enabled      uint32 `json:"enabled"`
	BacklogLimit uint32 `json:"backlog_limit"`
}

// Holder is one sandboxd run that needs kernel audit on.
type Holder struct {
	dir  string
	self *os.File // locked for the holder's lifetime
}

// Acquire turns kernel audit on (and the backlog up) if it is not, and
// registers the caller as a holder until Release.
func Acquire(dir string) (*Holder, error) {
	if err := os.MkdirAll(filepath.Join(dir, "holders"), 0o700); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return nil, ErrPermission
		}
		return nil, fmt.Errorf("kernelaudit: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	c, err := dial()
	if err != nil {
		return nil, err
	}
	defer c.close()
	st, err := c.status()
	if err != nil {
		return nil, err
	}
	live := pruneHolders(dir)
	statePath := filepath.Join(dir, "state.json")
	if _, err := os.Stat(statePath); errors.Is(err, fs.ErrNotExist) {
		// Nobody changed anything yet (or a previous holder restored).
		want, mask := st, uint32(0)
		if st.Enabled == 0 {
			want.Enabled, mask = 1, mask|maskEnabled
		}
		if st.BacklogLimit < MinBacklog {
			want.BacklogLimit, mask = MinBacklog, mask|maskBacklogLimit
		}
		if mask != 0 {
			// Record first, then change: a crash in between leaves a
			// state file whose restore is a no-op. Not synced: it must
			// outlive a crash of sandboxd, not of the machine (a reboot
			// resets the kernel's settings too).
			b, _ := json.Marshal(saved{Mask: mask, Enabled: st.Enabled, BacklogLimit: st.BacklogLimit})
			if err := writeState(statePath, b); err != nil {
				return nil, err
			}
			if err := c.set(mask, want); err != nil {
				os.Remove(statePath)
				return nil, err
			}
		}
	} else if live == 0 && st.Enabled == 0 {
		// A crashed holder's state exists but audit is off again (reboot
		// clears /run, so someone turned it off): start over.
		os.Remove(statePath)
		unlock()
		return Acquire(dir)
	}
	self, err := newHolderFile(dir)
	if err != nil {
		return nil, err
	}
	return &Holder{dir: dir, self: self}, nil
}

// Release unregisters the holder and, if it was the last, restores what
// the first holder changed.
func (h *Holder) Release() error {
	if h == nil || h.self == nil {
		return nil
	}
	unlock, err := lockDir(h.dir)
	if err != nil {
		return err
	}
	defer unlock()
	os.Remove(h.self.Name())
	h.self.Close()
	h.self = nil
	if pruneHolders(h.dir) > 0 {
		return nil
	}
	return restore(h.dir)
}

// Recovery is what Recover did.
type Recovery struct {
	// Restored: a holder that died had left audit changed, and the
	// settings it recorded (Enabled, BacklogLimit) are back.
	Restored              bool
	Enabled, BacklogLimit uint32
	// Holders is how many live holders keep audit changed: their
	// settings stay, and the last of them restores the original ones.
	Holders int
}

// Recover restores, now, what holders that died (killed with SIGKILL,
// say) left changed, unless live holders still need it: a long-lived
// process (the daemon) calls it when it starts, so that a crash's
// changes do not wait for the next holder to come and go. With no
// state file it does nothing, and needs no privilege.
func Recover(dir string) (Recovery, error) {
	statePath := filepath.Join(dir, "state.json")
	if _, err := os.Lstat(statePath); errors.Is(err, fs.ErrNotExist) {
		return Recovery{}, nil
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return Recovery{}, err
	}
	defer unlock()
	if live := pruneHolders(dir); live > 0 {
		return Recovery{Holders: live}, nil
	}
	s, err := restoreSaved(dir)
	if err != nil || s == nil {
		return Recovery{}, err
	}
	return Recovery{Restored: true, Enabled: s.Enabled, BacklogLimit: s.BacklogLimit}, nil
}

// restore puts back the recorded settings and removes the record.
func restore(dir string) error {
	_, err := restoreSaved(dir)
	return err
}

// restoreSaved is restore that returns what it put back (nil: there
// was no record).
func restoreSaved(dir string) (*saved, error) {
	statePath := filepath.Join(dir, "state.json")
	b, err := os.ReadFile(statePath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kernelaudit: %w", err)
	}
	var s saved
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("kernelaudit: state file: %w", err)
	}
	c, err := dial()
	if err != nil {
		return nil, err
	}
	defer c.close()
	if s.Mask != 0 {
		if err := c.set(s.Mask, Status{Enabled: s.Enabled, BacklogLimit: s.BacklogLimit}); err != nil {
			return nil, err
		}
	}
	if err := os.Remove(statePath); err != nil {
		return nil, fmt.Errorf("kernelaudit: %w", err)
	}
	return &s, nil
}

// lockDir takes the directory's exclusive lock.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("kernelaudit: lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("kernelaudit: lock: %w", err)
	}
	done := false
	return func() {
		if !done {
			done = true
			f.Close()
		}
	}, nil
}

// newHolderFile creates and locks this holder's file.
func newHolderFile(dir string) (*os.File, error) {
	var r [8]byte
	rand.Read(r[:])
	p := filepath.Join(dir, "holders", fmt.Sprintf("%d-%s", os.Getpid(), hex.EncodeToString(r[:])))
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("kernelaudit: holder: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(p)
		return nil, fmt.Errorf("kernelaudit: holder lock: %w", err)
	}
	return f, nil
}

// pruneHolders removes files of holders that died (their lock is free)
// and returns how many live holders remain.
func pruneHolders(dir string) int {
	entries, _ := os.ReadDir(filepath.Join(dir, "holders"))
	live := 0
	for _, e := range entries {
		p := filepath.Join(dir, "holders", e.Name())
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			os.Remove(p) // its holder is gone
		} else {
			live++
		}
		f.Close()
	}
	return live
}

// writeState replaces the state file; not synced (see Acquire).
func writeState(path string, b []byte) error {
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("kernelaudit: %w", err)
	}
	return nil
}
