package detect

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/kaudit"
	"github.com/sandboxd/sandboxd/landlock"
)

// LandlockLogFlags are the Landlock restrict_self flags for detection:
// log the command's denials (after the helper's exec) and not those of
// nested domains (which the filter forbids anyway). Denials in the helper
// itself, before the exec, are logged by default; that is how the run
// learns its domain.
const LandlockLogFlags = 0x2 | 0x4 // LOG_NEW_EXEC_ON | LOG_SUBDOMAINS_OFF

// Audit follows the kernel audit log for one run.
type Audit struct {
	holder *kaudit.Holder
	lis    *kaudit.Listener
	log    *slog.Logger
	// done is closed when the reading goroutine has returned.
	done chan struct{}
	// changed is signalled (without blocking) after every record.
	changed chan struct{}

	// mu guards everything below.
	mu        sync.Mutex
	byDomain  map[string][]landlock.Record // access records, by domain
	allocated map[int]string               // pid -> domain from "allocated" records
	dealloc   map[string]uint64            // domain -> denials at deallocation
	overrun   bool
	// lostAtStart is the kernel's lost-record counter when reading began.
	lostAtStart uint32
}

// StartAudit turns kernel audit on (if needed) and starts reading. It
// fails when the caller may not (not root). Stop ends it.
func StartAudit(log *slog.Logger) (*Audit, error) {
	h, err := kaudit.Acquire(kaudit.DefaultDir)
	if err != nil {
		return nil, err
	}
	l, err := kaudit.Listen()
	if err != nil {
		h.Release()
		return nil, err
	}
	st, err := kaudit.CurrentStatus()
	if err != nil {
		l.Close()
		h.Release()
		return nil, err
	}
	d := &Audit{holder: h, lis: l, log: log, lostAtStart: st.Lost,
		byDomain: map[string][]landlock.Record{}, allocated: map[int]string{},
		dealloc: map[string]uint64{}, done: make(chan struct{}), changed: make(chan struct{}, 1)}
	go d.read()
	return d, nil
}

func (d *Audit) read() {
	defer close(d.done)
	for {
		typ, text, err := d.lis.Next()
		if errors.Is(err, kaudit.ErrOverrun) {
			d.mu.Lock()
			d.overrun = true
			d.mu.Unlock()
			continue
		}
		if err != nil {
			return
		}
		r, err := landlock.ParseRecord(typ, text)
		if err != nil {
			continue
		}
		d.mu.Lock()
		switch {
		case r.Type == landlock.AuditDomain && r.Status == "allocated":
			d.allocated[r.Pid] = r.Domain
		case r.Type == landlock.AuditDomain && r.Status == "deallocated":
			d.dealloc[r.Domain] = r.Denials
		case r.Type == landlock.AuditAccess:
			d.byDomain[r.Domain] = append(d.byDomain[r.Domain], r)
		}
		d.mu.Unlock()
		select {
		case d.changed <- struct{}{}:
		default:
		}
	}
}

// Stop ends reading, waits for the reader, and releases kernel audit.
func (d *Audit) Stop() {
	d.lis.Close()
	<-d.done
	if err := d.holder.Release(); err != nil {
		d.log.Warn("could not restore kernel audit settings", "err", err)
	}
}

// Collect returns the denials of the run whose helper has host pid
// helperPid. The helper makes one deliberate denial before the command
// starts (it announces the domain with its pid) and one after every
// process of the command is dead (the end marker: records are delivered
// in the order they were logged, so all the command's records came
// first). Losses show as an overrun of our socket or a rise in the
// kernel's lost counter during the run (every record the kernel fails to
// queue or send counts there), and, when the domain's deallocation record
// has already arrived, as a denial count above what arrived. It is not
// awaited: the kernel frees a domain tens of milliseconds after its last
// process, which would double a run's time.
func (d *Audit) Collect(helperPid int, wait time.Duration) ([]Denial, Detection) {
	det := Detection{Detector: "audit"}
	domain := d.awaitEnd(helperPid, wait)
	d.mu.Lock()
	defer d.mu.Unlock()
	if domain == "" {
		det.Lost = -1
		det.Why = "the run's Landlock domain was never announced"
		return nil, det
	}
	recs := d.byDomain[domain]
	switch n, ok := d.dealloc[domain]; {
	case ok && uint64(len(recs)) < n:
		det.Lost = int(n - uint64(len(recs)))
	case !ok && probes(recs) < 2:
		det.Lost = -1
		det.Why = "the end marker never arrived"
	}
	if d.overrun || d.kernelLost() {
		det.Lost = -1
		det.Why = "the kernel dropped audit records during the run"
	}
	out, other := denialsOf(recs)
	det.Other += other
	return out, det
}

// awaitEnd waits, at most wait, until the run's records are complete: its
// domain was deallocated with no more denials than arrived, or both of
// the helper's probes arrived. It returns the domain ("" if it was never
// announced).
func (d *Audit) awaitEnd(helperPid int, wait time.Duration) string {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		d.mu.Lock()
		domain := d.allocated[helperPid]
		recs := d.byDomain[domain]
		n, ended := d.dealloc[domain]
		d.mu.Unlock()
		if domain != "" && ended && uint64(len(recs)) >= n {
			return domain
		}
		if domain != "" && probes(recs) >= 2 {
			return domain
		}
		select {
		case <-d.changed:
		case <-deadline.C:
			return domain
		}
	}
}

// probes counts the helper's deliberate denials among recs.
func probes(recs []landlock.Record) int {
	n := 0
	for _, r := range recs {
		if isProbe(r) {
			n++
		}
	}
	return n
}

// kernelLost reports whether the kernel's count of lost audit records
// rose since the detector started.
func (d *Audit) kernelLost() bool {
	st, err := kaudit.CurrentStatus()
	return err != nil || st.Lost != d.lostAtStart
}
