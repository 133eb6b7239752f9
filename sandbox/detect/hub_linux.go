package detect

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/sandboxd/sandboxd/kernelaudit"
	"github.com/sandboxd/sandboxd/landlock"
	"github.com/sandboxd/sandboxd/publicerr"
)

// Hub is a process's one reader of kernel audit records. Every reader
// of the audit multicast group gets every record, so runs that each read
// their own would each parse every other run's records; a Hub reads
// them once and hands each run the records of the Landlock domain its
// helper announced, and nothing else.
//
// The reader (and with it the kernelaudit holder that keeps kernel audit on)
// runs only while some run is between Start and Stop: the first Start
// opens it, the last Stop closes it and restores what kernelaudit changed,
// as a run with a reader of its own always did. A Hub therefore needs no
// Close and holds nothing while idle. It is safe for concurrent use.
//
// Losses are counted per run and never under-counted: a record the Hub
// cannot attribute (the socket overflowed, the reader failed, a record
// it could not parse) is a possible loss for every run it could have
// belonged to, and a run's own buffer keeps at most keep distinct
// records and counts the rest.
type Hub struct {
	log *slog.Logger
	// open starts reading (kernel audit on, the multicast group joined);
	// lost reads the kernel's count of records it failed to deliver.
	open func() (source, error)
	lost func() (uint32, error)
	// keep bounds a run's distinct records; limboCap the probe records
	// kept for domains not announced yet.
	keep, limboCap int

	// life serialises starting and stopping the reader, which takes file
	// locks and netlink round trips; the reader never takes it.
	life sync.Mutex
	src  source        // nil: no reader
	done chan struct{} // closed when src's reader has returned

	// mu guards everything below and the routing and record state of
	// every Audit (its fields say which). The reader holds it for one
	// record at a time.
	mu       sync.Mutex
	live     map[*Audit]struct{}
	byPid    map[int]*Audit    // helper pid -> its run
	byDomain map[string]*Audit // Landlock domain -> the run that owns it
	// limbo holds, oldest first, probe records of domains whose
	// allocation record has not come yet: the kernel logs a domain's
	// first denial (the helper's probe) just before it announces the
	// domain and the pid that made it.
	limbo []landlock.Record
	stats HubStats
}

// HubStats counts what a Hub read and what it dropped.
type HubStats struct {
	// Records is how many Landlock records were read.
	Records uint64
	// Unknown is how many records of domains no live run owns were
	// dropped (other programs' Landlock domains, records that came after
	// their run ended).
	Unknown uint64
	// Unreadable is how many Landlock records could not be parsed.
	Unreadable uint64
	// Overruns is how many times the receive buffer overflowed.
	Overruns uint64
	// Evicted is how many probe records left the limbo unclaimed.
	Evicted uint64
}

// source is where a Hub reads records: the audit multicast group, or a
// test's records.
type source interface {
	// Next returns the next record; kernelaudit.ErrOverrun when records were
	// lost, kernelaudit.ErrClosed once Close was called.
	Next() (typ int, text string, err error)
	// Close ends reading (a blocked Next returns) and gives back what
	// the source holds.
	Close() error
}

// Default bounds of a Hub.
const (
	// defaultKeep bounds a run's distinct denial records: a command that
	// repeats one denial costs one record, one that makes ever new
	// denials (a scan of a denied tree) is cut off here and its report
	// counts what was not kept.
	defaultKeep = 1 << 14
	// defaultLimbo bounds the probe records waiting for their domain's
	// announcement; normally one run's probe waits for one record.
	defaultLimbo = 64
)

// NewHub returns a Hub that reads kernel audit (see kernelaudit), and logs
// to log.
func NewHub(log *slog.Logger) *Hub {
	return newHub(log, openKernel, kernelLost)
}

func newHub(log *slog.Logger, open func() (source, error), lost func() (uint32, error)) *Hub {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Hub{log: log, open: open, lost: lost, keep: defaultKeep, limboCap: defaultLimbo,
		live: map[*Audit]struct{}{}, byPid: map[int]*Audit{}, byDomain: map[string]*Audit{}}
}

// kernelSource is the audit multicast group, read while a kernelaudit holder
// keeps kernel audit on.
type kernelSource struct {
	holder *kernelaudit.Holder
	lis    *kernelaudit.Listener
}

