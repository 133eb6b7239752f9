package audit

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Config says where a log lives and how it is kept.
type Config struct {
	Dir string // the log's directory: audit.jsonl, rotated files, audit.pub, audit.head, the lock
	// KeyFile is the Ed25519 private key, created 0600 if absent; its
	// public half is written to Dir/audit.pub, and a mismatch between
	// them is an error.
	KeyFile         string
	MaxFileBytes    int64         // rotate the live file once it is this big (default 64 MiB)
	RetainAge       time.Duration // remove rotated files older than this (0: keep)
	RetainBytes     int64         // remove the oldest rotated files while they take more than this (0: keep)
	CheckpointEvery int           // at most this many records unsigned (default 1024)
	CheckpointAfter time.Duration // sign an unsigned record at most this long after it was written (default 5s)
	Now             func() time.Time
	Log             *slog.Logger
}

const (
	lockName               = "audit.lock"
	defaultMaxFileBytes    = 64 << 20
	defaultCheckpointEvery = 1024
	defaultCheckpointAfter = 5 * time.Second
)

// Log is an open audit log. Its methods are safe for concurrent use, and
// other processes may append to the same directory at the same time.
type Log struct {
	cfg   Config
	priv  ed25519.PrivateKey
	pub   ed25519.PublicKey
	lock  *os.File // flock'd around every read-tail-and-append, against the other processes
	timer sync.WaitGroup

	// mu orders this process's writers before the flock (which does not
	// exclude goroutines sharing one descriptor) and guards the fields
	// below it.
	mu     sync.Mutex
	chain  string   // the chain id, from the head or the files
	f      *os.File // the live file as last opened; reopened when another writer rotated it
	armed  *time.Timer
	closed bool
}

// Open opens the log in cfg.Dir, starting a chain (a genesis record and
// a first checkpoint) when the directory holds none. It creates Dir 0700
// when absent and leaves an existing one's mode alone.
func Open(ctx context.Context, cfg Config) (*Log, error) {
	if cfg.Dir == "" || cfg.KeyFile == "" {
		return nil, errors.New("audit: a log needs a directory and a key file")
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = defaultMaxFileBytes
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = defaultCheckpointEvery
	}
	if cfg.CheckpointAfter <= 0 {
		cfg.CheckpointAfter = defaultCheckpointAfter
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := os.Mkdir(cfg.Dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("audit: make directory: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(cfg.Dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: open lock: %w", err)
	}
	l := &Log{cfg: cfg, lock: lock}
	if err := l.locked(ctx, l.openLocked); err != nil {
		l.closeFiles()
		return nil, err
	}
	return l, nil
}

// openLocked loads the key, publishes it, and finds or starts the chain.
func (l *Log) openLocked(ctx context.Context) error {
	priv, err := loadOrCreateKey(l.cfg.KeyFile)
	if err != nil {
		return err
	}
	l.priv, l.pub = priv, priv.Public().(ed25519.PublicKey)
	if err := publishKey(filepath.Join(l.cfg.Dir, PublicKeyName), l.pub); err != nil {
		return err
	}
	head, err := loadHead(filepath.Join(l.cfg.Dir, HeadName), l.pub)
	if err != nil {
		return fmt.Errorf("audit: %s: %w", HeadName, err)
	}
	t, err := l.tailLocked()
	if err != nil {
		return err
	}
	switch {
	case !t.exists && head != nil:
		return fmt.Errorf("audit: %s names checkpoint %d but the log holds no record", HeadName, head.Seq)
	case !t.exists:
		return l.genesisLocked()
	case head != nil && t.seq < head.Seq:
		// Records up to the signed head were cut away (a file removed, the
		// live file cut back): carrying on would reuse their seqs and sign
		// a head over the cut, so that Verify no longer sees it.
		return fmt.Errorf("audit: %s names checkpoint %d but the log ends at record %d: records were cut from its end", HeadName, head.Seq, t.seq)
	case head != nil:
		l.chain = head.Chain
	case t.seq > 1:
		// Every checkpoint but a crash-interrupted first one is followed by
		// its head: a log past its first checkpoint without one had its
		// head removed, which hides records cut from its end.
		return fmt.Errorf("audit: %s is missing, but the log holds records up to %d: records may have been cut from its end", HeadName, t.seq)
	default:
		l.cfg.Log.Warn("audit log has no head file; it is written again at the next checkpoint", "dir", l.cfg.Dir)
		if l.chain, err = chainOf(ctx, l.cfg.Dir); err != nil {
			return err
		}
	}
	return nil
}

// genesisLocked starts a chain and signs it at once, so that the head
// exists from the first record on.
func (l *Log) genesisLocked() error {
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("audit: chain id: %w", err)
	}
	l.chain = hex.EncodeToString(id[:])
	g := Record{Seq: 0, Prev: zeroHash, Time: l.now(), Event: Event{Kind: KindGenesis},
		Genesis: &Genesis{Chain: l.chain, Key: fingerprint(l.pub)}}
	t, err := l.writeLocked(tail{}, &g)
	if err != nil {
		return err
	}
	_, err = l.checkpointLocked(t)
	return err
}

