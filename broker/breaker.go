package broker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sandboxd/sandboxd/atomicfile"
	"golang.org/x/sys/unix"
)

// Breaker thresholds (docs/ARCHITECTURE.md §3.6): 3 consecutive or 10 of
// the last 50 decisions denied.
const (
	breakerConsecutive = 3
	breakerWindow      = 50
	breakerInWindow    = 10
)

// Breaker is the per-session circuit breaker. Its state lives in a file
// per session under dir (sandboxd's state directory, out of the
// sandbox's reach), so it holds across `sandboxd run` invocations of the
// same session; every update happens under an exclusive lock.
type Breaker struct {
	dir string
	now func() time.Time
	// do does the file work (as the caller whose state it is).
	do func(func() error) error
}

// breakerState is the file's content.
type breakerState struct {
	Recent      []bool    `json:"recent"` // newest last; true = denied
	Consecutive int       `json:"consecutive"`
	Locked      bool      `json:"locked"`
	LockedAt    time.Time `json:"locked_at,omitzero"`
	Reason      string    `json:"reason,omitempty"`
}

// NewBreaker keeps breaker state under dir.
func NewBreaker(dir string) *Breaker {
	return &Breaker{dir: dir, now: time.Now, do: func(f func() error) error { return f() }}
}

// WithActor has do do every read and write of b's state: the front end
// makes them the caller's (package fsid), so the state is the caller's
// own. It returns b.
func (b *Breaker) WithActor(do func(func() error) error) *Breaker {
	b.do = do
	return b
}

func (b *Breaker) file(session string) string {
	sum := sha256.Sum256([]byte(session))
	return filepath.Join(b.dir, hex.EncodeToString(sum[:12]))
}

// read is the session's state as it is. It creates nothing, neither
// the directory nor the lock: a reader (sessions/{id}, a decision)
// leaves the state as it found it, and the file is only ever replaced
// whole (atomicfile), so a read needs no lock.
func (b *Breaker) read(session string) (st breakerState, err error) {
	err = b.do(func() (err error) {
		st, err = b.load(b.file(session))
		return err
	})
	return st, err
}

// load reads the state file of base (none: a fresh session).
func (b *Breaker) load(base string) (breakerState, error) {
	var st breakerState
	b1, err := os.ReadFile(base + ".json")
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return st, fmt.Errorf("broker: breaker state: %w", err)
	default:
		if err := json.Unmarshal(b1, &st); err != nil {
			// A damaged state file fails closed: locked until a human
			// lifts it.
			st = breakerState{Locked: true, LockedAt: b.now(), Reason: "breaker state unreadable"}
		}
	}
	return st, nil
}

// update runs f on the session's state under the lock and saves it.
func (b *Breaker) update(session string, f func(*breakerState)) (st breakerState, err error) {
	err = b.do(func() (err error) {
		st, err = b.updateHere(session, f)
		return err
	})
	return st, err
}

// updateHere is update on the calling goroutine.
func (b *Breaker) updateHere(session string, f func(*breakerState)) (breakerState, error) {
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
		return breakerState{}, fmt.Errorf("broker: breaker state: %w", err)
	}
	base := b.file(session)
	lock, err := os.OpenFile(base+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return breakerState{}, fmt.Errorf("broker: breaker lock: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return breakerState{}, fmt.Errorf("broker: breaker lock: %w", err)
	}
	st, err := b.load(base)
	if err != nil {
		return st, err
	}
	f(&st)
	out, _ := json.Marshal(st)
	if err := atomicfile.WriteFile(base+".json", out, 0o600); err != nil {
		return st, fmt.Errorf("broker: breaker state: %w", err)
	}
	return st, nil
}

// Locked reports whether the session is locked down and why.
func (b *Breaker) Locked(session string) (bool, string, error) {
	st, err := b.read(session)
	return st.Locked, st.Reason, err
}

// Headroom is how many denials in a row the session can still take
// before it locks (0 when it is locked): a lower bound, since denials
// leaving the window are not counted.
func (b *Breaker) Headroom(session string) (int, error) {
	st, err := b.read(session)
	if err != nil || st.Locked {
		return 0, err
	}
	n := 0
	for _, d := range st.Recent {
		if d {
			n++
		}
	}
	return max(min(breakerConsecutive-st.Consecutive, breakerInWindow-n), 0), nil
}

// Record adds one decision and locks the session when the thresholds are
// crossed. It reports whether this decision locked it.
func (b *Breaker) Record(session string, denied bool) (bool, error) {
	tripped := false
	_, err := b.update(session, func(st *breakerState) {
		st.Recent = append(st.Recent, denied)
		if len(st.Recent) > breakerWindow {
			st.Recent = st.Recent[len(st.Recent)-breakerWindow:]
		}
		if denied {
			st.Consecutive++
		} else {
			st.Consecutive = 0
		}
		n := 0
		for _, d := range st.Recent {
			if d {
				n++
			}
		}
		if st.Locked {
			return
		}
		switch {
		case st.Consecutive >= breakerConsecutive:
			st.Reason = fmt.Sprintf("%d denials in a row", st.Consecutive)
		case n >= breakerInWindow:
			st.Reason = fmt.Sprintf("%d of the last %d decisions were denials", n, len(st.Recent))
		default:
			return
		}
		st.Locked, st.LockedAt, tripped = true, b.now(), true
	})
	return tripped, err
}

// Lift ends a lockdown; only a human's decision may call it.
func (b *Breaker) Lift(session string) error {
	_, err := b.update(session, func(st *breakerState) { *st = breakerState{} })
	return err
}

// Adopt carries over the state a session had under an older name for it
// (before sessions were scoped by the caller's uid, the bare name the
// caller gave): a lockdown is lifted only by a person, never by an
// upgrade. It does nothing when the session has state of its own or the
// old name has none.
func (b *Breaker) Adopt(session, old string) error {
	if old == session {
		return nil
	}
	prev, err := os.ReadFile(b.file(old) + ".json")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("broker: breaker state: %w", err)
	}
	var was breakerState
	if json.Unmarshal(prev, &was) != nil {
		was = breakerState{Locked: true, LockedAt: b.now(), Reason: "breaker state unreadable"}
	}
	_, err = b.update(session, func(st *breakerState) {
		if len(st.Recent) == 0 && !st.Locked {
			*st = was
		}
	})
	if err != nil {
		return err
	}
	// Adopted once: a person lifting the session's lockdown later must
	// not see the old state come back.
	return b.do(func() error {
		os.Remove(b.file(old) + ".json")
		os.Remove(b.file(old) + ".lock")
		return nil
	})
}
