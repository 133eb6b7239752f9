package sandbox

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ReadyHelpers keeps helpers started in advance, so that a run finds its
// helper process started and its namespaces made: the process start
// (a fork that copies the page tables: CLONE_NEWUSER rules out vfork)
// and the helper's runtime start leave the run's path. A daemon keeps
// one for the runs it serves; nil keeps none.
//
// A ready helper has been told nothing of the caller's plan: it waits
// for its setup, with /dev/null as its standard streams, in namespaces
// of its own that hold nothing of anyone's. It is made for one launch
// (the caller's ids and groups, how they map, namespaces or not, whether
// the run captures direct connects) and serves one run of an equal
// launch, once. While it waits it prepares what depends on nothing else
// (confine's prepare): its loopback up and, for a launch that captures,
// the capture (the transparent listeners at a port of its own choosing,
// the stub resolver's socket, the nf_tables rules, the local routes), so
// a run that claims it finds them in place; a helper whose capture
// failed runs the command as a run whose capture failed always has
// (capture off, no UDP), and a run without capture never claims a
// capturing helper. Everything a run reads from the caller's policy and
// files (the mounts, the rules, the filter, the workspace, the
// environment, the proxy's port) reaches the helper in that run's setup,
// as it does for a helper started for the run. Idle, it holds no lock,
// no cgroup, no cache and no state of anyone's.
//
// The pool is bounded (Max helpers in all, PerLaunch for one launch)
// and shrinks when idle: a helper nobody claimed for Idle is stopped.
// After a run it serves or misses, the pool tops that launch up to
// PerLaunch when its owner says the run's request is done (Refill): not
// while a run is being set up or committed.
type ReadyHelpers struct {
	log            *slog.Logger
	max, perLaunch int
	idle           time.Duration
	mu             sync.Mutex
	ready          map[string][]*readyHelper
	pending        map[string]launch // ended since the last Refill
	starting       map[string]int
	// spawned is broadcast (on mu) whenever a spawn ends: a run waits
	// for a helper being started for its launch rather than start a
	// second.
	spawned              *sync.Cond
	n                    int // ready and starting
	closed               bool
	spawning             sync.WaitGroup // the spawns under way
	hits, misses, expiry uint64
	// cpu is what making the helpers cost: the daemon's thread that
	// started each one, and each helper's own until it was claimed or
	// stopped (its runtime start, and what it prepared).
	cpu time.Duration
}

// readyHelper is one helper waiting in the pool.
type readyHelper struct {
	h     *helper
	timer *time.Timer // stops it when idle for too long
}

// ReadyOptions bound a ReadyHelpers.
type ReadyOptions struct {
	// Max is how many helpers are ready or starting at once, in all
	// (0: none).
	Max int
	// PerLaunch is how many for one launch (0: 2, which keeps a helper
	// ready for commands run back to back: one is claimed while the one
	// started after the last run is still starting). Refill tops a
	// launch up to it: one started per run would keep the pool at one,
	// and a run that follows the last at once would wait for it.
	PerLaunch int
	// Idle is how long a helper may wait unclaimed (0: 30 s).
	Idle time.Duration
}

// NewReadyHelpers returns an empty pool.
func NewReadyHelpers(o ReadyOptions, log *slog.Logger) *ReadyHelpers {
	if o.PerLaunch <= 0 {
		o.PerLaunch = 2
	}
	if o.Idle <= 0 {
		o.Idle = 30 * time.Second
	}
	p := &ReadyHelpers{log: log, max: o.Max, perLaunch: min(o.PerLaunch, o.Max), idle: o.Idle,
		ready: map[string][]*readyHelper{}, starting: map[string]int{}, pending: map[string]launch{}}
	p.spawned = sync.NewCond(&p.mu)
	return p
}

// Prepare starts, in the background, a helper for the launch a run of
// spec will ask for, if the pool has room for it: what a process that
// serves one run (sandboxd run without a daemon) calls once its plan
// knows the caller and the policy, so that the helper's start, its
// namespaces and what it prepares overlap the rest of the plan. capture
// says whether the run will capture direct connects (its Egress's
// Capture and DNS, set after the plan). The run claims the helper only
// if its launch is the same after all (namespaces refused, say, are a
// miss); an unclaimed helper is stopped by Close.
func (p *ReadyHelpers) Prepare(spec Spec, capture bool) {
	if p == nil {
		return
	}
	ns := spec.Isolation != string(LandlockOnly)
	l := newLaunch(spec.withHostDefaults(), ns, spec.UID == 0)
	l.capture = ns && capture
	p.refill(l)
}

// ReadyStats are a pool's figures.
type ReadyStats struct {
	// Ready is how many helpers wait now.
	Ready int
	// Hits and Misses count the runs that found a helper ready and
	// those that started their own; Expired the helpers stopped unused.
	Hits, Misses, Expired uint64
	// PrepareCPU is the CPU time making the pool's helpers took.
	PrepareCPU time.Duration
}