func openKernel() (source, error) {
	h, err := kernelaudit.Acquire(kernelaudit.DefaultDir)
	if err != nil {
		return nil, err
	}
	l, err := kernelaudit.Listen()
	if err != nil {
		h.Release()
		return nil, err
	}
	return &kernelSource{holder: h, lis: l}, nil
}

func (k *kernelSource) Next() (int, string, error) { return k.lis.Next() }

func (k *kernelSource) Close() error {
	k.lis.Close()
	return k.holder.Release()
}

func kernelLost() (uint32, error) {
	st, err := kernelaudit.CurrentStatus()
	return st.Lost, err
}

// Stats returns what the Hub has read and dropped so far.
func (h *Hub) Stats() HubStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stats
}

// Start begins following kernel audit for one run: it starts the reader
// if none runs, and fails when kernel audit cannot be read (not root).
// The run tells the Audit its helper's pid (Own) before the helper
// restricts itself, and ends with Stop.
func (h *Hub) Start() (*Audit, error) {
	h.life.Lock()
	defer h.life.Unlock()
	if h.src != nil && closed(h.done) {
		// The reader failed (every live run was told): a new one.
		h.closeLocked()
	}
	if h.src == nil {
		src, err := h.open()
		if err != nil {
			return nil, err
		}
		h.src, h.done = src, make(chan struct{})
		go h.read(src, h.done)
	}
	// Read after the reader started, as a reader of the run's own
	// always did: a loss from now on counts against this run.
	lost, err := h.lost()
	if err != nil {
		h.stopIfIdleLocked()
		return nil, fmt.Errorf("detect: kernel audit status: %w", err)
	}
	a := &Audit{hub: h, lostAtStart: lost, index: map[string]int{}, changed: make(chan struct{}, 1)}
	h.mu.Lock()
	h.live[a] = struct{}{}
	h.mu.Unlock()
	return a, nil
}

// stop unregisters a run and stops the reader after the last.
func (h *Hub) stop(a *Audit) {
	h.life.Lock()
	defer h.life.Unlock()
	h.mu.Lock()
	if _, ok := h.live[a]; !ok {
		h.mu.Unlock()
		return
	}
	delete(h.live, a)
	if a.pid != 0 && h.byPid[a.pid] == a {
		delete(h.byPid, a.pid)
	}
	if a.domain != "" && h.byDomain[a.domain] == a {
		delete(h.byDomain, a.domain)
	}
	h.mu.Unlock()
	h.stopIfIdleLocked()
}

// stopIfIdleLocked stops the reader when no run is left. h.life is held.
func (h *Hub) stopIfIdleLocked() {
	h.mu.Lock()
	idle := len(h.live) == 0
	h.mu.Unlock()
	if idle && h.src != nil {
		h.closeLocked()
	}
}

// closeLocked closes the source and waits for its reader. h.life is
// held.
func (h *Hub) closeLocked() {
	err := h.src.Close()
	<-h.done
	h.src, h.done = nil, nil
	if err != nil {
		h.log.Warn("could not restore kernel audit settings", "err", err)
	}
	h.mu.Lock()
	// Whatever waited for an announcement was never claimed.
	h.stats.Evicted += uint64(len(h.limbo))
	h.limbo = nil
	h.mu.Unlock()
}

func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// read is the reader: it dispatches every record until the source is
// closed or fails.
func (h *Hub) read(src source, done chan struct{}) {
	defer close(done)
	for {
		typ, text, err := src.Next()
		switch {
		case errors.Is(err, kernelaudit.ErrOverrun):
			h.mu.Lock()
			h.stats.Overruns++
			h.loseLocked(h.liveLocked(), "the kernel dropped audit records during the run")
			h.mu.Unlock()
			continue
		case errors.Is(err, kernelaudit.ErrClosed):
			return
		case err != nil:
			h.log.Warn("kernel audit reader failed", "err", err)
			h.mu.Lock()
			live := h.liveLocked()
			for _, a := range live {
				a.orphaned = true
			}
			h.loseLocked(live, "the kernel audit reader failed ("+publicerr.Reason(err)+")")
			h.mu.Unlock()
			return
		}
		if typ != landlock.AuditAccess && typ != landlock.AuditDomain {
			continue
		}
		r, err := landlock.ParseRecord(typ, text)
		h.mu.Lock()
		h.dispatchLocked(r, err)
		h.mu.Unlock()
	}
}

