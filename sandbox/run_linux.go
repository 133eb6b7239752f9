package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/landlock"
	"github.com/sandboxd/sandboxd/persist"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox/detect"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// ErrNoIsolation is returned when namespaces were required but the kernel
// or the environment refused them.
var ErrNoIsolation = errors.New("sandbox: namespaces are unavailable")

// defaultHostID is the host uid and gid a root caller's command runs as.
const defaultHostID = 100000

// withHostDefaults is s with the host ids a root caller's command runs
// as when s names none.
func (s Spec) withHostDefaults() Spec {
	if s.HostUID == 0 {
		s.HostUID, s.HostGID = defaultHostID, defaultHostID
	}
	return s
}

// Run runs spec.Argv in a new sandbox and waits for it and every process
// it started. An error means sandboxd itself failed (exit status 125);
// the command's own failures are in Result.
//
// When Run returns, every process of the command is gone, what it wrote
// to granted files is written back, its denials are collected, and
// nothing can still write the workspace's layer (Result.Layer) or the
// caches. Everything Run starts (the helper, its goroutines and timers,
// the detectors, the preparation beside the helper's start) is stopped
// and waited for before it returns, on every path; except that, with
// Spec.Releases, a run whose command ended releases its kernel objects
// after Run has returned (the helper's exit and its namespaces, the
// cache layers' locks, the cgroup: see Releases), and Releases.Close
// waits for that.
func Run(ctx context.Context, spec Spec, log *slog.Logger) (Result, error) {
	r := &run{spec: spec, log: log, t0: time.Now()}
	defer r.release()
	if err := r.plan(); err != nil {
		return r.res, err
	}
	if err := r.start(); err != nil {
		return r.res, err
	}
	r.describe()
	if err := r.sendSetup(); err != nil {
		return r.abort(err)
	}
	if err := r.sendConfine(); err != nil {
		return r.res, err
	}
	return r.finish(ctx)
}

// checkPipes refuses a Spec.Pipes entry that is not the write end of a
// pipe: any other descriptor (a file, a directory, a socket) would give
// the command what its ruleset and network namespace deny.
func checkPipes(pipes []*os.File) error {
	for i, p := range pipes {
		var st unix.Stat_t
		if p == nil || unix.Fstat(int(p.Fd()), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
			return fmt.Errorf("sandbox: pipe %d is not a pipe", i)
		}
		if fl, err := unix.FcntlInt(p.Fd(), unix.F_GETFL, 0); err != nil || fl&unix.O_ACCMODE != unix.O_WRONLY {
			return fmt.Errorf("sandbox: pipe %d is not a pipe's write end", i)
		}
	}
	return nil
}

// run is one Run in progress. Only Run's goroutine uses it.
type run struct {
	spec Spec
	log  *slog.Logger
	t0   time.Time
	// started is the coarse wall-clock time the attempt began: anything
	// in the workspace with a later change time was changed after it
	// (the helper starts the command only once the coarse clock that
	// stamps file changes has passed it).
	started unix.Timespec
	sup     landlock.Support
	root    bool // the caller is host root
	wantNS  bool // namespaces (until they are refused)
	txn     bool // the workspace is behind a copy-on-write layer
	noLayer string
	runID   string
	res     Result

	cg  *cgroup
	mem *limitWatch // nil: no memory watch
	// tmpSize and layerSize are the private tmpfs sizes (sizeTmpfs).
	tmpSize, layerSize int64
	// reads is what the command may read by the carve-out: the one
	// value the ruleset enforces, the judge of observed reads and the
	// host cache check answer by.
	reads      landlock.Carveout
	det        *detect.Audit
	opened     []openedException
	grantsBack bool // writeBackGrants has run
	prepc      <-chan prepared
	prep       *prepared // what prepc delivered, once it has
	h          *helper
	setup      *wire.SetupMsg
	// undo are the steps that release what the run holds, in the order
	// they were taken; cleanup runs them last first.
	undo []func()
	// locks are the cache layers' locks the run holds (lockLayer).
	locks []fileKey
	// ended: finish returned the command's status, with nothing left to
	// do on the caller's behalf (release may be deferred).
	ended bool
}

