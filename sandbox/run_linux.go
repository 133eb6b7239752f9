package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/landlock"
	"github.com/sandboxd/sandboxd/persist"
	"github.com/sandboxd/sandboxd/sandbox/detect"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"github.com/sandboxd/sandboxd/seccomp"
	"github.com/sandboxd/sandboxd/termfilter"
	"golang.org/x/sys/unix"
)

// ErrNoIsolation is returned when namespaces were required but the kernel
// or the environment refused them.
var ErrNoIsolation = errors.New("sandbox: namespaces are unavailable")

// defaultHostID is the host uid and gid a root caller's command runs as.
const defaultHostID = 100000

// Run runs spec.Argv in a new sandbox and waits for it and every process
// it started. An error means sandboxd itself failed (exit status 125);
// the command's own failures are in Result.
func Run(ctx context.Context, spec Spec, log *slog.Logger) (Result, error) {
	t0 := time.Now()
	res := Result{}
	// Anything in the workspace whose change time is later than started
	// was changed after the attempt began: the helper starts the command
	// only once the coarse clock that stamps file changes has passed it.
	var started unix.Timespec
	unix.ClockGettime(unix.CLOCK_REALTIME, &started)
	sup, err := landlock.Probe()
	if err != nil {
		return res, err
	}
	res.LandlockABI = sup.ABI
	root := os.Geteuid() == 0
	if spec.HostUID == 0 {
		spec.HostUID, spec.HostGID = defaultHostID, defaultHostID
	}
	if spec.KillGrace == 0 {
		spec.KillGrace = 2 * time.Second
	}
	wantNS := spec.Isolation != string(LandlockOnly)
	if !wantNS && root {
		return res, fmt.Errorf("sandbox: refusing to run as host root without a user namespace (isolation %q)", spec.Isolation)
	}
	runID := newRunID()
	if err := os.MkdirAll(spec.StateDir, 0o700); err != nil {
		return res, fmt.Errorf("sandbox: state directory: %w", err)
	}

	// The caches must exist before the ruleset names them.
	for _, c := range spec.Caches {
		if err := os.MkdirAll(c, 0o700); err != nil {
			return res, fmt.Errorf("sandbox: cache directory: %w", err)
		}
	}
	mark := func(what string) { log.Debug("supervisor", "phase", what, "at_us", time.Since(t0).Microseconds()) }

	var cg *cgroup
	cgInfo := probeCgroups()
	if c, err := newCgroup(cgInfo, "sandboxd-"+runID, spec.Limits); err == nil {
		cg = c
		defer cg.remove()
		res.Containment = "pids cgroup"
		if cg.v2 {
			res.Containment += " (v2)"
		} else {
			res.Containment += " (v1)"
		}
	} else {
		res.Containment = "RLIMIT_NPROC"
		res.Degraded = append(res.Degraded, "no pids cgroup ("+err.Error()+"); processes are bounded by RLIMIT_NPROC only")
	}
	if cg == nil || !cg.memory {
		res.Degraded = append(res.Degraded, "no memory cgroup; memory is bounded by RLIMIT_DATA only")
	}

	mark("cgroup")
	// Exact boundaries come from Landlock's kernel audit records, which
	// only root may switch on and read.
	var det *detect.Audit
	switch {
	case spec.NoDetect:
		res.Detection = Detection{Detector: "none", Why: "detection turned off"}
	case !root:
		res.Detection = Detection{Detector: "none", Why: "kernel audit needs root (CAP_AUDIT_CONTROL, CAP_AUDIT_READ)"}
	case !sup.LogFlags:
		res.Detection = Detection{Detector: "none", Why: fmt.Sprintf("Landlock ABI %d cannot log denials (needs ABI 7)", sup.ABI)}
	default:
		if det, err = detect.StartAudit(log); err != nil {
			res.Detection = Detection{Detector: "none", Why: "kernel audit unavailable: " + err.Error()}
			det = nil
		} else {
			defer det.Stop()
		}
	}
	mark("detector")
	// An overlay shows only the workspace's own file system: mounts inside
	// it would look empty, so such a workspace is written straight.
	noLayer := ""
	if spec.Transaction && wantNS {
		if sub, err := mountsBelow(spec.Workspace); err != nil || len(sub) > 0 {
			noLayer = fmt.Sprintf("the workspace contains other mounts (%s), which a copy-on-write layer cannot show", strings.Join(sub, ", "))
			if err != nil {
				noLayer = "cannot list the mounts inside the workspace: " + err.Error()
			}
			spec.Transaction = false
		}
	}
	// Granted exceptions: each object opened (or, to create, created) and
	// checked to be the granted one before anything else uses it.
	opened, err := openExceptions(spec.Exceptions)
	if err != nil {
		return res, err
	}
	defer closeExceptions(opened)
	// The Landlock carve-out, the compiled filter and the persistence plan
	// are built while the helper starts and mounts.
	prepc := startPrepare(sup, &spec, opened, wantNS, det == nil, log)
	txn := spec.Transaction && wantNS
	h, err := startHelper(spec, wantNS, root)
	mark("helper started")
	if err != nil && wantNS && spec.Isolation != string(Namespaces) && !root && isNSRefusal(err) {
		log.Debug("namespaces refused, falling back to landlock-only", "err", err)
		wantNS = false
		// The ruleset must now also close TCP; prepare again.
		if p := <-prepc; p.rs != nil {
			p.rs.Close()
		}
		prepc = startPrepare(sup, &spec, opened, false, det == nil, log)
		h, err = startHelper(spec, false, root)
		txn = false
	}
	if err != nil {
		p := <-prepc
		if p.rs != nil {
			p.rs.Close()
		}
		if errors.Is(err, ErrNoIsolation) || isNSRefusal(err) {
			return res, fmt.Errorf("%w: %v", ErrNoIsolation, err)
		}
		return res, err
	}
	defer h.cleanup()
	// abort ends a run that failed after the helper started.
	abort := func(err error) (Result, error) {
		h.kill()
		if p := <-prepc; p.rs != nil {
			p.rs.Close()
		}
		return res, err
	}
	switch {
	case txn:
		res.Transaction = Transaction{Mode: "layer"}
	case noLayer != "":
		res.Transaction = Transaction{Mode: "none", Why: noLayer}
		res.Degraded = append(res.Degraded, "no copy-on-write layer: "+noLayer+"; the command writes straight to the workspace, and a retry runs over the first attempt's effects")
	case !spec.Transaction:
		res.Transaction = Transaction{Mode: "none", Why: "turned off (--no-transaction)"}
	default:
		res.Transaction = Transaction{Mode: "none", Why: "no mount namespace for a copy-on-write layer"}
		res.Degraded = append(res.Degraded, "no copy-on-write layer: the command writes straight to the workspace, and a retry runs over the first attempt's effects")
	}
	if wantNS {
		res.Isolation, res.NetworkMode = Namespaces, NetNS
	} else {
		res.Isolation, res.NetworkMode = LandlockOnly, NetLandlock
		res.Degraded = append(res.Degraded,
			"no namespaces: no private /tmp, /proc or /dev; host unix sockets are unreachable only because seccomp refuses AF_UNIX; UDP and other protocols only because seccomp refuses them; processes are not in a pid namespace",
			"no network namespace: Landlock denies every TCP connect and bind, so servers inside cannot listen on loopback",
			"no mount namespace: existing persistence paths in the workspace (.git/hooks, .git/config, ...) are writable; only new ones are caught after the run",
			"no user namespace: the bounding capability set cannot be cleared without CAP_SETPCAP (no_new_privs keeps it from granting anything)")
	}
	// The helper joins the run's cgroup itself, through descriptors opened
	// here: writing "0" to a v1 "tasks" file moves only the calling thread
	// and skips the global lock that makes moving a whole process wait
	// for an RCU grace period (up to ~10 ms here). The command is forked
	// from that thread, so it and all its descendants are in the group.
	var cgFDs []int
	if cg != nil {
		if cgFDs, err = cg.openJoin(); err != nil {
			return abort(err)
		}
		defer func() { closeAll(cgFDs) }()
	}
	setup := &wire.SetupMsg{
		Argv: spec.Argv, Env: spec.Env, Dir: spec.Dir,
		LandlockFlags: map[bool]uint32{true: detect.LandlockLogFlags}[det != nil],
		Namespaces:    wantNS,
		Workspace:     spec.Workspace,
		TmpSize:       spec.Limits.TmpSize,
		Limits:        wire.Limits(spec.Limits),
		LimitNproc:    true,
		LimitData:     cg == nil || !cg.memory,
		LandlockABI:   sup.ABI,
		LandlockFS:    uint64(sup.FS),
	}
	if txn {
		setup.Layer, setup.NotBefore = spec.LayerSize, started.Nano()
	}
	var trees []int
	defer func() { closeAll(trees) }()
	if wantNS {
		setup.Mask = maskedDirs(spec.RuntimeDir)
		roots := append([]string{spec.Workspace}, spec.Writable...)
		roots = append(roots, spec.Caches...)
		if root {
			// Id-mapped trees: the command's host uid owns what root owns.
			userns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", h.cmd.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return abort(fmt.Errorf("sandbox: user namespace: %w", err))
			}
			defer unix.Close(userns)
			type tree struct {
				path     string
				readOnly bool
			}
			var want []tree
			switch {
			case spec.Home == "" || !h.homeMapped:
			case wire.InOwnTmpfs(spec.Home):
				// Below the private /tmp, whose rule grants every right to
				// all beneath it, the carve-out could not hold: the
				// home is not mapped at all.
				res.Degraded = append(res.Degraded, "home directory is below /tmp and is not visible inside")
			default:
				want = append(want, tree{spec.Home, true})
			}
			for _, r := range roots {
				want = append(want, tree{r, false})
			}
			for _, t := range want {
				fd, err := idmappedTree(t.path, userns, t.readOnly)
				if err != nil && t.readOnly {
					// The home is a convenience (reading ~/.gitconfig,
					// module caches); without it the command reads only
					// what other users may read there.
					res.Degraded = append(res.Degraded, "home directory not mapped for reading: "+err.Error())
					continue
				}
				if err != nil {
					return abort(err)
				}
				trees = append(trees, fd)
				setup.Attach = append(setup.Attach, t.path)
			}
			setup.Skeleton = skeletonDirs(setup.Attach, spec.HostUID, spec.HostGID)
			for _, o := range opened {
				fd, err := wire.GrantTree(o.fd, o.Path, o.Operation, userns)
				if err != nil {
					return abort(err)
				}
				trees = append(trees, fd)
				setup.Attach = append(setup.Attach, o.Path)
			}
		} else {
			setup.Clone = roots
			for _, o := range opened {
				setup.ExceptionBinds = append(setup.ExceptionBinds, wire.ExceptionBind{Operation: o.Operation, Path: o.Path, Dev: o.Dev, Ino: o.Ino})
			}
		}
	} else {
		tmp := filepath.Join(spec.StateDir, "tmp", runID)
		if err := os.MkdirAll(tmp, 0o700); err != nil {
			return abort(fmt.Errorf("sandbox: private TMPDIR: %w", err))
		}
		defer os.RemoveAll(tmp)
		setup.TmpDir = tmp
		setup.Env = setEnv(setup.Env, "TMPDIR", tmp)
		res.Degraded = append(res.Degraded, "TMPDIR is a private directory without a size limit (no tmpfs without a mount namespace)")
	}

	// The helper can build its mount namespace while the ruleset, the
	// filter and the persistence plan are finished here.
	setup.Cgroups = len(cgFDs)
	if err := wire.Send(h.sock, wire.Message{Kind: wire.Setup, Setup: setup}, append(append([]int(nil), cgFDs...), trees...)...); err != nil {
		return abort(err)
	}
	// The helper holds its own copies now.
	closeAll(cgFDs)
	closeAll(trees)
	cgFDs, trees = nil, nil

	p := <-prepc
	mark("prepared")
	if p.err != nil {
		if p.rs != nil {
			p.rs.Close()
		}
		h.kill()
		return res, p.err
	}
	defer p.rs.Close()
	confine := &wire.ConfineMsg{Seccomp: p.bpf}
	if p.plan != nil && wantNS && !txn {
		confine.Pins, confine.ReadOnly = p.plan.pins, p.plan.readOnly
	}
	if err := wire.Send(h.sock, wire.Message{Kind: wire.Confine, Confine: confine}, p.rs.FD()); err != nil {
		h.kill()
		return res, err
	}
	p.rs.Close()
	mark("setup sent")

	code, sig, timedOut, err := h.wait(ctx, spec, log)
	mark("command ended")
	if h.layer != nil {
		res.Layer = &Layer{Root: h.layer, Started: time.Unix(started.Unix()),
			HostUID: os.Getuid(), HostGID: os.Getgid(), UID: os.Getuid(), GID: os.Getgid()}
		if root {
			res.Layer.HostUID, res.Layer.HostGID = spec.HostUID, spec.HostGID
			res.Layer.UID, res.Layer.GID = ownerOf(spec.Workspace)
		}
		h.layer = nil
	} else if txn && err == nil {
		return res, errors.New("sandbox: the helper did not hand over the workspace layer")
	}
	if !h.started.IsZero() {
		res.Setup = h.started.Sub(t0)
	}
	if err != nil {
		return res, err
	}
	res.ExitCode, res.Signal, res.TimedOut = code, sig, timedOut
	if det != nil {
		res.Denials, res.Detection = det.Collect(h.cmd.Process.Pid, time.Second)
	}
	if h.obs != nil && spec.NoDetect {
		h.obs.Finish() // nothing was observed
	} else if h.obs != nil {
		writable := append([]string{spec.Workspace}, spec.Writable...)
		writable = append(writable, spec.Caches...)
		if wantNS {
			writable = append(writable, "/tmp", "/var/tmp", "/dev/shm", "/dev/pts", "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
		} else {
			writable = append(writable, setup.TmpDir, "/dev/null", "/dev/zero", "/dev/full")
		}
		var readOnly, pinned []string
		if p.plan != nil && wantNS && !txn {
			for _, r := range p.plan.readOnly {
				readOnly = append(readOnly, filepath.Join(spec.Workspace, r))
			}
			for _, r := range p.plan.pins {
				pinned = append(pinned, filepath.Join(spec.Workspace, r))
			}
		}
		var granted []detect.Grant
		for _, e := range spec.Exceptions {
			granted = append(granted, detect.Grant{Operation: e.Operation, Path: e.Path})
		}
		judge := detect.Policy{Writable: writable, ReadOnly: readOnly, Pinned: pinned, Granted: granted,
			ReadsObserved: det == nil, ReadRoots: spec.Read, ReadDeny: spec.Deny, NetNS: wantNS}
		res.Denials = detect.Merge(res.Denials, judge.Refused(h.obs.Finish()))
		if res.Detection.Detector == "none" {
			res.Detection = Detection{Detector: "seccomp", Why: "no kernel audit (" + res.Detection.Why + "): every open is observed and denied reads are judged from sandboxd's copy of the policy, which matches Landlock's carve-out but may differ where file permissions deny first"}
		} else {
			res.Detection.Detector += "+seccomp"
		}
	}
	// Name each object by what is there now (inode and birth time): the
	// identity a grant binds to, checked again before a retry.
	for i, d := range res.Denials {
		if d.Surface != "filesystem" {
			continue
		}
		if ino, born, _, ok := Identity(d.Path); ok {
			res.Denials[i].Ino, res.Denials[i].Born = ino, born
		} else {
			res.Denials[i].Ino, res.Denials[i].Born = 0, 0
		}
	}
	mark("denials collected")
	if p.plan != nil && !txn {
		// Without a layer, persistence paths made during the run are
		// swept out now; with one, the commit checks them.
		done, err := p.plan.sweep(filepath.Join(spec.StateDir, "quarantine", runID))
		res.Persistence = done
		if err != nil {
			return res, fmt.Errorf("sandbox: persistence sweep: %w", err)
		}
		if err := persist.SaveScan(persist.ScanFile(spec.StateDir, spec.Workspace), p.plan.scan); err != nil {
			log.Warn("could not remember the workspace scan", "err", err)
		}
		mark("persistence swept")
	}
	return res, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// prepared is the work done beside the helper's start.
type prepared struct {
	rs   *landlock.Ruleset
	bpf  []byte
	plan *persistPlan
	err  error
}

// startPrepare builds the ruleset, loads the filter and plans the
// persistence protection, concurrently.
// The filter observes write-intent calls unless detection is off, and
// reads too when there is no audit detector (observeReads).
func startPrepare(sup landlock.Support, spec *Spec, opened []openedException, ns, observeReads bool, log *slog.Logger) <-chan prepared {
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
			p.plan, planErr = planPersistence(spec, persist.LoadScan(persist.ScanFile(spec.StateDir, spec.Workspace)))
		}()
		go func() {
			defer wg.Done()
			p.bpf, bpfErr = cachedFilter(spec.StateDir, seccomp.Options{Observe: !spec.NoDetect, ObserveReads: observeReads && !spec.NoDetect})
		}()
		p.rs, p.err = buildRuleset(sup, spec, opened, !ns)
		wg.Wait()
		p.err = errors.Join(p.err, planErr, bpfErr)
		if p.rs != nil {
			log.Debug("prepared", "landlock_rules", p.rs.Rules(), "took_us", time.Since(t0).Microseconds())
		}
		c <- p
	}()
	return c
}

