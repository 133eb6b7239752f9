package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/kaudit"
	"github.com/sandboxd/sandboxd/landlock"
)

// Landlock restrict_self flags for detection: log the command's denials
// (after the helper's exec) and not those of nested domains (which the
// filter forbids anyway). Denials in the helper itself, before the exec,
// are logged by default; that is how the run learns its domain.
const landlockLogFlags = 0x2 | 0x4 // LOG_NEW_EXEC_ON | LOG_SUBDOMAINS_OFF

// Denial is one access the kernel refused, exactly as Landlock reported
// it.
type Denial struct {
	// Surface is "filesystem" or "network".
	Surface string `json:"surface"`
	// Operation is the Landlock right without its prefix: read_file,
	// write_file, make_reg, remove_dir, execute, ..., or connect/bind.
	Operation string `json:"operation"`
	// Path is the object for filesystem denials; for creation and removal
	// Landlock names the parent directory.
	Path string `json:"path,omitempty"`
	Dev  string `json:"-"`
	Ino  uint64 `json:"-"`
	Born int64  `json:"-"` // birth time of the object, when it existed
	// Destination is host:port for network denials.
	Destination string `json:"destination,omitempty"`
}

// Detection says how a run's denials were observed.
type Detection struct {
	// Detector is "audit" (Landlock's kernel records) or "none".
	Detector string `json:"detector"`
	// Why explains a missing detector.
	Why string `json:"why,omitempty"`
	// Lost is how many denials the kernel counted that were not received
	// (-1: the end-of-domain record never came, so the count is unknown).
	Lost int `json:"lost,omitempty"`
	// Other counts denials that are not file or network accesses
	// (signals and abstract sockets outside the sandbox).
	Other int `json:"other,omitempty"`
}

// auditDetector follows the kernel audit log for one run.
type auditDetector struct {
	holder *kaudit.Holder
	lis    *kaudit.Listener
	log    *slog.Logger

	// mu guards everything below.
	mu        sync.Mutex
	helperPid int
	domain    string
	pending   []landlock.Record            // access records whose domain is not known yet
	byDomain  map[string][]landlock.Record // access records, by domain
	allocated map[int]string               // pid -> domain from "allocated" records
	dealloc   map[string]uint64            // domain -> denials at deallocation
	overrun   bool
	// lostAtStart is the kernel's lost-record counter when reading began.
	lostAtStart uint32
	done        chan struct{}
	changed     chan struct{}
}

// startAuditDetector turns kernel audit on (if needed) and starts
// reading. It fails when the caller may not (not root).
func startAuditDetector(log *slog.Logger) (*auditDetector, error) {
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
	d := &auditDetector{holder: h, lis: l, log: log, lostAtStart: st.Lost,
		byDomain: map[string][]landlock.Record{}, allocated: map[int]string{},
		dealloc: map[string]uint64{}, done: make(chan struct{}), changed: make(chan struct{}, 1)}
	go d.read()
	return d, nil
}

func (d *auditDetector) read() {
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

// stop ends reading and releases kernel audit.
func (d *auditDetector) stop() {
	d.lis.Close()
	<-d.done
	if err := d.holder.Release(); err != nil {
		d.log.Warn("could not restore kernel audit settings", "err", err)
	}
}

// collect returns the denials of the run whose helper has host pid
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
func (d *auditDetector) collect(helperPid int, wait time.Duration) ([]Denial, Detection) {
	det := Detection{Detector: "audit"}
	deadline := time.After(wait)
	var domain string
wait:
	for {
		d.mu.Lock()
		domain = d.allocated[helperPid]
		recs := d.byDomain[domain]
		probes := 0
		for _, r := range recs {
			if isProbe(r) {
				probes++
			}
		}
		n, ended := d.dealloc[domain]
		d.mu.Unlock()
		if domain != "" && ended && uint64(len(recs)) >= n {
			break
		}
		if domain != "" && probes >= 2 {
			break
		}
		select {
		case <-d.changed:
		case <-deadline:
			break wait
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if domain == "" {
		det.Lost = -1
		det.Why = "the run's Landlock domain was never announced"
		return nil, det
	}
	recs := d.byDomain[domain]
	probes := 0
	for _, r := range recs {
		if isProbe(r) {
			probes++
		}
	}
	switch n, ok := d.dealloc[domain]; {
	case ok && uint64(len(recs)) < n:
		det.Lost = int(n - uint64(len(recs)))
	case !ok && probes < 2:
		det.Lost = -1
		det.Why = "the end marker never arrived"
	}
	if d.overrun || d.kernelLost() {
		det.Lost = -1
		det.Why = "the kernel dropped audit records during the run"
	}
	var out []Denial
	seen := map[string]bool{}
	for _, r := range recs {
		if isProbe(r) {
			continue
		}
		for _, b := range r.Blockers {
			if dirLevel(b) {
				// Landlock names only the parent directory of a create,
				// remove, rename or link; the seccomp observer, always on,
				// reports the exact name of the same call.
				continue
			}
			den, ok := denialOf(r, b)
			if !ok {
				det.Other++
				continue
			}
			if noise(den) {
				continue
			}
			key := den.Surface + "\x00" + den.Operation + "\x00" + den.Path + "\x00" + den.Destination
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, den)
		}
	}
	return out, det
}

// kernelLost reports whether the kernel's count of lost audit records
// rose since the detector started.
func (d *auditDetector) kernelLost() bool {
	st, err := kaudit.CurrentStatus()
	return err != nil || st.Lost != d.lostAtStart
}

func isProbe(r landlock.Record) bool {
	return len(r.Blockers) == 1 && r.Blockers[0] == "fs.write_file" && strings.HasSuffix(r.Path, "/comm") && strings.HasPrefix(r.Path, "/proc/")
}

// dirLevel reports whether a Landlock blocker is a right on a directory
// (its records name the directory, not the entry).
func dirLevel(blocker string) bool {
	return strings.HasPrefix(blocker, "fs.make_") || strings.HasPrefix(blocker, "fs.remove_") || blocker == "fs.refer"
}

// denialOf turns one blocker of a record into a Denial.
func denialOf(r landlock.Record, blocker string) (Denial, bool) {
	kind, op, ok := strings.Cut(blocker, ".")
	if !ok {
		return Denial{}, false
	}
	switch kind {
	case "fs":
		return Denial{Surface: "filesystem", Operation: op, Path: r.Path, Dev: r.Dev, Ino: r.Ino}, r.Path != ""
	case "net":
		name := map[string]string{"connect_tcp": "connect", "bind_tcp": "bind", "connect_send_udp": "connect", "bind_udp": "bind"}[op]
		if name == "" {
			name = op
		}
		return Denial{Surface: "network", Operation: name, Destination: net.JoinHostPort(r.Daddr, strconv.Itoa(r.Dest))}, r.Daddr != ""
	}
	return Denial{}, false
}

// noiseReads are accesses no reviewer should see: programs probe them
// routinely and nothing useful is behind them in a sandbox. Documented in
// the README.
var noiseReads = map[string]bool{
	"/dev/tty":          true,
	"/proc/filesystems": true,
}

func noise(d Denial) bool { return d.Surface == "filesystem" && noiseReads[d.Path] }

func (d Denial) String() string {
	if d.Surface == "network" {
		return fmt.Sprintf("%s %s", d.Operation, d.Destination)
	}
	return fmt.Sprintf("%s %s", d.Operation, d.Path)
}
