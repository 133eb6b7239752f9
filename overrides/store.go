package overrides

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
	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/grants"
	"golang.org/x/sys/unix"
)

// TTL is how long an override stays usable after it is issued.
const TTL = 60 * time.Second

// MaxDenials is how many recent model denials a session keeps; the
// oldest is dropped first.
const MaxDenials = 50

// Errors a person's request for an override can meet. Each means nothing
// was issued.
var (
	// ErrNoDenial: the session has no recorded model denial with that
	// request hash (it was dropped, or never recorded).
	ErrNoDenial = errors.New("overrides: no such model denial in this session")
	// ErrCritical: the model judged the request critical (or gave no
	// level it could be held to): only break-glass issues an override.
	ErrCritical = errors.New("overrides: a critical-risk denial needs break-glass")
	// ErrReissue: the request was overridden once in this session
	// already; it is never overridden again.
	ErrReissue = errors.New("overrides: this request was already overridden once in this session")
	// ErrCorrupt: the session's state file is unreadable as state.
	ErrCorrupt = errors.New("overrides: the session's state is damaged")
)

// Denial is one recorded model denial: what a person is shown, and the
// request hash an override would be bound to.
type Denial struct {
	// Time is when the model denied the request.
	Time time.Time `json:"time"`
	// Surface, Operation, Path, Destination and Command describe the
	// request as the person is shown it (the hash covers more: cwd,
	// agent, intent, the object's identity).
	Surface     boundary.Surface   `json:"surface"`
	Operation   boundary.Operation `json:"operation"`
	Path        string             `json:"path,omitempty"`
	Destination string             `json:"destination,omitempty"`
	Command     string             `json:"command,omitempty"`
	// Hash is the request's full hash in hex (grants.Request.HashHex).
	Hash string `json:"hash"`
	// Risk is the model's risk level; Rationale its reason.
	Risk      string `json:"risk"`
	Rationale string `json:"rationale"`
	// Overridden says the request was overridden once in the session
	// already (set by Denials, not stored).
	Overridden bool `json:"-"`
}

// Critical reports whether only break-glass may override d: a critical
// risk, or a level that is none of low, medium and high.
func (d Denial) Critical() bool {
	switch d.Risk {
	case "low", "medium", "high":
		return false
	}
	return true
}

// Target is the denied path or destination.
func (d Denial) Target() string {
	if d.Surface == boundary.Network {
		return d.Destination
	}
	return d.Path
}

// Override is one exact, one-use permission for a request hash.
type Override struct {
	Hash      string    `json:"hash"`
	ExpiresAt time.Time `json:"expires_at"`
	Used      bool      `json:"used"`
}

// state is one session's file.
type state struct {
	// Session is the scoped session the file belongs to.
	Session string `json:"session"`
	// Denials are the recent model denials, oldest first.
	Denials []Denial `json:"denials"`
	// Overrides are the issued overrides still of interest (expired ones
	// are dropped when the file is next written).
	Overrides []Override `json:"overrides"`
	// Ever is every request hash ever overridden in the session.
	Ever []string `json:"ever_overridden"`
}

// Store keeps overrides under a directory. It is safe for concurrent
// use, by goroutines and by processes: all state is in the files, and
// every update holds the session's lock.
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

// WithRandom injects the source of break-glass phrases (tests; default
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

// lockFile is the path of session's lock file, beside its state.
func (s *Store) lockFile(session string) string { return s.base(session) + ".lock" }

func (s *Store) base(session string) string {
	sum := sha256.Sum256([]byte(session))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:]))
}

// Record adds a model denial of req to its session, replacing an older
// record of the same request and dropping the oldest beyond MaxDenials.
func (s *Store) Record(ctx context.Context, req grants.Request, risk, rationale string) error {
	if req.Session == "" {
		return errors.New("overrides: record: a denial needs a session")
	}
	d := Denial{
		Time: s.now(), Surface: req.Surface, Operation: req.Operation, Path: req.Path,
		Destination: req.DestinationText(), Command: req.Command, Hash: req.HashHex(),
		Risk: risk, Rationale: rationale,
	}
	return s.update(ctx, req.Session, true, func(st *state) (bool, error) {
		st.Denials = slices.DeleteFunc(st.Denials, func(o Denial) bool { return o.Hash == d.Hash })
		st.Denials = append(st.Denials, d)
		if n := len(st.Denials); n > MaxDenials {
			st.Denials = st.Denials[n-MaxDenials:]
		}
		return true, nil
	})
}