// helper is a started helper process.
type helper struct {
	cmd        *exec.Cmd
	sock       int
	relays     sync.WaitGroup
	homeMapped bool
	started    time.Time // when the helper reported the command started
	exited     chan error
	// obs observes the command's write and connect calls; set by the
	// message reader when the helper hands over the descriptor.
	obs *detect.Observer
	// layer is the workspace's copy-on-write layer, handed over by the
	// helper once it is mounted.
	layer *os.File
	// shared are the writable roots the sandbox sees at their host paths.
	shared []string
}

func startHelper(spec Spec, ns, root bool) (*helper, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: socketpair: %w", err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "sandbox-control")
	h := &helper{sock: pair[0], exited: make(chan error, 1)}
	h.shared = append(append([]string{spec.Workspace}, spec.Writable...), spec.Caches...)
	cmd := &exec.Cmd{
		Path:       "/proc/self/exe",
		Args:       []string{"sandboxd", wire.HelperArg},
		Env:        []string{},
		Dir:        "/",
		ExtraFiles: []*os.File{theirs},
	}
	attr := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if ns {
		uid, gid := os.Getuid(), os.Getgid()
		inUID, inGID, hostUID, hostGID := uid, gid, uid, gid
		if root {
			hostUID, hostGID = spec.HostUID, spec.HostGID
			inUID, inGID = ownerOf(spec.Workspace)
			if hu, _ := ownerOf(spec.Home); spec.Home != "" && hu == inUID {
				h.homeMapped = true
			}
		}
		attr.Cloneflags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
			unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: inUID, HostID: hostUID, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: inGID, HostID: hostGID, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		attr.Credential = &syscall.Credential{Uid: uint32(inUID), Gid: uint32(inGID), NoSetGroups: true}
		// A non-zero uid inside keeps its namespace capabilities across
		// exec only as ambient capabilities.
		// CAP_DAC_OVERRIDE: overlayfs works in its work directory with
		// the mounter's credentials. All of these are the namespace's,
		// over the caller's own files only, and gone before the command.
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP, unix.CAP_DAC_OVERRIDE}
	}
	cmd.SysProcAttr = attr

	cmd.Stdin = spec.Stdin
	outs := []io.Writer{spec.Stdout, spec.Stderr}
	for i, w := range outs {
		f, direct := w.(*os.File)
		if direct && isTerminal(f) {
			if i == 0 {
				cmd.Stdout = f
			} else {
				cmd.Stderr = f
			}
			continue
		}
		// A fresh pipe owned by the command's host uid, so that reopening
		// /dev/stdout inside works, relayed to the real destination.
		r, pw, err := os.Pipe()
		if err != nil {
			unix.Close(pair[0])
			theirs.Close()
			return nil, fmt.Errorf("sandbox: pipe: %w", err)
		}
		if root && ns {
			unix.Fchown(int(pw.Fd()), spec.HostUID, spec.HostGID)
		}
		if i == 0 {
			cmd.Stdout = pw
		} else {
			cmd.Stderr = pw
		}
		dst := w
		if dst == nil {
			dst = io.Discard
		}
		h.relays.Add(1)
		go func() {
			defer h.relays.Done()
			io.Copy(dst, r)
			r.Close()
		}()
		defer pw.Close()
	}
	h.cmd = cmd

	// Pdeathsig fires when the thread that forked the helper exits, so
	// that thread stays locked until the helper is gone.
	startErr := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The helper is born with no_new_privs on every thread: it is
		// inherited from this (never unlocked) thread across clone and
		// exec, which saves the helper a call on all of its threads.
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			startErr <- fmt.Errorf("no_new_privs: %w", err)
			return
		}
		if err := cmd.Start(); err != nil {
			startErr <- err
			return
		}
		startErr <- nil
		h.exited <- cmd.Wait()
	}()
	err = <-startErr
	theirs.Close()
	if err != nil {
		unix.Close(pair[0])
		return nil, fmt.Errorf("sandbox: start helper: %w", err)
	}
	return h, nil
}

