package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/atomicfile"
	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/landlock"
	"github.com/sandboxd/sandboxd/persist"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/seccomp"
)

// prepared is the work done beside the helper's start.
type prepared struct {
	rs  *landlock.Ruleset
	bpf []byte
	// bpfNoUDP is bpf without UDP sockets, for an attempt whose capture
	// could not be installed (nil: bpf allows none already).
	bpfNoUDP []byte
	plan     *persist.Sweep
	err      error
}

// startPrepare builds the ruleset, loads the filter and plans the
// persistence protection, concurrently.
// The filter observes write-intent calls and explains the calls refused by
// design unless detection is off, and observes reads too when there is no
// audit detector (observeReads).
func startPrepare(sup landlock.Support, spec *Spec, reads landlock.Carveout, opened []openedException, ns, observeReads bool, log *slog.Logger) <-chan prepared {
	t0 := time.Now()
	c := make(chan prepared, 1)
	go func() {
		var p prepared
		var wg sync.WaitGroup
		var planErr, bpfErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			if spec.Transaction && ns {
				return // the commit checks persistence paths instead
			}
			if spec.ReadOnly {
				return // nothing can be left behind
			}
			// As the caller: the scan reads, and the plan binds, only what
			// the caller itself may.
			fsid.Do(spec.caller(), func() error {
				p.plan, planErr = persist.PlanSweep(spec.sweepSpec(), persist.LoadScan(persist.ScanFile(spec.StateDir, spec.Workspace)))
				return nil
			})
		}()
		go func() {
			defer wg.Done()
			opts := seccomp.Options{Observe: !spec.NoDetect, ObserveReads: observeReads && !spec.NoDetect, UnixSockets: ns,
				Explain: !spec.NoDetect}
			if ns && spec.Egress.captures() {
				// UDP only where netfilter drops all but the stub's: the
				// helper falls back to the other filter when the capture
				// fails.
				if p.bpfNoUDP, bpfErr = spec.Filters.get(spec, opts); bpfErr != nil {
					return
				}
				opts.UDP = true
			}
			p.bpf, bpfErr = spec.Filters.get(spec, opts)
		}()
		p.rs, p.err = buildRuleset(sup, spec, reads, opened, !ns)
		wg.Wait()
		p.err = errors.Join(p.err, planErr, bpfErr)
		if p.rs != nil {
			log.Debug("prepared", "landlock_rules", p.rs.Rules(), "took_us", time.Since(t0).Microseconds())
		}
		c <- p
	}()
	return c
}

// buildRuleset creates the Landlock ruleset with the carve-out (reads)
// and the writable roots; the helper adds its own mounts.
func buildRuleset(sup landlock.Support, spec *Spec, reads landlock.Carveout, opened []openedException, restrictNet bool) (*landlock.Ruleset, error) {
	rs, err := landlock.New(sup, landlock.Options{RestrictNet: restrictNet})
	if err != nil {
		return nil, landlockRefused(err, sup, restrictNet)
	}
	if err := rs.Carve(reads); err != nil {
		rs.Close()
		return nil, err
	}
	writable := append([]string{spec.Workspace}, spec.Writable...)
	writable = append(writable, spec.Caches...)
	rights := sup.FS
	if spec.ReadOnly {
		rights &= landlock.ReadAccess
	}
	for _, w := range writable {
		if d, bad := landlock.Covers(w, spec.Deny); bad {
			rs.Close()
			return nil, publicerr.New(fmt.Sprintf("writable root %s contains the denied path %s; Landlock cannot deny reads inside a writable root", w, d))
		}
		if err := rs.AddPath(w, rights); err != nil {
			rs.Close()
			return nil, err
		}
	}
	// Each granted object gets exactly its right, on its inode.
	for _, o := range opened {
		if err := rs.AddFD(o.fd, o.access()); err != nil {
			rs.Close()
			return nil, err
		}
	}
	return rs, nil
}

// Filters keeps the seccomp programs a process has compiled or read, by
// their options, for its runs to share: its runs then neither build the
// rules nor read a file for them (~1 ms each, on the way to the helper's
// confinement). A program depends on its options and on this build
// alone. nil: each run reads the caller's cache.
type Filters struct {
	mu   sync.Mutex
	byOp map[seccomp.Options][]byte
	// shared: the runs are many callers' (a daemon's), so a program is
	// compiled here, never taken from a caller's cache: a file one caller
	// may write would otherwise become every caller's filter.
	shared bool
}

// NewFilters returns an empty Filters for the runs of one caller (an
// embedded run's process): a program may come from that caller's cache.
func NewFilters() *Filters { return &Filters{byOp: map[seccomp.Options][]byte{}} }

// NewSharedFilters returns an empty Filters for the runs of many callers:
// every program is compiled in this process.
func NewSharedFilters() *Filters { return &Filters{byOp: map[seccomp.Options][]byte{}, shared: true} }

// get returns the program for opts: kept, else compiled (shared) or from
// the caller's cache (cachedFilter), and kept.
func (f *Filters) get(spec *Spec, opts seccomp.Options) ([]byte, error) {
	if f == nil {
		return cachedFilter(spec.StateDir, spec.caller(), opts)
	}
	f.mu.Lock()
	prog, ok := f.byOp[opts]
	f.mu.Unlock()
	if ok {
		return prog, nil
	}
	var err error
	if f.shared {
		prog, err = seccomp.Compile(seccomp.Build(opts))
	} else {
		prog, err = cachedFilter(spec.StateDir, spec.caller(), opts)
	}
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.byOp[opts] = prog
	f.mu.Unlock()
	return prog, nil
}

// cachedFilter returns the compiled seccomp program, compiling it once per
// filter version into the caller's state directory (read and written as
// the caller: its own file).
func cachedFilter(stateDir string, caller fsid.ID, opts seccomp.Options) ([]byte, error) {
	rules := seccomp.Build(opts)
	path := filepath.Join(stateDir, "seccomp", rules.Key()+".bpf")
	var cached []byte
	fsid.Do(caller, func() error {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 && len(b)%8 == 0 {
			cached = b
		}
		return nil
	})
	if cached != nil {
		return cached, nil
	}
	prog, err := seccomp.Compile(rules)
	if err != nil {
		return nil, err
	}
	fsid.Do(caller, func() error {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return err
		}
		// Synced: a filter cut short by a power loss must not be loaded.
		return atomicfile.WriteFileSync(path, prog, 0o600)
	})
	return prog, nil
}

// landlockRefused gives the reason Landlock cannot be used its public
// sentence; the cause (the errno, landlock's own text) is for the log.
func landlockRefused(err error, sup landlock.Support, restrictNet bool) error {
	const cannot = "cannot enforce the policy on this kernel: "
	switch {
	case errors.Is(err, landlock.ErrUnavailable):
		return publicerr.Wrap(err, cannot+"it has no usable Landlock (Linux 5.13 or later with lsm=landlock is needed)")
	case restrictNet && sup.Net == 0:
		return publicerr.Errorf(err, cannot+"its Landlock (ABI %d) cannot restrict TCP connections (ABI 4 or later can)", sup.ABI)
	}
	return publicerr.Wrap(err, cannot+"the kernel refused Landlock (run with -v to log why)")
}
