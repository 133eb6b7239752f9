package overrides

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// PhraseTTL is how long a person has to type a break-glass phrase after
// it is shown.
const PhraseTTL = 60 * time.Second

// phraseAlphabet is what a break-glass code is made of: unambiguous to
// read out and to type.
const phraseAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// codeLen is the length of a break-glass code.
const codeLen = 8

// Errors of a break-glass confirmation. Each means nothing was issued.
var (
	ErrPhrase        = errors.New("overrides: the phrase typed is not the one shown")
	ErrPhraseExpired = errors.New("overrides: the phrase was not typed in time")
)

// Challenge is a break-glass confirmation in progress: the phrase shown
// to the person for one recorded denial. It lives only in the memory of
// the process that asks the person.
type Challenge struct {
	// Session and Hash name the denial.
	Session, Hash string
	// Phrase is what the person must type: "BREAK-GLASS " and the code.
	Phrase string
	// IssuedAt is when the phrase was made; it must be typed within
	// PhraseTTL.
	IssuedAt time.Time
}

// Deadline is when the challenge's phrase stops being accepted.
func (c Challenge) Deadline() time.Time { return c.IssuedAt.Add(PhraseTTL) }

// Fingerprint is the short form of a request hash shown to a person: its
// first 12 hex digits.
func Fingerprint(hash string) string { return hash[:min(12, len(hash))] }

// Challenge makes a break-glass phrase for the session's recorded denial
// with that hash (any risk level). It fails as Approve would when the
// denial is unknown or was overridden before, so nobody types a phrase
// for nothing.
func (s *Store) Challenge(session, hash string) (Challenge, error) {
	err := s.update(context.Background(), session, false, func(st *state) (bool, error) {
		switch {
		case !slices.ContainsFunc(st.Denials, func(d Denial) bool { return d.Hash == hash }):
			return false, ErrNoDenial
		case slices.Contains(st.Ever, hash):
			return false, ErrReissue
		}
		return false, nil
	})
	if err != nil {
		return Challenge{}, err
	}
	code, err := randomCode(s.rand)
	if err != nil {
		return Challenge{}, err
	}
	return Challenge{Session: session, Hash: hash, Phrase: "BREAK-GLASS " + code, IssuedAt: s.now()}, nil
}

// BreakGlass issues an override for the challenge's denial, whatever
// risk the model gave it, when typed is exactly the phrase and came in
// time.
func (s *Store) BreakGlass(ch Challenge, typed string) (Override, error) {
	if ch.Phrase == "" || subtle.ConstantTimeCompare([]byte(typed), []byte(ch.Phrase)) != 1 {
		return Override{}, ErrPhrase
	}
	if !s.now().Before(ch.Deadline()) {
		return Override{}, ErrPhraseExpired
	}
	return s.issue(ch.Session, ch.Hash, true)
}

// randomCode returns codeLen characters of phraseAlphabet from r,
// uniformly (bytes that would bias the choice are skipped).
func randomCode(r io.Reader) (string, error) {
	limit := byte(256 - 256%len(phraseAlphabet))
	out := make([]byte, 0, codeLen)
	buf := make([]byte, 16)
	for tries := 0; len(out) < codeLen; tries++ {
		if tries > 64 {
			return "", errors.New("overrides: the random source keeps giving biased bytes")
		}
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", fmt.Errorf("overrides: random phrase: %w", err)
		}
		for _, b := range buf {
			if b < limit && len(out) < codeLen {
				out = append(out, phraseAlphabet[int(b)%len(phraseAlphabet)])
			}
		}
	}
	return string(out), nil
}