// Denials returns session's recent model denials, most recent first.
func (s *Store) Denials(session string) ([]Denial, error) {
	var out []Denial
	err := s.update(context.Background(), session, false, func(st *state) (bool, error) {
		for i := len(st.Denials) - 1; i >= 0; i-- {
			d := st.Denials[i]
			d.Overridden = slices.Contains(st.Ever, d.Hash)
			out = append(out, d)
		}
		return false, nil
	})
	return out, err
}

// Approve issues an override for the session's recorded denial with
// that request hash, unless the model judged it critical (ErrCritical)
// or it was overridden before (ErrReissue).
func (s *Store) Approve(session, hash string) (Override, error) {
	return s.issue(session, hash, false)
}

// issue issues an override for a recorded denial; critical says a
// break-glass confirmation stands behind it.
func (s *Store) issue(session, hash string, critical bool) (Override, error) {
	var o Override
	err := s.update(context.Background(), session, true, func(st *state) (bool, error) {
		i := slices.IndexFunc(st.Denials, func(d Denial) bool { return d.Hash == hash })
		switch {
		case i < 0:
			return false, ErrNoDenial
		case st.Denials[i].Critical() && !critical:
			return false, ErrCritical
		case slices.Contains(st.Ever, hash):
			return false, ErrReissue
		}
		o = Override{Hash: hash, ExpiresAt: s.now().Add(TTL)}
		st.Overrides = append(st.Overrides, o)
		st.Ever = append(st.Ever, hash)
		return true, nil
	})
	if err != nil {
		return Override{}, err
	}
	return o, nil
}

// Use consumes a valid override for req: one for req.Hash() in
// req.Session, not expired and not used. It reports whether there was
// one; of two racing uses exactly one reports true.
func (s *Store) Use(ctx context.Context, req grants.Request) (bool, error) {
	if req.Session == "" {
		return false, nil
	}
	if _, err := os.Lstat(s.File(req.Session)); errors.Is(err, fs.ErrNotExist) {
		return false, nil // nothing was ever recorded: no lock, no file
	}
	hash, used := req.HashHex(), false
	err := s.update(ctx, req.Session, true, func(st *state) (bool, error) {
		now := s.now()
		for i := range st.Overrides {
			o := &st.Overrides[i]
			if o.Hash == hash && !o.Used && now.Before(o.ExpiresAt) {
				o.Used, used = true, true
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return false, err
	}
	return used, nil
}

// update runs f on session's state under the session's exclusive lock
// and, when f says so, writes the result back. create says whether a
// missing directory may be created; without it a missing file is an
// empty state and nothing is created.
func (s *Store) update(ctx context.Context, session string, create bool, f func(*state) (bool, error)) error {
	return s.do(func() error { return s.updateHere(ctx, session, create, f) })
}

// updateHere is update on the calling goroutine.
func (s *Store) updateHere(ctx context.Context, session string, create bool, f func(*state) (bool, error)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("overrides: %w", err)
	}
	if create {
		if err := os.MkdirAll(s.dir, 0o700); err != nil {
			return fmt.Errorf("overrides: state directory: %w", err)
		}
	} else if _, err := os.Lstat(s.File(session)); errors.Is(err, fs.ErrNotExist) {
		_, err := f(&state{Session: session})
		return err
	}
	path := s.File(session)
	lock, err := os.OpenFile(s.lockFile(session), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("overrides: lock: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("overrides: lock: %w", err)
	}
	st, err := load(path, session)
	if err != nil {
		return err
	}
	write, err := f(&st)
	if err != nil || !write {
		return err
	}
	st.Overrides = slices.DeleteFunc(st.Overrides, func(o Override) bool { return !s.now().Before(o.ExpiresAt) })
	out, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("overrides: encode state: %w", err)
	}
	if err := atomicfile.WriteFile(path, out, 0o600); err != nil {
		return fmt.Errorf("overrides: write state: %w", err)
	}
	return nil
}

// load reads session's state from path (empty when there is none). A
// file that does not parse, or belongs to another session, is
// ErrCorrupt: nothing is used or issued from it, and it is not
// overwritten (that would forget which requests were overridden).
func load(path, session string) (state, error) {
	st := state{Session: session}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("overrides: read state: %w", err)
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