// Stats returns the pool's figures (zero for nil).
func (p *ReadyHelpers) Stats() ReadyStats {
	if p == nil {
		return ReadyStats{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ready := 0
	for _, hs := range p.ready {
		ready += len(hs)
	}
	return ReadyStats{Ready: ready, Hits: p.hits, Misses: p.misses, Expired: p.expiry, PrepareCPU: p.cpu}
}

// take hands out a live helper made for l, or nil (a miss).
func (p *ReadyHelpers) take(l launch) *helper {
	if p == nil || p.max <= 0 {
		return nil
	}
	key := l.key()
	for {
		rh := p.pop(key)
		if rh == nil {
			p.count(&p.misses)
			return nil
		}
		// Read beside the run, not on its path: the helper does nothing
		// before its setup comes.
		go p.addCPU(rh.h)
		select {
		case <-rh.h.exited:
			// It died waiting (killed by someone): never used.
			go rh.h.cleanup()
			continue
		default:
		}
		p.count(&p.hits)
		return rh.h
	}
}

// pop takes the oldest helper ready for key out of the pool, waiting
// for one being started for key (nil: none).
func (p *ReadyHelpers) pop(key string) *readyHelper {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key != "" && len(p.ready[key]) == 0 && p.starting[key] > 0 {
		p.spawned.Wait()
	}
	hs := p.ready[key]
	if key == "" || len(hs) == 0 {
		return nil
	}
	rh := hs[0]
	p.ready[key] = hs[1:]
	if len(p.ready[key]) == 0 {
		delete(p.ready, key)
	}
	p.n--
	rh.timer.Stop()
	return rh
}

func (p *ReadyHelpers) count(c *uint64) {
	p.mu.Lock()
	*c++
	p.mu.Unlock()
}

// addCPU counts what making h cost: the fork on the daemon's thread and
// h's own CPU time so far (until it is claimed or stopped).
func (p *ReadyHelpers) addCPU(h *helper) {
	cpu := h.startCPU + helperCPU(h.cmd.Process.Pid)
	p.mu.Lock()
	p.cpu += cpu
	p.mu.Unlock()
}

// used notes that a run of l has ended, for Refill.
func (p *ReadyHelpers) used(l launch) {
	if p == nil || p.max <= 0 {
		return
	}
	key := l.key()
	p.mu.Lock()
	defer p.mu.Unlock()
	if key != "" && !p.closed {
		p.pending[key] = l
	}
}

// Refill starts, in the background, helpers for each launch whose run
// ended since the last Refill, up to the pool's bounds. Its owner calls
// it once a request's work is done (a daemon: once the report is sent),
// so that starting helpers never competes with a run being set up or
// committed.
func (p *ReadyHelpers) Refill() {
	if p == nil {
		return
	}
	p.mu.Lock()
	pending := p.pending
	p.pending = map[string]launch{}
	p.mu.Unlock()
	for _, l := range pending {
		p.refill(l)
	}
}

// refill starts helpers for l in the background until the pool holds as
// many as it may, for l or in all.
func (p *ReadyHelpers) refill(l launch) {
	if p == nil || p.max <= 0 {
		return
	}
	key := l.key()
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed && key != "" && p.n < p.max && len(p.ready[key])+p.starting[key] < p.perLaunch {
		p.n++
		p.starting[key]++
		p.spawning.Add(1)
		go p.spawn(key, l)
	}
}

// spawn starts one helper for l and puts it in the pool.
func (p *ReadyHelpers) spawn(key string, l launch) {
	defer p.spawning.Done()
	h, err := spawnHelper(l)
	p.mu.Lock()
	p.starting[key]--
	p.spawned.Broadcast()
	if err != nil || p.closed {
		p.n--
		p.mu.Unlock()
		if err != nil {
			p.log.Debug("ready helper not started", "err", err)
		} else {
			h.cleanup()
		}
		return
	}
	rh := &readyHelper{h: h}
	rh.timer = time.AfterFunc(p.idle, func() { p.expire(key, rh) })
	p.ready[key] = append(p.ready[key], rh)
	p.mu.Unlock()
}

// expire stops rh if it is still waiting.
func (p *ReadyHelpers) expire(key string, rh *readyHelper) {
	p.mu.Lock()
	hs := p.ready[key]
	i := -1
	for j, x := range hs {
		if x == rh {
			i = j
		}
	}
	if i < 0 {
		p.mu.Unlock()
		return
	}
	p.ready[key] = append(hs[:i:i], hs[i+1:]...)
	if len(p.ready[key]) == 0 {
		delete(p.ready, key)
	}
	p.n--
	p.expiry++
	p.mu.Unlock()
	p.addCPU(rh.h)
	rh.h.cleanup()
}

// Close stops every waiting helper and those being started; the pool
// starts none after.
func (p *ReadyHelpers) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.closed = true
	var all []*readyHelper
	for _, hs := range p.ready {
		all = append(all, hs...)
	}
	p.ready = map[string][]*readyHelper{}
	p.n -= len(all) // the spawns under way take theirs off as they end
	p.mu.Unlock()
	for _, rh := range all {
		rh.timer.Stop()
		rh.h.cleanup()
	}
	p.spawning.Wait()
}

// helperCPU is the CPU time process pid's threads have used, in
// nanoseconds as the scheduler counts it (0 when it cannot be read).
func helperCPU(pid int) time.Duration {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var sum time.Duration
	for _, t := range tasks {
		// The first field of schedstat: time spent on the CPU.
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		f, _, _ := strings.Cut(string(b), " ")
		ns, _ := strconv.ParseInt(f, 10, 64)
		sum += time.Duration(ns)
	}
	return sum
}