func isNSRefusal(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) ||
		errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EUSERS)
}

func (h *helper) kill() {
	h.cmd.Process.Signal(syscall.SIGKILL)
}

func (h *helper) cleanup() {
	h.kill()
	unix.Close(h.sock)
	if h.layer != nil {
		h.layer.Close()
	}
}

// wait follows the helper until it exits, forwarding signals and enforcing
// the timeout, and returns the command's status.
func (h *helper) wait(ctx context.Context, spec Spec, log *slog.Logger) (code, sig int, timedOut bool, err error) {
	timeout, grace := spec.Timeout, spec.KillGrace
	msgs := make(chan wire.Message, 4)
	go func() {
		defer close(msgs)
		rcv := wire.NewReceiver(h.sock)
		for {
			m, fds, err := rcv.Recv()
			if err == nil && m.Kind == wire.Listener && len(fds) == 1 && h.obs == nil {
				// Answer notifications at once: the helper and the
				// command stop in every observed call until we do.
				h.obs = detect.StartObserver(fds[0], h.cmd.Process.Pid, h.shared, log)
				fds = fds[1:]
			}
			if err == nil && m.Kind == wire.Layer && len(fds) == 1 && h.layer == nil {
				h.layer = os.NewFile(uintptr(fds[0]), "layer")
				fds = fds[1:]
			}
			for _, f := range fds {
				unix.Close(f)
			}
			if err != nil {
				return
			}
			msgs <- m
		}
	}()
	sigs := spec.Signals // nil: none are forwarded

	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	var killTimer <-chan time.Time
	var last wire.Message
	haveExit := false
	done := ctx.Done()
	terminate := func() {
		wire.Send(h.sock, wire.Message{Kind: wire.Terminate})
		kt := time.NewTimer(grace)
		killTimer = kt.C
	}
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				msgs = nil
				continue
			}
			switch m.Kind {
			case wire.Started:
				h.started = time.Now()
				if m.Info != nil {
					for _, p := range m.Info.Phases {
						log.Debug("helper", "phase", p.Name, "at_us", p.US)
					}
				}
			case wire.Exit, wire.Error:
				last, haveExit = m, true
			}
		case s := <-sigs:
			h.cmd.Process.Signal(s)
		case <-timer:
			timedOut = true
			timer = nil
			log.Debug("timeout; terminating")
			terminate()
		case <-done:
			done = nil
			terminate()
		case <-killTimer:
			killTimer = nil
			wire.Send(h.sock, wire.Message{Kind: wire.Kill})
			// In a pid namespace killing the helper kills everything.
			time.AfterFunc(200*time.Millisecond, h.kill)
		case werr := <-h.exited:
			// Drain what the helper said before it went (the reader ends
			// at EOF now that the helper's end is closed).
			for m := range drain(msgs) {
				if m.Kind == wire.Exit || m.Kind == wire.Error {
					last, haveExit = m, true
				}
			}
			h.relays.Wait()
			if timedOut {
				return 124, 0, true, nil
			}
			if haveExit && last.Kind == wire.Exit {
				return last.Code, last.Sig, false, nil
			}
			if haveExit && last.Kind == wire.Error {
				if last.Code == 126 || last.Code == 127 {
					// "bash: NAME: command not found": NAME is the command's.
					if spec.Stderr != nil {
						fmt.Fprintln(spec.Stderr, termfilter.Escape(last.Error))
					}
					return last.Code, 0, false, nil
				}
				return 0, 0, false, errors.New(last.Error)
			}
			return 0, 0, false, fmt.Errorf("sandbox: helper ended without a status: %v", werr)
		}
	}
}