// Append writes ev as the next record of the chain and returns it. The
// line is in the file (its write returned) when Append returns; a
// failure leaves no part of it behind, and the caller must treat the
// event as not recorded.
func (l *Log) Append(ctx context.Context, ev Event) (Record, error) {
	if !validKind(ev.Kind) || ev.Kind.own() {
		return Record{}, fmt.Errorf("audit: %q is not a kind of event a writer may append", ev.Kind)
	}
	if ev.ExpiresAt != nil {
		at := ev.ExpiresAt.UTC()
		ev.ExpiresAt = &at
	}
	validText(&ev)
	var rec Record
	err := l.locked(ctx, func(context.Context) error {
		t, err := l.tailLocked()
		if err != nil {
			return err
		}
		if !t.exists {
			return errors.New("audit: the log holds no record (was it removed?)")
		}
		if t, err = l.maintainLocked(t); err != nil {
			return err
		}
		rec = Record{Seq: t.seq + 1, Prev: t.hashHex(), Time: l.now(), Event: ev}
		if t, err = l.writeLocked(t, &rec); err != nil {
			return err
		}
		// The record is in the file: a checkpoint that fails now is the
		// timer's or the next writer's to write, not this event's failure.
		if rec.Seq%uint64(l.cfg.CheckpointEvery) == 0 {
			if _, err := l.checkpointLocked(t); err == nil {
				return nil
			} else {
				l.cfg.Log.Warn("audit checkpoint failed", "err", err)
			}
		}
		l.armLocked()
		return nil
	})
	return rec, err
}

// maintainLocked signs a tail its writer left unsigned for too long (it
// may have died before its timer fired) and rotates a full file.
func (l *Log) maintainLocked(t tail) (tail, error) {
	var err error
	if t.kind != KindCheckpoint && l.now().Sub(t.time) > l.cfg.CheckpointAfter {
		if t, err = l.checkpointLocked(t); err != nil {
			return t, err
		}
	}
	if t.size >= l.cfg.MaxFileBytes {
		return l.rotateLocked(t)
	}
	return t, nil
}

// armLocked makes sure an unsigned record gets signed CheckpointAfter
// from now even if no other record follows: the writer's timer.
func (l *Log) armLocked() {
	if l.armed != nil {
		return
	}
	l.timer.Add(1)
	l.armed = time.AfterFunc(l.cfg.CheckpointAfter, func() {
		defer l.timer.Done()
		err := l.locked(context.Background(), func(context.Context) error {
			l.armed = nil
			return l.signTailLocked()
		})
		if err != nil && !errors.Is(err, errClosed) {
			l.cfg.Log.Warn("audit checkpoint failed", "err", err)
		}
	})
}

// signTailLocked writes a checkpoint unless the tail is one.
func (l *Log) signTailLocked() error {
	t, err := l.tailLocked()
	if err != nil || !t.exists || t.kind == KindCheckpoint {
		return err
	}
	_, err = l.checkpointLocked(t)
	return err
}

var errClosed = errors.New("audit: the log is closed")

// locked runs fn holding the process's mutex and the directory's flock.
func (l *Log) locked(ctx context.Context, fn func(context.Context) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := flock(l.lock, syscall.LOCK_EX); err != nil {
		return fmt.Errorf("audit: lock: %w", err)
	}
	defer flock(l.lock, syscall.LOCK_UN)
	return fn(ctx)
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// Close signs a last checkpoint, stops the writer's timer and closes the
// files. The log is unusable afterwards.
func (l *Log) Close(ctx context.Context) error {
	err := l.locked(ctx, func(context.Context) error {
		if l.armed != nil && l.armed.Stop() {
			l.timer.Done()
		}
		l.armed = nil
		return l.signTailLocked()
	})
	l.mu.Lock()
	already := l.closed
	l.closed = true
	l.mu.Unlock()
	if already {
		return errClosed
	}
	l.timer.Wait()
	return errors.Join(err, l.closeFiles())
}

func (l *Log) closeFiles() error {
	var errs []error
	if l.f != nil {
		errs = append(errs, l.f.Close())
	}
	errs = append(errs, l.lock.Close())
	return errors.Join(errs...)
}

// Path is the live file.
func (l *Log) Path() string { return filepath.Join(l.cfg.Dir, LogName) }

// PublicKey is the log's public key.
func (l *Log) PublicKey() ed25519.PublicKey { return l.pub }

func (l *Log) now() time.Time { return l.cfg.Now().UTC().Round(0) }

// chainOf finds the chain id in the set's first genesis, checkpoint or
// retention record: the oldest file holds one within CheckpointEvery
// records of its start.
func chainOf(ctx context.Context, dir string) (string, error) {
	files, err := Files(dir)
	if err != nil {
		return "", err
	}
	var chain string
	var h lineHead
	found := errors.New("found")
	err = eachLine(ctx, files, func(name string, line int, b []byte) error {
		if !readHead(b, &h) || !Kind(h.kind).own() {
			return nil
		}
		r, err := parseRecord(b)
		switch {
		case err != nil:
			return nil
		case r.Genesis != nil:
			chain = r.Genesis.Chain
		case r.Checkpoint != nil:
			chain = r.Checkpoint.Chain
		case r.Retention != nil:
			chain = r.Retention.Chain
		}
		return found
	})
	if chain == "" {
		if err == nil || err == found {
			err = io.ErrUnexpectedEOF
		}
		return "", fmt.Errorf("audit: no record in %s names its chain: %w", dir, err)
	}
	return chain, nil
}