func (r *run) mark(what string) { LogPhase(r.log, "supervisor", what, r.t0) }

// LogPhase logs, at debug level (-v), that part (the supervisor, the
// session, the daemon, the client) reached phase what: when, in
// microseconds since t0 and since the Unix epoch (to be placed beside
// other processes' phases), and this process's CPU time by then, user
// and system, its children's not included. bench/launch -phases reads
// these lines.
func LogPhase(log *slog.Logger, part, what string, t0 time.Time) {
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	now := time.Now()
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	log.Debug(part, "phase", what, "at_us", now.Sub(t0).Microseconds(), "unix_us", now.UnixMicro(),
		"cpu_us", ru.Utime.Nano()/1000+ru.Stime.Nano()/1000)
}

func (r *run) cleanup() {
	for i := len(r.undo) - 1; i >= 0; i-- {
		r.undo[i]()
	}
	r.mark("cleaned up")
}

// plan checks the kernel and the spec, and takes what the run needs
// before the helper starts: the state and cache directories, the cgroup,
// the audit detector and the granted objects.
func (r *run) plan() error {
	unix.ClockGettime(unix.CLOCK_REALTIME, &r.started)
	sup, err := landlock.Probe()
	if err != nil {
		return landlockRefused(err, landlock.Support{}, false)
	}
	r.sup = sup
	r.res.LandlockABI = sup.ABI
	spec := &r.spec
	r.root = spec.UID == 0
	*spec = spec.withHostDefaults()
	if spec.KillGrace == 0 {
		spec.KillGrace = 2 * time.Second
	}
	r.wantNS = spec.Isolation != string(LandlockOnly)
	if err := checkPipes(spec.Pipes); err != nil {
		return err
	}
	if spec.ReadOnly {
		spec.Transaction = false
		for _, e := range spec.Exceptions {
			if wire.Writes(string(e.Operation)) {
				return fmt.Errorf("sandbox: a read-only run cannot take the %s exception for %s", e.Operation, e.Path)
			}
		}
	}
	if !r.wantNS && r.root {
		return publicerr.New(fmt.Sprintf("refusing to run as host root without a user namespace (isolation %q)", spec.Isolation))
	}
	r.runID = newRunID()
	// Made as the caller: the kernel says whether the caller may, and
	// they are the caller's.
	err = fsid.Do(spec.caller(), func() error {
		if err := os.MkdirAll(spec.StateDir, 0o700); err != nil {
			return publicerr.Wrap(fmt.Errorf("sandbox: state directory: %w", err),
				fmt.Sprintf("sandboxd's state directory (in XDG_STATE_HOME) cannot be made by uid %d (%s)", spec.UID, errnoText(err)))
		}
		// The caches must exist before the ruleset names them.
		for _, c := range spec.Caches {
			if err := os.MkdirAll(c, 0o700); err != nil {
				return publicerr.Wrap(fmt.Errorf("sandbox: cache directory: %w", err),
					fmt.Sprintf("sandboxd's cache directory (in its state directory) cannot be made by uid %d (%s)", spec.UID, errnoText(err)))
			}
		}
		// The read roots resolve as the caller's own path walk would.
		r.reads = landlock.NewCarveout(landlock.ResolveRoots(spec.Read), spec.Deny, spec.ListCarved)
		return nil
	})
	if err != nil {
		return err
	}
	r.makeCgroup()
	r.mark("cgroup")
	r.startDetector()
	r.mark("detector")
	r.checkLayer()
	// Granted exceptions: each object opened (or, to create, created) and
	// checked to be the granted one before anything else uses it; opened
	// as the caller, so a grant never reaches what the caller could not.
	// One thread for the three: each Do is a thread made and ended.
	return fsid.Do(spec.caller(), func() (err error) {
		r.opened, err = openExceptions(spec.Exceptions, spec.Umask)
		if err != nil {
			return err
		}
		r.undo = append(r.undo, func() { closeExceptions(r.opened) })
		if err := r.copyGrants(); err != nil {
			return err
		}
		return r.makeCopies()
	})
}

