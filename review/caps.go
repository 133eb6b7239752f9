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

// Caps bound model calls and tokens: each session's over its life and
// over the last hour, and the user's over the last hour with every
// session together. The hourly caps are a session's own, so runs without
// a named session (each a session of its own) cannot use up another
// session's; the ceiling still bounds them all. Zero allows none: a
// workspace may lower a cap (policy's "min" rule), and a zero that meant
// "no cap" would let it lift one.
type Caps struct {
	CallsPerSession, CallsPerHour   int64 // one session's
	TokensPerSession, TokensPerHour int64 // one session's
	UserCallsPerHour                int64 // every session's together
	UserTokensPerHour               int64 // every session's together
}

// ErrCapped is a review the caps refuse: nothing is sent, and the
// review falls to a person when one is reachable. The error's text after
// ErrCapped's says which cap, in a sentence safe to show.
var ErrCapped = errors.New("review: the model reviewer's cap is reached")

// usage is what the caps count, kept in one file under the caller's
// state directory (every run of the caller shares it).
type usage struct {
	// Sessions holds calls and tokens by session.
	Sessions map[string]*counts `json:"sessions"`
	// Hours holds the last hour's calls, as (unix second, tokens,
	// session). Calls counted before the hourly caps were per session
	// name none: they count toward the user's ceiling only.
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
	At      int64  `json:"at"`
	Tokens  int64  `json:"tokens"`
	ID      int64  `json:"id"`
	Session string `json:"session,omitempty"`
}

// window is the calls and tokens of the last hour.
type window struct{ calls, tokens int64 }

// hour is the last hour's use by session and by every session together.
func (u *usage) hour(session string) (mine, all window) {
	for _, s := range u.Hours {
		all.calls++
		all.tokens += s.Tokens
		if s.Session == session {
			mine.calls++
			mine.tokens += s.Tokens
		}
	}
	return mine, all
}

// check says which cap n more calls of tokens tokens each would pass, or
// nil if they fit them all: life is the session's use so far, hour and
// user its last hour and every session's. Reserve (n = 1) and Room use
// it both, so Room never promises what Reserve then refuses.
func (c Caps) check(life counts, hour, user window, n, tokens int64) error {
	switch {
	case life.Calls+n > c.CallsPerSession:
		return capped("this session's cap of %s is reached (review.max_calls_per_session)", c.CallsPerSession, "model call")
	case hour.calls+n > c.CallsPerHour:
		return capped("this session's hourly cap of %s is reached (review.max_calls_per_hour)", c.CallsPerHour, "model call")
	case user.calls+n > c.UserCallsPerHour:
		return capped("your hourly ceiling of %s, every session together, is reached (review.max_user_calls_per_hour)", c.UserCallsPerHour, "model call")
	case life.Tokens+n*tokens > c.TokensPerSession:
		return capped("this session's cap of %s is reached (review.max_tokens_per_session)", c.TokensPerSession, "token")
	case hour.tokens+n*tokens > c.TokensPerHour:
		return capped("this session's hourly cap of %s is reached (review.max_tokens_per_hour)", c.TokensPerHour, "token")
	case user.tokens+n*tokens > c.UserTokensPerHour:
		return capped("your hourly ceiling of %s, every session together, is reached (review.max_user_tokens_per_hour)", c.UserTokensPerHour, "token")
	}
	return nil
}

// capped is ErrCapped saying which cap: format holds one %s, the limit
// and its noun ("1 model call", "600 model calls").
func capped(format string, limit int64, noun string) error {
	if limit != 1 {
		noun += "s"
	}
	return fmt.Errorf("%w: "+format, ErrCapped, fmt.Sprintf("%d %s", limit, noun))
}

// Meter counts a caller's model use against Caps. It is safe for
// concurrent use within a process and, through a lock file, across
// processes.
type Meter struct {
	Dir  string // the caller's sandboxd state directory
	Caps Caps
	Now  func() time.Time // nil: time.Now
	// Act runs each use of Dir's files with the caller's file-system
	// identity (nil: the process's own). A daemon runs as root and Dir
	// is the caller's to change: as root, a symlink the caller put
	// there would have root create or replace files where it points.
	Act func(func() error) error
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
// A cap it passes is an error wrapping ErrCapped that says which.
func (m *Meter) Reserve(session string, tokens int64) (id int64, err error) {
	return id, m.update(func(u *usage, now int64) error {
		c := u.session(session, now)
		mine, all := u.hour(session)
		if err := m.Caps.check(*c, mine, all, 1, tokens); err != nil {
			return err
		}
		c.Calls++
		c.Tokens += tokens
		u.Next++
		id = u.Next
		u.Hours = append(u.Hours, spend{At: now, Tokens: tokens, ID: id, Session: session})
		return nil
	})
}

// Room reports whether calls more calls of at most tokens tokens each
// fit every cap now (nothing is counted).
func (m *Meter) Room(session string, calls, tokens int64) bool {
	ok := false
	err := m.update(func(u *usage, now int64) error {
		mine, all := u.hour(session)
		ok = m.Caps.check(*u.session(session, now), mine, all, calls, tokens) == nil
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
	if m.Act == nil {
		return m.updateHere(f)
	}
	return m.Act(func() error { return m.updateHere(f) })
}

// updateHere is update with the identity of the calling goroutine.
func (m *Meter) updateHere(f func(u *usage, now int64) error) error {
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