// drain returns c, or a closed channel when c is nil.
func drain(c chan wire.Message) <-chan wire.Message {
	if c == nil {
		c = make(chan wire.Message)
		close(c)
	}
	return c
}

func idmappedTree(path string, userns int, readOnly bool) (int, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return -1, fmt.Errorf("sandbox: clone %s: %w", path, err)
	}
	attr := unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(userns),
	}
	if readOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &attr); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("sandbox: id-map %s: %w", path, err)
	}
	return fd, nil
}

// buildRuleset creates the Landlock ruleset with the carve-out and the
// writable roots; the helper adds its own mounts.
func buildRuleset(sup landlock.Support, spec *Spec, opened []openedException, restrictNet bool) (*landlock.Ruleset, error) {
	rs, err := landlock.New(sup, landlock.Options{RestrictNet: restrictNet})
	if err != nil {
		return nil, err
	}
	var carved landlock.Access
	if spec.ListCarved {
		carved = landlock.AccessReadDir
	}
	if err := rs.Carve(spec.Read, spec.Deny, landlock.ReadAccess, carved); err != nil {
		rs.Close()
		return nil, err
	}
	writable := append([]string{spec.Workspace}, spec.Writable...)
	writable = append(writable, spec.Caches...)
	for _, w := range writable {
		if d, bad := landlock.Covers(w, spec.Deny); bad {
			rs.Close()
			return nil, fmt.Errorf("sandbox: writable root %s contains the denied path %s; Landlock cannot deny reads inside a writable root", w, d)
		}
		if err := rs.AddPath(w, sup.FS); err != nil {
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

// cachedFilter returns the compiled seccomp program, compiling it once per
// filter version into the state directory.
func cachedFilter(stateDir string, opts seccomp.Options) ([]byte, error) {
	rules := seccomp.Build(opts)
	path := filepath.Join(stateDir, "seccomp", rules.Key()+".bpf")
	if b, err := os.ReadFile(path); err == nil && len(b) > 0 && len(b)%8 == 0 {
		return b, nil
	}
	prog, err := seccomp.Compile(rules)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err == nil {
		writeAtomic(path, prog)
	}
	return prog, nil
}

func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// skeletonDirs returns, for mount targets below a directory the command's
// host uid cannot search (a root caller's workspace under /root, say), the
// highest such directory. The helper, which runs as that uid, could not
// reach the target; it mounts an empty tmpfs there instead and creates
// just the path to each target. Nothing is hidden that the command could
// have read: it had no search permission. A directory inside another
// (id-mapped, so searchable) target does not count.
func skeletonDirs(targets []string, uid, gid int) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range targets {
		for _, a := range ancestors(t) {
			if underAny(a, targets, t) {
				break
			}
			var st unix.Stat_t
			if unix.Stat(a, &st) != nil {
				break
			}
			if searchable(&st, uid, gid) {
				continue
			}
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
			break
		}
	}
	return out
}

// ancestors lists the proper ancestors of p below "/", outermost first.
func ancestors(p string) []string {
	var out []string
	for d := filepath.Dir(p); d != "/" && d != "."; d = filepath.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}

// underAny reports whether dir is at or below a target other than self.
func underAny(dir string, targets []string, self string) bool {
	for _, t := range targets {
		if t != self && (dir == t || strings.HasPrefix(dir, t+"/")) {
			return true
		}
	}
	return false
}

func searchable(st *unix.Stat_t, uid, gid int) bool {
	switch {
	case int(st.Uid) == uid:
		return st.Mode&0o100 != 0
	case int(st.Gid) == gid:
		return st.Mode&0o010 != 0
	default:
		return st.Mode&0o001 != 0
	}
}

// maskedDirs are host runtime directories replaced by an empty tmpfs.
func maskedDirs(runtimeDir string) []string {
	dirs := []string{"/run", "/var/run"}
	if x := runtimeDir; filepath.IsAbs(x) {
		dirs = append(dirs, filepath.Clean(x))
	}
	return dirs
}

func ownerOf(p string) (int, int) {
	var st unix.Stat_t
	if unix.Stat(p, &st) != nil {
		return 0, 0
	}
	return int(st.Uid), int(st.Gid)
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func setEnv(env []string, key, val string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, key+"="+val)
}

func newRunID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
