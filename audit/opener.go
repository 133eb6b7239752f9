package audit

import (
	"context"
	"sync"
	"time"
)

// Appender is where records go: a Log, an Opener, or the daemon's log.
type Appender interface {
	Append(ctx context.Context, ev Event) error
}

// Opener opens a Log the first time a record needs it: most runs
// record nothing (an everyday command meets no boundary), and they
// should not pay for the key, the lock and the tail.
type Opener struct {
	cfg  Config
	mu   sync.Mutex
	log  *Log
	err  error
	done bool
}

// NewOpener returns an Opener of the log cfg describes.
func NewOpener(cfg Config) *Opener { return &Opener{cfg: cfg} }

// Retain sets how the log rotates and what it keeps (Config's
// MaxFileBytes, RetainAge, RetainBytes; zero keeps Config's), when it is
// not open yet: the settings come with the first run's policy.
func (o *Opener) Retain(rotate int64, age time.Duration, size int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done {
		return
	}
	if rotate > 0 {
		o.cfg.MaxFileBytes = rotate
	}
	o.cfg.RetainAge, o.cfg.RetainBytes = age, size
}

// Append appends ev to the log, opening it first if need be. A log
// that could not be opened stays unopened: every later Append fails.
func (o *Opener) Append(ctx context.Context, ev Event) error {
	o.mu.Lock()
	if !o.done {
		o.log, o.err = Open(ctx, o.cfg)
		o.done = true
	}
	l, err := o.log, o.err
	o.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = l.Append(ctx, ev)
	return err
}

// Close closes the log if it was opened (a last checkpoint is signed).
func (o *Opener) Close(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.log == nil {
		return nil
	}
	err := o.log.Close(ctx)
	o.log, o.err = nil, errClosed
	return err
}