// copyGrants shows a copy of each file granted for writing in its place,
// and writes the copy's content back once the run is over (cleanup runs
// this after the helper, and with it every process of the run, is gone).
// Without a mount namespace no copy can be shown: the file itself is
// granted, and the report says its metadata is exposed.
func (r *run) copyGrants() error {
	writes := false
	for _, o := range r.opened {
		writes = writes || wire.Writes(string(o.Operation))
	}
	if !writes {
		return nil
	}
	if !r.wantNS {
		r.res.Degraded = append(r.res.Degraded, "without namespaces a file granted for writing is exposed itself: the command could change its mode, times and extended attributes")
		return nil
	}
	dir := filepath.Join(r.spec.StateDir, "copies", r.runID+"-grants")
	r.undo = append(r.undo, func() { r.removeAsCaller(dir) })
	if err := copyWrites(r.opened, dir); err != nil {
		return err
	}
	// On a path that ends the run early, what the command wrote still
	// goes back (finish does it as soon as the command has ended).
	r.undo = append(r.undo, r.writeBackGrants)
	return nil
}

// writeBackGrants puts what the command wrote into its granted files,
// once.
func (r *run) writeBackGrants() {
	if r.grantsBack {
		return
	}
	r.grantsBack = true
	err := fsid.Do(r.spec.caller(), func() error {
		return writeBack(r.opened, r.spec.StateDir, filepath.Join("grant-leftovers", r.runID))
	})
	if err == nil {
		return
	}
	r.log.Warn("granted files", "err", publicerr.Internal(err))
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		r.res.Degraded = append(r.res.Degraded, publicerr.Message(e,
			"what the command wrote to a granted file could not all be written back ("+publicerr.Reason(e)+")"))
	}
}

