package intents

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/sandboxd/sandboxd/atomicfile"
	"golang.org/x/sys/unix"
)

// DefaultTTL is how long an intent lasts when the person names no
// duration: a working day.
const DefaultTTL = 8 * time.Hour

// MaxTTL bounds an intent's life: a session's "yes" never outlives a
// day.
const MaxTTL = 24 * time.Hour

// MaxPerSession bounds the live intents of one session: a long list is
// no longer a scope a person keeps in mind.
const MaxPerSession = 32

// Errors an Add or Revoke can meet. Each means nothing changed.
var (
	// ErrHash: the hash is not the SHA-256 of the scope: the approval
	// was for another text.
	ErrHash = errors.New("intents: the approval is for another scope text")
	// ErrTTL: the duration is over MaxTTL.
	ErrTTL = errors.New("intents: an intent lasts at most 24 hours")
	// ErrFull: the session holds MaxPerSession live intents.
	ErrFull = errors.New("intents: the session holds too many intents")
	// ErrUnknown: no live intent of the session has that id.
	ErrUnknown = errors.New("intents: no such intent in this session")
	// ErrCorrupt: the session's state file is unreadable as state.
	ErrCorrupt = errors.New("intents: the session's state is damaged")
)

// Intent is one approved scope.
type Intent struct {
	// ID names the intent for a revocation and in the audit log.
	ID string `json:"id"`
	// Scope is the rule text the person approved, in its normal form.
	Scope string `json:"scope"`
	// Hash is the hex SHA-256 of Scope (ScopeHash): what the approval
	// binds to. A scope whose text no longer hashes to it is void.
	Hash string `json:"hash"`
	// Created and ExpiresAt bound its life.
	Created   time.Time `json:"created"`
	ExpiresAt time.Time `json:"expires_at"`
	// By says where the person approved it ("terminal", "page").
	By string `json:"by,omitempty"`
}

// ScopeHash is the hex SHA-256 of a scope's text.
func ScopeHash(scope string) string {
	sum := sha256.Sum256([]byte(scope))
	return hex.EncodeToString(sum[:])
}

// Valid reports whether in still binds to its text.
func (in Intent) Valid() bool { return in.Scope != "" && in.Hash == ScopeHash(in.Scope) }

// state is one session's file.
type state struct {
	// Session is the scoped session the file belongs to.
	Session string   `json:"session"`
	Intents []Intent `json:"intents"`
}

// Store keeps intents under a directory. It is safe for concurrent use,
// by goroutines and by processes: all state is in the files, and every
// update holds the session's lock.
type Store struct {
	dir  string
	now  func() time.Time
	rand io.Reader
	// do does the file work (as the caller whose state it is).
	do func(func() error) error
}

// Option configures a Store.
type Option func(*Store)

// WithClock injects a clock (tests).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithRandom injects the source of intent ids (tests; default
// crypto/rand).
func WithRandom(r io.Reader) Option { return func(s *Store) { s.rand = r } }

// WithActor has do do every read and write of the store's files: the
// front end makes them the caller's (package fsid), so the state is the
// caller's own.
func WithActor(do func(func() error) error) Option { return func(s *Store) { s.do = do } }

// New returns a store keeping its files under dir (created 0700 when
// first written).
func New(dir string, opts ...Option) *Store {
	s := &Store{dir: dir, now: time.Now, rand: rand.Reader, do: func(f func() error) error { return f() }}
	for _, o := range opts {
		o(s)
	}
	return s
}

// File is the path of session's state file: the hex of the SHA-256 of
// the scoped session, so no session's name can pick a path.
func (s *Store) File(session string) string { return s.base(session) + ".json" }

func (s *Store) lockFile(session string) string { return s.base(session) + ".lock" }

func (s *Store) base(session string) string {
	sum := sha256.Sum256([]byte(session))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:]))
}

