package review

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sandboxd/sandboxd/atomicfile"
	"golang.org/x/sys/unix"
)

// Caps bound model calls and tokens per session and per hour. Zero
// allows none: a workspace may lower a cap (policy's "min" rule), and a
// zero that meant "no cap" would let it lift one.
type Caps struct {
	CallsPerSession, CallsPerHour   int64
	TokensPerSession, TokensPerHour int64
}

// ErrCapped is a review the caps refuse: nothing is sent, and the
// review falls to a person when one is reachable.
var ErrCapped = errors.New("review: the model reviewer's cap is reached")

// usage is what the caps count, kept in one file under the caller's
// state directory (every run of the caller shares it).
type usage struct {
	// Sessions holds calls and tokens by session.
	Sessions map[string]*counts `json:"sessions"`
	// Hours holds the last hour's calls, as (unix second, tokens).
	Hours []spend `json:"hours"`
	// Next numbers reservations.
	Next int64 `json:"next"`
}

type counts struct {
	Calls  int64 `json:"calls"`
	Tokens int64 `json:"tokens"`
	Last   int64 `json:"last"` // unix seconds, for pruning
}

type spend struct {
	At     int64 `json:"at"`
	Tokens int64 `json:"tokens"`
	ID     int64 `json:"id"`
}

// Meter counts a caller's model use against Caps. It is safe for
// concurrent use within a process and, through a lock file, across
// processes.
type Meter struct {
	Dir  string // the caller's sandboxd state directory
	Caps Caps
	Now  func() time.Time // nil: time.Now
}

func (m *Meter) now() time.Time {
	if m.Now == nil {
		return time.Now()
	}
	return m.Now()
}

// Reserve checks the caps before a call of about tokens tokens and
// counts the call and those tokens at once (so reviews running side by
// side cannot all pass a token cap together); Spend then corrects the
// tokens by what the call really used, given the id Reserve returned.
func (m *Meter) Reserve(session string, tokens int64) (id int64, err error) {
	return id, m.update(func(u *usage, now int64) error {
		c := u.session(session, now)
		var hourCalls, hourTokens int64
		for _, s := range u.Hours {
			hourCalls++
			hourTokens += s.Tokens
		}
		switch {
		case c.Calls+1 > m.Caps.CallsPerSession:
			return fmt.Errorf("%w: %d model calls in this session", ErrCapped, m.Caps.CallsPerSession)
		case hourCalls+1 > m.Caps.CallsPerHour:
			return fmt.Errorf("%w: %d model calls in the last hour", ErrCapped, m.Caps.CallsPerHour)
		case c.Tokens+tokens > m.Caps.TokensPerSession:
			return fmt.Errorf("%w: %d tokens in this session", ErrCapped, m.Caps.TokensPerSession)
		case hourTokens+tokens > m.Caps.TokensPerHour:
			return fmt.Errorf("%w: %d tokens in the last hour", ErrCapped, m.Caps.TokensPerHour)
		}
		c.Calls++
		c.Tokens += tokens
		u.Next++
		id = u.Next
		u.Hours = append(u.Hours, spend{At: now, Tokens: tokens, ID: id})
		return nil
	})
}

// Room reports whether calls more calls of at most tokens tokens each
// fit every cap now (nothing is counted).
func (m *Meter) Room(session string, calls, tokens int64) bool {
	ok := false
	err := m.update(func(u *usage, now int64) error {
		c := u.session(session, now)
		var hourTokens int64
		for _, s := range u.Hours {
			hourTokens += s.Tokens
		}
		ok = c.Calls+calls <= m.Caps.CallsPerSession && int64(len(u.Hours))+calls <= m.Caps.CallsPerHour &&
			c.Tokens+calls*tokens <= m.Caps.TokensPerSession && hourTokens+calls*tokens <= m.Caps.TokensPerHour
		return nil
	})
	return ok && err == nil
}

// Spend corrects the call Reserve counted as id by delta tokens (what it
// really used less the estimate; an estimate over the real count is
// given back).
func (m *Meter) Spend(session string, id, delta int64) error {
	return m.update(func(u *usage, now int64) error {
		c := u.session(session, now)
		c.Tokens = max(c.Tokens+delta, 0)
		for i := range u.Hours {
			if u.Hours[i].ID == id {
				u.Hours[i].Tokens = max(u.Hours[i].Tokens+delta, 0)
			}
		}
		return nil
	})
}

func (u *usage) session(s string, now int64) *counts {
	if u.Sessions == nil {
		u.Sessions = map[string]*counts{}
	}
	c := u.Sessions[s]
	if c == nil {
		c = &counts{}
		u.Sessions[s] = c
	}
	c.Last = now
	return c
}

// update runs f on the usage file under an exclusive lock, dropping
// hours older than one and sessions idle for a week.
func (m *Meter) update(f func(u *usage, now int64) error) error {
	dir := filepath.Join(m.Dir, "review")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("review: usage: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "usage.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("review: usage: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("review: usage lock: %w", err)
	}
	path := filepath.Join(dir, "usage.json")
	var u usage
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &u); err != nil {
			return fmt.Errorf("review: usage file unreadable (caps cannot be counted): %w", err)
		}
	} else if !os.IsNotExist(err) {
		return fmt.Errorf("review: usage: %w", err)
	}
	now := m.now().Unix()
	kept := u.Hours[:0]
	for _, s := range u.Hours {
		if now-s.At < 3600 {
			kept = append(kept, s)
		}
	}
	u.Hours = kept
	for k, c := range u.Sessions {
		if now-c.Last > 7*24*3600 {
			delete(u.Sessions, k)
		}
	}
	if err := f(&u, now); err != nil {
		return err
	}
	b, err := json.Marshal(u)
	if err != nil {
		return fmt.Errorf("review: usage: %w", err)
	}
	return atomicfile.WriteFile(path, b, 0o600)
}