// makeCopies writes the spec's copies under the state directory and
// adds each, as a read of its path, to the granted objects: its inode
// gets a read rule and is bound over the path it stands in for.
func (r *run) makeCopies() error {
	if len(r.spec.Copies) == 0 || !r.wantNS {
		return nil
	}
	dir := filepath.Join(r.spec.StateDir, "copies", r.runID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("sandbox: copies: %w", err)
	}
	r.undo = append(r.undo, func() { r.removeAsCaller(dir) })
	for i, c := range r.spec.Copies {
		if !filepath.IsAbs(c.Path) || filepath.Clean(c.Path) != c.Path {
			return fmt.Errorf("sandbox: copy for %q: not an absolute, clean path", c.Path)
		}
		src := filepath.Join(dir, strconv.Itoa(i))
		// World-readable: it holds nothing secret, and the command's uid
		// may be any.
		if err := os.WriteFile(src, c.Data, 0o444); err != nil {
			return fmt.Errorf("sandbox: copy for %s: %w", c.Path, err)
		}
		fd, err := unix.Open(src, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("sandbox: copy for %s: %w", c.Path, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return fmt.Errorf("sandbox: copy for %s: %w", c.Path, err)
		}
		r.opened = append(r.opened, openedException{fd: fd, source: src,
			Exception: Exception{Operation: boundary.OpReadFile, Path: c.Path, Dev: st.Dev, Ino: st.Ino}})
	}
	return nil
}

// removeAsCaller removes a directory sandboxd made in the caller's state,
// as the caller: a path the caller changed meanwhile (a symlink in its
// place) leads nowhere the caller could not remove from itself.
func (r *run) removeAsCaller(dir string) {
	fsid.Do(r.spec.caller(), func() error { return os.RemoveAll(dir) })
}

// makeCgroup creates the run's cgroup, or notes what bounds the command
// without one.
func (r *run) makeCgroup() {
	c, err := newCgroup(probeCgroups(), groupName(r.runID), r.spec.Limits)
	if err == nil {
		r.cg = c
		r.undo = append(r.undo, c.remove)
		r.res.Containment = "pids cgroup"
		if c.v2 {
			r.res.Containment += " (v2)"
		} else {
			r.res.Containment += " (v1)"
		}
	} else {
		r.res.Containment = "RLIMIT_NPROC"
		r.log.Info("no pids cgroup", "err", publicerr.Internal(err))
		r.res.Degraded = append(r.res.Degraded, "no pids cgroup ("+publicerr.Reason(err)+"); processes are bounded by RLIMIT_NPROC only")
	}
	r.sizeTmpfs()
}

// startDetector starts reading kernel audit: exact boundaries come from
// Landlock's audit records, which only root may switch on and read.
func (r *run) startDetector() {
	switch {
	case r.spec.NoDetect:
		r.res.Detection = Detection{Detector: "none", Why: "detection turned off"}
	case !auditCapable():
		r.res.Detection = Detection{Detector: "none", Why: "kernel audit needs root (CAP_AUDIT_CONTROL, CAP_AUDIT_READ)"}
	case !r.sup.LogFlags:
		r.res.Detection = Detection{Detector: "none", Why: fmt.Sprintf("Landlock ABI %d cannot log denials (needs ABI 7)", r.sup.ABI)}
	default:
		hub := r.spec.Audit
		if hub == nil {
			hub = detect.NewHub(r.log)
		}
		det, err := hub.Start()
		if err != nil {
			r.log.Info("kernel audit unavailable", "err", err)
			r.res.Detection = Detection{Detector: "none", Why: "kernel audit unavailable (" + publicerr.Reason(err) + ")"}
			return
		}
		r.det = det
		r.undo = append(r.undo, det.Stop)
	}
}

// checkLayer turns the transaction off for a workspace with mounts inside:
// an overlay shows only the workspace's own file system, so they would
// look empty, and such a workspace is written straight.
func (r *run) checkLayer() {
	if !r.spec.Transaction || !r.wantNS {
		return
	}
	if sub, err := mountsBelow(r.spec.Workspace); err != nil || len(sub) > 0 {
		r.noLayer = fmt.Sprintf("the workspace contains other mounts (%s), which a copy-on-write layer cannot show", strings.Join(sub, ", "))
		if err != nil {
			r.log.Warn("mounts inside the workspace", "err", err)
			r.noLayer = "cannot list the mounts inside the workspace (" + publicerr.Reason(err) + ")"
		}
		r.spec.Transaction = false
	}
}

// start prepares the ruleset, the filter and the persistence plan while
// the helper starts; when an unprivileged caller's namespaces are refused
// and the spec allows it, it falls back to landlock-only.
func (r *run) start() error {
	r.startPrepare(r.wantNS)
	r.txn = r.spec.Transaction && r.wantNS
	h, err := startHelper(r.spec, r.wantNS, r.root, r.log)
	r.mark("helper started")
	if err != nil && r.wantNS && r.spec.Isolation != string(Namespaces) && !r.root && isNSRefusal(err) {
		r.log.Debug("namespaces refused, falling back to landlock-only", "err", err)
		r.wantNS = false
		// The ruleset must now also close TCP; prepare again.
		r.dropPrepared()
		r.startPrepare(false)
		h, err = startHelper(r.spec, false, r.root, r.log)
		r.txn = false
	}
	if err != nil {
		r.dropPrepared()
		if errors.Is(err, ErrNoIsolation) || isNSRefusal(err) {
			// The kernel's reason (an errno) is the whole story here.
			return publicerr.Wrap(fmt.Errorf("%w: %v", ErrNoIsolation, err), "namespaces are unavailable here ("+errnoText(err)+")")
		}
		return err
	}
	r.h = h
	r.undo = append(r.undo, func() {
		h.cleanup()
		if ps := h.cmd.ProcessState; ps != nil {
			// The helper's whole CPU time, with the command's it reaped.
			r.log.Debug("helper cpu", "user_us", ps.UserTime().Microseconds(), "sys_us", ps.SystemTime().Microseconds())
		}
	})
	if r.cg != nil {
		h.group = r.cg.list
	}
	if r.det != nil {
		// Before the helper restricts itself (it waits for the confine
		// message): the kernel announces its domain with this pid.
		r.det.Own(h.cmd.Process.Pid)
	}
	r.watchMemory()
	return nil
}

// startPrepare starts building what the helper gets second; the run
// waits for it on every path (prepared, dropPrepared or cleanup).
func (r *run) startPrepare(ns bool) {
	if r.prepc == nil {
		r.undo = append(r.undo, r.dropPrepared)
	}
	r.prepc, r.prep = startPrepare(r.sup, &r.spec, r.reads, r.opened, ns, r.det == nil, r.log), nil
}

// prepared waits for the preparation.
func (r *run) prepared() *prepared {
	if r.prep == nil {
		p := <-r.prepc
		r.prep = &p
	}
	return r.prep
}

// dropPrepared waits for the preparation and releases its ruleset.
func (r *run) dropPrepared() {
	if p := r.prepared(); p.rs != nil {
		p.rs.Close()
	}
}

// abort ends a run that failed after the helper started.
func (r *run) abort(err error) (Result, error) {
	r.h.kill()
	r.dropPrepared()
	return r.res, err
}

// describe records the run's transaction mode and isolation, and what
// they leave unenforced.
func (r *run) describe() {
	res := &r.res
	switch {
	case r.txn:
		res.Transaction = Transaction{Mode: "layer"}
	case r.spec.ReadOnly:
		res.Transaction = Transaction{Mode: "none", Why: "a read-only run"}
	case r.noLayer != "":
		res.Transaction = Transaction{Mode: "none", Why: r.noLayer}
		res.Degraded = append(res.Degraded, "no copy-on-write layer: "+r.noLayer+"; the command writes straight to the workspace, and a retry runs over the first attempt's effects")
	case !r.spec.Transaction:
		res.Transaction = Transaction{Mode: "none", Why: "turned off (--no-transaction)"}
	default:
		res.Transaction = Transaction{Mode: "none", Why: "no mount namespace for a copy-on-write layer"}
		res.Degraded = append(res.Degraded, "no copy-on-write layer: the command writes straight to the workspace, and a retry runs over the first attempt's effects")
	}
	if r.wantNS {
		res.Isolation, res.NetworkMode = Namespaces, NetNS
		if r.spec.Egress != nil {
			res.Egress = "proxy"
		} else {
			res.Egress, res.EgressWhy = "none", "no proxy was configured"
		}
		return
	}
	res.Isolation, res.NetworkMode = LandlockOnly, NetLandlock
	res.Egress, res.EgressWhy = "none", "egress needs namespaces: Landlock's TCP rules name ports, not hosts, so they cannot limit a connect to the proxy"
	res.Degraded = append(res.Degraded,
		"no namespaces: no private /tmp, /proc or /dev; host unix sockets are unreachable only because seccomp refuses AF_UNIX; UDP and other protocols only because seccomp refuses them; processes are not in a pid namespace",
		"no network namespace: Landlock denies every TCP connect and bind, so servers inside cannot listen on loopback",
		"no mount namespace: existing persistence paths in the workspace (.git/hooks, .git/config, ...) are writable; only new ones are caught after the run",
		"no user namespace: the bounding capability set cannot be cleared without CAP_SETPCAP (no_new_privs keeps it from granting anything)")
}

// captured reports whether the attempt's direct connects were captured.
func (r *run) captured() bool {
	on, _ := r.h.egress.captureState()
	return r.wantNS && on
}

// noteCapture records how direct connects fared, once the helper is done.
func (r *run) noteCapture() {
	if !r.wantNS || !r.spec.Egress.captures() {
		return
	}
	on, why := r.h.egress.captureState()
	if on {
		r.res.Capture = "on"
		return
	}
	if why == "" {
		why = "the helper did not set it up"
	}
	r.res.Capture, r.res.CaptureWhy = "off", why
	r.res.Degraded = append(r.res.Degraded, "no capture of direct connects ("+why+"): only tools that use the proxy variables reach the network; a connect straight to an address is refused and reported")
}

// finish waits for the command and collects what it did: the layer, the
// denials, and (without a layer) the persistence sweep.
func (r *run) finish(ctx context.Context) (Result, error) {
	h, res := r.h, &r.res
	code, sig, timedOut, err := h.wait(ctx, r.spec, r.log)
	r.mark("command ended")
	r.writeBackGrants()
	memory, writing := r.memoryHit()
	if memory && !h.haveExit {
		// The kernel killed the helper too before it could say how the
		// command ended (v2 kills the whole group; v1 the helper only
		// when nothing of the command was left to kill): killed at the
		// limit.
		code, sig, err = 128+int(unix.SIGKILL), int(unix.SIGKILL), nil
	}
	layerFull := h.layer != nil && fsFull(int(h.layer.Fd()))
	res.Limits = r.limitsHit(memory, writing, h.exitLimits, layerFull)
	for _, l := range res.Limits {
		r.log.Debug("limit reached", "limit", l.Limit, "value", l.Value)
	}
	if h.layer != nil {
		res.Layer = &Layer{Root: h.layer, Started: time.Unix(r.started.Unix()), releases: r.spec.Releases,
			HostUID: r.spec.UID, HostGID: r.spec.GID, UID: r.spec.UID, GID: r.spec.GID}
		if r.root {
			res.Layer.HostUID, res.Layer.HostGID = r.spec.HostUID, r.spec.HostGID
			res.Layer.UID, res.Layer.GID = ownerOf(r.spec.Workspace)
		}
		h.layer = nil
	} else if r.txn && err == nil {
		return *res, errors.New("sandbox: the helper did not hand over the workspace layer")
	}
	if !h.started.IsZero() {
		res.Setup = h.started.Sub(r.t0)
	}
	r.noteCapture()
	if err != nil {
		return *res, err
	}
	res.ExitCode, res.Signal, res.TimedOut = code, sig, timedOut
	r.collectDenials()
	r.mark("denials collected")
	if p := r.prepared(); p.plan != nil && !r.txn {
		// Without a layer, persistence paths made during the run are
		// swept out now; with one, the commit checks them.
		// As the caller: what it moves and where it moves it to are the
		// caller's to change.
		var saveErr error
		err := fsid.Do(r.spec.caller(), func() error {
			done, err := p.plan.Run(filepath.Join(r.spec.StateDir, "quarantine", r.runID))
			res.Persistence = done
			if err == nil {
				saveErr = persist.SaveScan(persist.ScanFile(r.spec.StateDir, r.spec.Workspace), p.plan.Scan())
			}
			return err
		})
		if err != nil {
			return *res, fmt.Errorf("sandbox: persistence sweep: %w", err)
		}
		if saveErr != nil {
			r.log.Warn("could not remember the workspace scan", "err", saveErr)
		}
		r.mark("persistence swept")
	}
	r.ended = true
	return *res, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func ownerOf(p string) (int, int) {
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil {
		return 0, 0
	}
	return int(st.Uid), int(st.Gid)
}

func newRunID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// auditCapable reports whether this process holds the capabilities kernel
// audit needs (the process's rights, not the caller's: a root daemon
// reads audit for every caller's runs).
func auditCapable() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if unix.Capget(&hdr, &data[0]) != nil {
		return false
	}
	has := func(c int) bool { return data[c/32].Effective&(1<<(uint(c)%32)) != 0 }
	return has(unix.CAP_AUDIT_CONTROL) && has(unix.CAP_AUDIT_READ)
}