// dispatchLocked gives one Landlock record to the run that owns its
// domain. h.mu is held.
func (h *Hub) dispatchLocked(r landlock.Record, parseErr error) {
	h.stats.Records++
	if parseErr != nil {
		h.stats.Unreadable++
		h.loseLocked(h.couldOwnLocked(r.Domain), "an audit record could not be read")
		return
	}
	switch {
	case r.Type == landlock.AuditDomain && r.Status == "allocated":
		h.allocatedLocked(r)
	case r.Type == landlock.AuditDomain && r.Status == "deallocated":
		h.dropLimboLocked(r.Domain)
		a := h.byDomain[r.Domain]
		if a == nil {
			h.stats.Unknown++
			return
		}
		a.dealloc, a.ended = r.Denials, true
		a.signal()
	case r.Type == landlock.AuditAccess:
		if a := h.byDomain[r.Domain]; a != nil {
			a.addLocked(r, h.keep)
			return
		}
		if !isProbe(r) {
			// A run's first record is its helper's probe, and its domain
			// is known right after: this one is no live run's.
			h.stats.Unknown++
			return
		}
		if len(h.limbo) == h.limboCap {
			h.stats.Evicted++
			h.loseLocked(h.couldOwnLocked(h.limbo[0].Domain), "a probe record was never claimed")
			h.limbo = h.limbo[1:]
		}
		h.limbo = append(h.limbo, r)
	default:
		h.stats.Unknown++
	}
}

// allocatedLocked routes a new domain to the run whose helper made it,
// with the probe record that came before. h.mu is held.
func (h *Hub) allocatedLocked(r landlock.Record) {
	a := h.byPid[r.Pid]
	if a == nil {
		h.stats.Unknown++
		h.dropLimboLocked(r.Domain)
		return
	}
	if a.domain != "" && a.domain != r.Domain {
		// The helper restricts itself once: a second domain for its pid
		// cannot be sorted out, so the run learns its records are in
		// doubt.
		h.stats.Unknown++
		h.dropLimboLocked(r.Domain)
		h.loseLocked([]*Audit{a}, "the helper's pid announced a second Landlock domain")
		return
	}
	a.domain = r.Domain
	h.byDomain[r.Domain] = a
	kept := h.limbo[:0]
	for _, p := range h.limbo {
		if p.Domain == r.Domain {
			a.addLocked(p, h.keep)
		} else {
			kept = append(kept, p)
		}
	}
	clear(h.limbo[len(kept):])
	h.limbo = kept
	a.signal()
}

// dropLimboLocked drops the waiting probe records of a domain that is
// no live run's. h.mu is held.
func (h *Hub) dropLimboLocked(domain string) {
	kept := h.limbo[:0]
	for _, p := range h.limbo {
		if p.Domain == domain {
			h.stats.Unknown++
		} else {
			kept = append(kept, p)
		}
	}
	clear(h.limbo[len(kept):])
	h.limbo = kept
}

// liveLocked lists the live runs. h.mu is held.
func (h *Hub) liveLocked() []*Audit {
	out := make([]*Audit, 0, len(h.live))
	for a := range h.live {
		out = append(out, a)
	}
	return out
}

// couldOwnLocked lists the live runs a record of domain could belong
// to: its owner; for a domain no run owns, every run whose domain is
// not known yet; without a domain, every live run. h.mu is held.
func (h *Hub) couldOwnLocked(domain string) []*Audit {
	if domain == "" {
		return h.liveLocked()
	}
	if a := h.byDomain[domain]; a != nil {
		return []*Audit{a}
	}
	var out []*Audit
	for a := range h.live {
		if a.domain == "" {
			out = append(out, a)
		}
	}
	return out
}

// loseLocked tells runs that records of theirs may have been lost, and
// why (the first reason stands). h.mu is held.
func (h *Hub) loseLocked(runs []*Audit, why string) {
	for _, a := range runs {
		if a.lossWhy == "" {
			a.lossWhy = why
		}
		a.signal()
	}
}

// recordKey is what makes two access records the same for a run's
// denials: everything but the serial.
func recordKey(r landlock.Record) string {
	return strings.Join([]string{strings.Join(r.Blockers, ","), r.Path, r.Dev, strconv.FormatUint(r.Ino, 10),
		r.Daddr, strconv.Itoa(r.Dest), strconv.Itoa(r.Opid), r.Ocomm}, "\x00")
}
