package grants

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"
)

// tokenPrefix marks sandboxd grant tokens so they are recognisable in
// logs and cannot be confused with other secrets.
const tokenPrefix = "sbxg_"

// tokenLen is the length of a token: the prefix and 32 random bytes in
// unpadded base64url.
var tokenLen = len(tokenPrefix) + base64.RawURLEncoding.EncodedLen(32)

// Errors Consume returns. Each means the grant does not apply; none of
// them widens anything.
var (
	ErrMalformed = errors.New("grants: malformed token") // wrong length, prefix or alphabet
	ErrUnknown   = errors.New("grants: no such grant")   // forged, consumed or replayed
	ErrExpired   = errors.New("grants: grant expired")   // past its expiry
	ErrSession   = errors.New("grants: grant is for another session")
	ErrMismatch  = errors.New("grants: grant is for another request")
)

// Grant is a permission for exactly one request: one use (a filesystem
// retry), or, for a network destination decided while its connection
// waited, one use per connection until it is revoked at the end of the
// run or expires (Unlimited).
type Grant struct {
	Token       string    // 256-bit random, shown once
	RequestHash [32]byte  // Request.Hash of the allowed request
	Session     string    // the session it was issued in
	ExpiresAt   time.Time // carries a monotonic reading from the store's clock
	Uses        int       // uses left when issued: 1, or Unlimited
}

// Unlimited is the Uses of a grant that every connection of a run may
// use until it is revoked or expires.
const Unlimited = -1

// Store holds issued grants in memory. It is safe for concurrent use.
type Store struct {
	now func() time.Time
	// mu guards grants.
	mu sync.Mutex
	// grants is keyed by the SHA-256 of the token, so the map lookup
	// itself leaks nothing about the token's bytes; the token is then
	// compared in constant time.
	grants map[[32]byte]*Grant
	// pruneAt is the size at which Issue removes expired grants first:
	// twice what was left after the last pruning (at least minPruneAt).
	// A long-lived store so holds at most about twice the grants still
	// live, with no goroutine to own, and pruning costs O(1) per grant
	// issued.
	pruneAt int
}

// minPruneAt is the smallest store Issue prunes.
const minPruneAt = 64

// Option configures a Store.
type Option func(*Store)

// WithClock injects a clock (tests). It must return readings with a
// monotonic component, as time.Now does.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// NewStore returns an empty store.
func NewStore(opts ...Option) *Store {
	s := &Store{now: time.Now, grants: map[[32]byte]*Grant{}, pruneAt: minPruneAt}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Issue creates a one-use grant for req that expires after ttl.
func (s *Store) Issue(req Request, ttl time.Duration) (Grant, error) {
	return s.IssueUses(req, ttl, 1)
}

// IssueUses creates a grant for req with uses uses (or Unlimited) that
// expires after ttl.
func (s *Store) IssueUses(req Request, ttl time.Duration, uses int) (Grant, error) {
	if uses != Unlimited && uses < 1 {
		return Grant{}, fmt.Errorf("grants: uses must be positive or Unlimited, not %d", uses)
	}
	if ttl <= 0 {
		return Grant{}, fmt.Errorf("grants: ttl must be positive, not %v", ttl)
	}
	if req.Session == "" {
		return Grant{}, errors.New("grants: a grant needs a session")
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Grant{}, fmt.Errorf("grants: random token: %w", err)
	}
	now := s.now()
	g := Grant{
		Token:       tokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:]),
		RequestHash: req.Hash(),
		Session:     req.Session,
		ExpiresAt:   now.Add(ttl),
		Uses:        uses,
	}
	key := sha256.Sum256([]byte(g.Token))
	kept := g
	s.mu.Lock()
	if len(s.grants) >= s.pruneAt {
		s.pruneLocked(now)
	}
	s.grants[key] = &kept
	s.mu.Unlock()
	return g, nil
}

// wellFormed checks a presented token's shape before any lookup.
func wellFormed(token string) bool {
	if len(token) != tokenLen || !strings.HasPrefix(token, tokenPrefix) {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(token[len(tokenPrefix):])
	return err == nil && len(b) == 32
}

// Consume uses the grant identified by token for req. On success one use
// is spent (a one-use grant is gone); on any mismatch of session or
// request it is gone too (a real token presented for something else is
// not retried), and an expired grant is removed when it is found.
func (s *Store) Consume(token string, req Request) error {
	if !wellFormed(token) {
		return ErrMalformed
	}
	key := sha256.Sum256([]byte(token))
	want := req.Hash()
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.grants[key]
	if !ok || subtle.ConstantTimeCompare([]byte(g.Token), []byte(token)) != 1 {
		return ErrUnknown
	}
	switch {
	case !s.now().Before(g.ExpiresAt):
		delete(s.grants, key)
		return ErrExpired
	case subtle.ConstantTimeCompare([]byte(g.Session), []byte(req.Session)) != 1:
		delete(s.grants, key)
		return ErrSession
	case subtle.ConstantTimeCompare(g.RequestHash[:], want[:]) != 1:
		delete(s.grants, key)
		return ErrMismatch
	}
	switch g.Uses {
	case Unlimited:
	case 1:
		delete(s.grants, key)
	default:
		g.Uses--
	}
	return nil
}

// Prune removes expired grants and returns how many it removed. Issue
// prunes as the store grows, so calling Prune is never needed to bound
// it; an owner may, to free an idle store's memory sooner.
func (s *Store) Prune() int {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pruneLocked(now)
}

// pruneLocked removes the grants expired at now. s.mu is held.
func (s *Store) pruneLocked(now time.Time) int {
	n := 0
	for k, g := range s.grants {
		if !now.Before(g.ExpiresAt) {
			delete(s.grants, k)
			n++
		}
	}
	if n > len(s.grants) {
		// A Go map keeps its buckets after deletes: after a burst, a
		// fresh map gives the memory back.
		s.grants = maps.Clone(s.grants)
	}
	s.pruneAt = max(minPruneAt, 2*len(s.grants))
	return n
}

// Len returns how many grants are outstanding.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.grants)
}

// Revoke removes the grant identified by token, if it is still there (a
// grant issued for a decision that could not be recorded).
func (s *Store) Revoke(token string) {
	if !wellFormed(token) {
		return
	}
	key := sha256.Sum256([]byte(token))
	s.mu.Lock()
	delete(s.grants, key)
	s.mu.Unlock()
}
