package netproxy

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
)

// fakeDecider is a scripted Decider that records every call.
type fakeDecider struct {
	mu       sync.Mutex // guards every field below
	allow    map[string]bool
	denyAddr map[netip.Addr]bool
	source   string        // Source of denials ("" = "policy")
	reason   string        // Reason of denials
	block    chan struct{} // non-nil: Decide waits for it to close
	panics   int           // Decide panics this many more times
	decides  []Request
	resolved []Request
	uses     []Request
}

func newFakeDecider(allow ...string) *fakeDecider {
	d := &fakeDecider{allow: map[string]bool{}, denyAddr: map[netip.Addr]bool{}}
	for _, a := range allow {
		d.allow[a] = true
	}
	return d
}

func (d *fakeDecider) Decide(ctx context.Context, r Request) Verdict {
	d.mu.Lock()
	d.decides = append(d.decides, r)
	block := d.block
	if d.panics > 0 {
		d.panics--
		d.mu.Unlock()
		panic("fake decider panic")
	}
	d.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return Verdict{Source: "error", Reason: "reviewer timed out"}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.allow[r.Dest.String()] {
		return Verdict{Allow: true, Source: "policy", Grant: "g:" + r.Dest.String()}
	}
	src := d.source
	if src == "" {
		src = "policy"
	}
	return Verdict{Source: src, Reason: d.reason}
}

func (d *fakeDecider) Resolved(ctx context.Context, r Request, grant string) Verdict {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resolved = append(d.resolved, r)
	for _, a := range r.Addrs {
		if d.denyAddr[a] {
			return Verdict{Source: "hard-deny", Reason: "resolves to " + a.String()}
		}
	}
	return Verdict{Allow: true, Source: "policy", Grant: grant + "+addrs"}
}

func (d *fakeDecider) Use(ctx context.Context, r Request, grant string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.uses = append(d.uses, r)
	return nil
}

func (d *fakeDecider) calls() (decides, resolved, uses []Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.decides), slices.Clone(d.resolved), slices.Clone(d.uses)
}

func (d *fakeDecider) set(f func(d *fakeDecider)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

// fakeResolver answers from a map and records every query.
type fakeResolver struct {
	mu      sync.Mutex // guards names, queries
	names   map[string][]netip.Addr
	queries []string
}

func newFakeResolver() *fakeResolver {
	return &fakeResolver{names: map[string][]netip.Addr{}}
}

func (r *fakeResolver) add(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range addrs {
		r.names[host] = append(r.names[host], netip.MustParseAddr(a))
	}
}

func (r *fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries = append(r.queries, host)
	if a, ok := r.names[host]; ok {
		return slices.Clone(a), nil
	}
	return nil, &notFound{host}
}

func (r *fakeResolver) log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.queries)
}

type notFound struct{ host string }

func (e *notFound) Error() string { return "no such host " + e.host }

// panicUse panics in Use once armed: a panic on the connection's own
// goroutine, recovered by the proxy.
type panicUse struct {
	*fakeDecider
	arm atomic.Bool
}

func (d *panicUse) Use(ctx context.Context, r Request, grant string) error {
	if d.arm.Swap(false) {
		panic("fake Use panic")
	}
	return d.fakeDecider.Use(ctx, r, grant)
}
