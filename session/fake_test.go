package session

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/sandboxd/sandboxd/sandbox"
)

// fakeSandbox plays one scripted attempt per call and records the spec
// each attempt was given. It stands in for the kernel sandbox only: the
// broker, the grant store, the policy and the layer commit are real.
type fakeSandbox struct {
	mu      sync.Mutex
	script  []attemptFunc
	specs   []sandbox.Spec
	overrun bool // called more often than scripted
}

type attemptFunc func(ctx context.Context, spec sandbox.Spec, during During) (sandbox.Result, error)

func (f *fakeSandbox) Run(ctx context.Context, spec sandbox.Spec, during During, _ *slog.Logger) (sandbox.Result, error) {
	f.mu.Lock()
	n := len(f.specs)
	f.specs = append(f.specs, spec)
	if n >= len(f.script) {
		f.overrun = true
		f.mu.Unlock()
		return sandbox.Result{}, errors.New("fake: no attempt scripted")
	}
	step := f.script[n]
	f.mu.Unlock()
	return step(ctx, spec, during)
}

func (f *fakeSandbox) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.specs)
}

// denies is an attempt that exits with code and reports denials.
func denies(code int, ds ...sandbox.Denial) attemptFunc {
	return func(context.Context, sandbox.Spec, During) (sandbox.Result, error) {
		return sandbox.Result{ExitCode: code, Denials: ds, Isolation: sandbox.Namespaces, NetworkMode: sandbox.NetNS,
			LandlockABI: 7, Transaction: sandbox.Transaction{Mode: "none", Why: "fake"}}, nil
	}
}

// recorder is Events that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []Event
	// on, if set, runs for each event (the test's clock, say).
	on func(Event)
}

func (r *recorder) Event(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	if r.on != nil {
		r.on(e)
	}
}

func (r *recorder) kinds() []Kind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Kind
	for _, e := range r.events {
		out = append(out, e.Kind)
	}
	return out
}
