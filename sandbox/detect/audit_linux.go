package detect

import (
	"fmt"
	"time"

	"github.com/sandboxd/sandboxd/landlock"
)

// LandlockLogFlags are the Landlock restrict_self flags for detection:
// log the command's denials (after the helper's exec) and not those of
// nested domains (which the filter forbids anyway). Denials in the helper
// itself, before the exec, are logged by default; that is how the run
// learns its domain.
const LandlockLogFlags = 0x2 | 0x4 // LOG_NEW_EXEC_ON | LOG_SUBDOMAINS_OFF

// Audit follows the kernel audit log for one run: the records of its
// helper's Landlock domain, which its Hub hands it. Start it with
// Hub.Start, name the helper with Own, read the denials with Collect,
// end it with Stop.
type Audit struct {
	hub *Hub
	// changed is signalled (without blocking) after every record or loss
	// given to this run.
	changed chan struct{}
	// lostAtStart is the kernel's lost-record counter when the run began.
	lostAtStart uint32

	// Guarded by hub.mu.
	pid    int    // the helper's host pid (0: not yet known)
	domain string // its Landlock domain ("": not announced yet)
	// recs are the distinct access records of the domain, in the order
	// they first came, with how often each came (index: by recordKey).
	recs  []keptRecord
	index map[string]int
	// received counts every access record of the domain, probes counts
	// the helper's among them, and dropped those not kept because recs
	// was full.
	received, dropped uint64
	probes            int
	// dealloc is the denial count of the domain's deallocation record,
	// once it came (ended).
	dealloc uint64
	ended   bool
	// lossWhy, when set, says why records of this run may have been
	// lost without a count; orphaned, that no more will come (the
	// reader failed).
	lossWhy  string
	orphaned bool
}

type keptRecord struct {
	rec landlock.Record
	n   int
}

// Own names the run's helper by its host pid. It must be called before
// the helper restricts itself: the kernel announces the helper's domain
// with this pid, and the run is given that domain's records.
func (a *Audit) Own(helperPid int) {
	h := a.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if a.pid != 0 && h.byPid[a.pid] == a {
		delete(h.byPid, a.pid)
	}
	a.pid = helperPid
	// A pid is reused only after its process is gone: a newer helper
	// with the same pid is the one whose domain comes next.
	h.byPid[helperPid] = a
}

// Stop ends the run's share of the reader; the last run's Stop closes
// it and restores kernel audit's settings.
func (a *Audit) Stop() { a.hub.stop(a) }

// addLocked keeps one access record. hub.mu is held.
func (a *Audit) addLocked(r landlock.Record, keep int) {
	a.received++
	if isProbe(r) {
		a.probes++
	}
	k := recordKey(r)
	switch i, ok := a.index[k]; {
	case ok:
		a.recs[i].n++
	case len(a.recs) < keep:
		a.index[k] = len(a.recs)
		a.recs = append(a.recs, keptRecord{rec: r, n: 1})
	default:
		a.dropped++
	}
	a.signal()
}

func (a *Audit) signal() {
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// Collect returns the run's denials. The helper makes one deliberate
// denial before the command starts (it announces the domain with its
// pid) and one after every process of the command is dead (the end
// marker: records are delivered in the order they were logged, so all
// the command's records came first). Losses show as an overrun of the
// hub's socket while the run was live, or a rise in the kernel's lost
// counter during the run (every record the kernel fails to queue or
// send counts there), and, when the domain's deallocation record has
// already arrived, as a denial count above what arrived; records the
// run's buffer could not keep are counted exactly. It is not awaited:
// the kernel frees a domain tens of milliseconds after its last
// process, which would double a run's time.
func (a *Audit) Collect(wait time.Duration) ([]Denial, Detection) {
	det := Detection{Detector: "audit"}
	a.awaitEnd(wait)
	lostNow, lostErr := a.hub.lost()
	h := a.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if a.domain == "" {
		det.Lost = -1
		det.Why = "the run's Landlock domain was never announced"
		if a.lossWhy != "" {
			det.Why += " (" + a.lossWhy + ")"
		}
		return nil, det
	}
	switch {
	case a.ended && a.received < a.dealloc:
		det.Lost = int(a.dealloc - a.received)
	case !a.ended && a.probes < 2:
		det.Lost = -1
		det.Why = "the end marker never arrived"
	}
	if a.dropped > 0 {
		if det.Lost >= 0 {
			det.Lost += int(a.dropped)
		}
		det.Why = fmt.Sprintf("the run made more than %d distinct denials; %d records were counted, not kept", h.keep, a.dropped)
	}
	switch {
	case a.lossWhy != "":
		det.Lost, det.Why = -1, a.lossWhy
	case lostErr != nil || lostNow != a.lostAtStart:
		det.Lost, det.Why = -1, "the kernel dropped audit records during the run"
	}
	var recs []landlock.Record
	for _, k := range a.recs {
		recs = append(recs, k.rec)
	}
	out, other := denialsOf(recs)
	for _, k := range a.recs {
		// A repeated record adds its blockers that are no file or network
		// access again, as if it had been kept.
		if k.n > 1 {
			_, o := denialsOf([]landlock.Record{k.rec})
			other += (k.n - 1) * o
		}
	}
	det.Other += other
	return out, det
}

// awaitEnd waits, at most wait, until the run's records are complete:
// its domain was deallocated with no more denials than arrived, or both
// of the helper's probes arrived, or no more records will come.
func (a *Audit) awaitEnd(wait time.Duration) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	h := a.hub
	for {
		h.mu.Lock()
		complete := a.domain != "" && (a.ended && a.received >= a.dealloc || a.probes >= 2)
		orphaned := a.orphaned
		h.mu.Unlock()
		if complete || orphaned {
			return
		}
		select {
		case <-a.changed:
		case <-deadline.C:
			return
		}
	}
}