// Add issues an intent for scope in session, lasting ttl (DefaultTTL
// when zero or less), by where the person approved it. hash must be
// ScopeHash(scope): the approval binds to the text shown. before, when
// set, is called with the intent before it is stored (the audit log's
// record): an error from it stores nothing.
func (s *Store) Add(ctx context.Context, session, scope, hash string, ttl time.Duration, by string, before func(Intent) error) (Intent, error) {
	switch {
	case session == "":
		return Intent{}, errors.New("intents: add: an intent needs a session")
	case scope == "" || hash != ScopeHash(scope):
		return Intent{}, ErrHash
	case ttl > MaxTTL:
		return Intent{}, ErrTTL
	case ttl <= 0:
		ttl = DefaultTTL
	}
	var id [6]byte
	if _, err := io.ReadFull(s.rand, id[:]); err != nil {
		return Intent{}, fmt.Errorf("intents: id: %w", err)
	}
	now := s.now()
	in := Intent{ID: "in-" + hex.EncodeToString(id[:]), Scope: scope, Hash: hash, Created: now, ExpiresAt: now.Add(ttl), By: by}
	err := s.update(ctx, session, true, func(st *state) (bool, error) {
		if len(st.Intents) >= MaxPerSession {
			return false, ErrFull
		}
		if before != nil {
			if err := before(in); err != nil {
				return false, err
			}
		}
		st.Intents = append(st.Intents, in)
		return true, nil
	})
	if err != nil {
		return Intent{}, err
	}
	return in, nil
}

// List returns session's live intents (unexpired, bound to their text),
// oldest first. A session with no file has none.
func (s *Store) List(ctx context.Context, session string) ([]Intent, error) {
	out := []Intent{}
	err := s.update(ctx, session, false, func(st *state) (bool, error) {
		out = append(out, st.Intents...)
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Revoke removes session's intent id. after, when set, is called with
// it once it is gone (the audit log's record; the revocation stands
// whatever it returns, and its error is returned).
func (s *Store) Revoke(ctx context.Context, session, id string, after func(Intent) error) (Intent, error) {
	var gone Intent
	err := s.update(ctx, session, false, func(st *state) (bool, error) {
		i := slices.IndexFunc(st.Intents, func(in Intent) bool { return in.ID == id })
		if i < 0 {
			return false, ErrUnknown
		}
		gone = st.Intents[i]
		st.Intents = slices.Delete(st.Intents, i, i+1)
		return true, nil
	})
	if err != nil {
		return Intent{}, err
	}
	if after != nil {
		return gone, after(gone)
	}
	return gone, nil
}

// live drops the expired intents, those whose text no longer hashes to
// their binding, and those no Add could have written: a life over
// MaxTTL, or made later than now. The file is the caller's own, so any
// process of theirs can write it; what it holds is taken only within
// the bounds a person's approval has.
func (s *Store) live(ins []Intent) []Intent {
	now := s.now()
	return slices.DeleteFunc(ins, func(in Intent) bool {
		return !now.Before(in.ExpiresAt) || !in.Valid() || in.Created.After(now) || in.ExpiresAt.Sub(in.Created) > MaxTTL
	})
}

// update runs f on session's live state under the session's exclusive
// lock and, when f says so, writes the result back. create says whether
// a missing directory may be created; without it a missing file is an
// empty state and nothing is created.
func (s *Store) update(ctx context.Context, session string, create bool, f func(*state) (bool, error)) error {
	return s.do(func() error { return s.updateHere(ctx, session, create, f) })
}

// updateHere is update on the calling goroutine.
func (s *Store) updateHere(ctx context.Context, session string, create bool, f func(*state) (bool, error)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("intents: %w", err)
	}
	if create {
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return fmt.Errorf("intents: state directory: %w", err)
		}
	} else if _, err := os.Lstat(s.File(session)); errors.Is(err, fs.ErrNotExist) {
		_, err := f(&state{Session: session})
		return err
	}
	lock, err := os.OpenFile(s.lockFile(session), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("intents: lock: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("intents: lock: %w", err)
	}
	path := s.File(session)
	st, err := load(path, session)
	if err != nil {
		return err
	}
	st.Intents = s.live(st.Intents)
	write, err := f(&st)
	if err != nil || !write {
		return err
	}
	out, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("intents: encode state: %w", err)
	}
	if err := atomicfile.WriteFile(path, out, 0o600); err != nil {
		return fmt.Errorf("intents: write state: %w", err)
	}
	return nil
}

// load reads session's state from path (empty when there is none). A
// file that does not parse, or belongs to another session, is
// ErrCorrupt, and is not overwritten.
func load(path, session string) (state, error) {
	st := state{Session: session}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("intents: read state: %w", err)
	}
	var got state
	if err := json.Unmarshal(b, &got); err != nil {
		return st, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if got.Session != session {
		return st, fmt.Errorf("%w: the file names another session", ErrCorrupt)
	}
	return got, nil
}
