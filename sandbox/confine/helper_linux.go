package confine

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/landlock"
	"github.com/sandboxd/sandboxd/sandbox/detect"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"github.com/sandboxd/sandboxd/seccomp"
	"golang.org/x/sys/unix"
)

// IsHelper reports whether args (os.Args) ask for the sandbox helper.
// cmd/sandboxd checks this before anything else, as runc does with "init".
func IsHelper(args []string) bool { return len(args) > 1 && args[1] == wire.HelperArg }

// Main is the re-exec'd helper: pid 1 of the sandbox. It receives its
// setup from the supervisor, builds the mount namespace, confines itself
// (capabilities, no_new_privs, Landlock, seccomp), starts the command in
// its own session, reaps every orphan, forwards signals, and exits with
// the command's status once it has killed everything else. It never
// returns.
func Main() {
	h := &helper{start: time.Now(), sock: wire.SocketFD, oomScore: -1}
	h.mark("main") // what the runtime and package initialisation took is before it
	// The command inherits this thread's credentials; it is never unlocked.
	runtime.LockOSThread()
	unix.CloseOnExec(h.sock)
	// Nothing but 0-2 and the control socket may reach the helper; the
	// command gets 0-2 and its pipes (startCommand).
	unix.CloseRange(wire.SocketFD+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	h.rcv = wire.NewReceiver(h.sock)
	sigs := make(chan os.Signal, 16)
	h.prepare(os.Args[2:], sigs)
	s, cgroupFDs, trees, pipes := h.receiveSetup()
	h.takeSignals(sigs)
	h.mount(s, trees)
	c, rulesetFD := h.receiveConfine()
	if s.Namespaces {
		h.check(125, protectWorkspace(s.Workspace, c))
	}
	h.enterDir(s.Dir)
	argv0, code, err := lookPath(s.Argv[0], s.Env, s.Dir)
	if err != nil {
		h.fail(code, "sandboxd: %s: %v", s.Argv[0], err)
	}
	h.oomScore = openOOMScore() // before Landlock, which denies writing /proc
	h.restrict(s, rulesetFD)
	// After Landlock: the threads it reserves (reserveThreads) are
	// cloned from restricted ones and inherit the domain, dropped
	// capabilities and no_new_privs, instead of each taking the psx round
	// that restricts every thread of the helper.
	h.check(125, setRlimits(s))
	filter := c.Seccomp
	if s.Capture && !h.captured {
		// No netfilter rules confine UDP: the filter without it.
		if len(c.SeccompNoUDP) == 0 {
			h.fail(125, "sandbox: no filter for a run without capture")
		}
		filter = c.SeccompNoUDP
	}
	h.observe(filter)
	// Join the run's cgroups with this thread only; the command is forked
	// from it (see sandbox.Run).
	leave := -1
	if s.LeaveMemory && len(cgroupFDs) > 0 {
		leave, cgroupFDs = cgroupFDs[len(cgroupFDs)-1], cgroupFDs[:len(cgroupFDs)-1]
	}
	for _, fd := range cgroupFDs {
		if _, err := unix.Write(fd, []byte("0")); err != nil {
			h.fail(125, "sandbox: join cgroup: %v", err)
		}
		unix.Close(fd)
	}
	waitCoarseClock(s.NotBefore)
	pid := h.startCommand(s, argv0, pipes)
	if leave >= 0 {
		// This thread leaves the memory group the command stays in, so a
		// layer filled to the limit leaves it room to end the run. By its
		// own hand ("0"): moving another thread would take the kernel's
		// global threadgroup lock and wait a grace period. On failure
		// the helper stays in the group, as before the protection.
		unix.Write(leave, []byte("0"))
		unix.Close(leave)
	}
	var xfsz bool
	status := reapUntil(pid, s.Namespaces, sigs, h.control(), &xfsz)
	h.exit(s, status, xfsz)
}

// helper is the helper's own state while it sets up.
type helper struct {
	start time.Time
	sock  int
	// oomScore is /proc/self/oom_score_adj, open for writing (-1: not).
	oomScore int
	rcv      *wire.Receiver
	phases   []wire.Phase
	// captured: the capture of direct connects is installed and handed
	// over (sendCapture).
	captured bool
	// What the helper prepared before its setup (prepare): net, whether
	// it brought loopback up (loErr: why that failed); capture, the
	// capture (nil: none asked).
	net     bool
	loErr   error
	capture *capture
	// execLocked: lockExec ran on the main thread while the helper
	// prepared (execErr: why it failed, told once the setup has come).
	execLocked bool
	execErr    error
}

func (h *helper) mark(name string) {
	now := time.Now()
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	cpu := ru.Utime.Nano()/1000 + ru.Stime.Nano()/1000
	h.phases = append(h.phases, wire.Phase{Name: name, US: now.Sub(h.start).Microseconds(), Unix: now.UnixMicro(), CPU: cpu})
}

// fail tells the supervisor why setup failed and exits with code.
func (h *helper) fail(code int, format string, args ...any) {
	wire.Send(h.sock, wire.Message{Kind: wire.Error, Code: code, Error: fmt.Sprintf(format, args...)})
	os.Exit(code)
}

// check fails with code when err is set.
func (h *helper) check(code int, err error) {
	if err != nil {
		h.fail(code, "sandbox: %v", err)
	}
}

// receiveSetup reads the setup message, makes the standard streams it
// carries the helper's 0-2 and splits the rest of its descriptors into
// the cgroup files, the trees to attach and the command's pipes.
func (h *helper) receiveSetup() (s *wire.SetupMsg, cgroupFDs, trees, pipes []int) {
	m, fds, err := h.rcv.Recv()
	h.checkStamp(m, fds)
	if err != nil || m.Kind != wire.Setup || m.Setup == nil {
		h.fail(125, "helper: bad setup message: %v", err)
	}
	s = m.Setup
	h.mark("setup received")
	stdio := 0
	if s.Stdio {
		stdio = 3
	}
	if s.Cgroups < 0 || s.Pipes < 0 || len(fds) < s.Cgroups+stdio+s.Pipes {
		h.fail(125, "helper: setup message lacks descriptors")
	}
	n := len(fds) - s.Pipes - stdio
	for i, fd := range fds[n : n+stdio] {
		// Received descriptors are 3 or above: 0-2 are open.
		if err := unix.Dup3(fd, i, 0); err != nil {
			h.fail(125, "helper: standard stream %d: %v", i, err)
		}
		unix.Close(fd)
	}
	return s, fds[:s.Cgroups], fds[s.Cgroups:n], fds[n+stdio:]
}

// checkStamp fails the run, having done nothing, when the setup comes
// from a sandboxd of another build than this helper (a separate helper
// binary left over from another install): the two must agree on every
// message and rule, and nothing checks that but the stamp. Only the
// stamp is read of such a setup. The helper then waits for the
// supervisor's next message (the confine message, or the socket's end)
// before it exits, so that the supervisor, whose sends would otherwise
// fail first, reads the reason.
func (h *helper) checkStamp(m wire.Message, fds []int) {
	if m.Setup == nil {
		// Nothing of a setup came (an error, a message cut short): the
		// caller fails the run as a bad setup, not as another build's.
		return
	}
	theirs := m.Setup.Stamp
	if theirs == wire.Stamp() {
		return
	}
	for _, fd := range fds {
		unix.Close(fd)
	}
	wire.Send(h.sock, wire.Message{Kind: wire.Error, Code: 125, Why: wire.Skew,
		Error: fmt.Sprintf("helper: build stamp %q, the supervisor's %q", wire.Stamp(), theirs)})
	if _, more, _ := h.rcv.Recv(); len(more) > 0 {
		for _, fd := range more {
			unix.Close(fd)
		}
	}
	os.Exit(125)
}

// prepare makes, before the setup comes, what depends on no caller's
// plan, as args (the helper's command line after HelperArg: the
// supervisor's build stamp, then what to prepare) ask: a ready helper
// does it while it waits, one started for a run while the supervisor
// plans. Loopback up (PrepareNet), then the capture (PrepareCapture). A
// failure is kept and told once the setup has come, where the run would
// have met it. For a supervisor of another build it prepares nothing:
// the setup's stamp fails the run (checkStamp).
func (h *helper) prepare(args []string, sigs chan os.Signal) {
	if len(args) == 0 || args[0] != wire.Stamp() {
		return
	}
	defer func() {
		if h.net {
			// In its own pid namespace, whose init it is, the helper
			// was sent nothing that counts before its setup (the kernel
			// drops what init has no handler for, and the supervisor
			// holds a run's signals until the command runs): the
			// handlers (1 ms, the runtime's signal thread) are set up
			// here, and what came before the setup is dropped then.
			notify(sigs)
		}
	}()
	for _, a := range args[1:] {
		switch a {
		case wire.PrepareNet:
			h.net = true
		case wire.PrepareCapture:
			h.capture = &capture{stub: -1, err: errors.New("capture: loopback is down")}
		}
	}
	if !h.net {
		h.capture = nil // a capture needs the namespace's own loopback
		return
	}
	// In namespaces the helper holds CAP_SETPCAP (dropCapabilities'
	// canDrop), and a run's setup must ask for namespaces
	// (checkPrepared).
	h.execErr, h.execLocked = lockExec(), true
	h.mark("exec locked")
	h.loErr = loopbackUp()
	h.mark("loopback")
	if h.capture != nil && h.loErr == nil {
		h.capture = prepareCapture()
		h.mark("capture")
	}
}

// takeSignals forwards signals from now on: the kernel drops signals to
// a pid namespace's init that it has no handler for. A helper that
// prepared its network namespace has had its handlers since (prepare):
// what came before the setup is dropped, as the kernel would have.
func (h *helper) takeSignals(sigs chan os.Signal) {
	if !h.net {
		notify(sigs)
		return
	}
	for len(sigs) > 0 {
		<-sigs
	}
}

func notify(sigs chan os.Signal) {
	signal.Notify(sigs, unix.SIGCHLD, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT,
		unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH, unix.SIGCONT, unix.SIGALRM, unix.SIGPIPE)
}

// checkPrepared fails the run when the setup disagrees with what the
// helper prepared: a helper made for another launch never runs it
// (ReadyHelpers keys on both), and a run never goes on with a capture it
// did not ask for or without one it did.
func (h *helper) checkPrepared(s *wire.SetupMsg) {
	if h.net != s.Namespaces || (h.capture != nil) != s.Capture {
		h.fail(125, "helper: the setup (namespaces %v, capture %v) is not what the helper prepared (%v, %v)",
			s.Namespaces, s.Capture, h.net, h.capture != nil)
	}
}

// mount builds the mount namespace and hands over loopback's sockets,
// or, without namespaces, makes the helper the subreaper of the
// command's orphans.
func (h *helper) mount(s *wire.SetupMsg, trees []int) {
	h.checkPrepared(s)
	if !s.Namespaces {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			h.fail(125, "sandbox: subreaper: %v", err)
		}
		return
	}
	layerFD, err := setupMounts(s, trees)
	h.check(125, err)
	h.check(125, mountCaches(s, h.sock))
	if layerFD >= 0 {
		h.check(125, wire.Send(h.sock, wire.Message{Kind: wire.Layer}, layerFD))
		unix.Close(layerFD)
	}
	h.check(125, bindExceptions(s.ExceptionBinds))
	h.check(125, showFiles(s.Shown))
	h.mark("mounts")
	h.check(125, h.loErr)
	if fd, err := detect.OpenDiag(); err == nil {
		h.check(125, wire.Send(h.sock, wire.Message{Kind: wire.Diag}, fd))
		unix.Close(fd)
	}
	if h.capture != nil {
		h.capture.moveOff(s.ProxyPort, s.SOCKS)
	}
	if s.ProxyPort != 0 {
		h.listenProxy(s.ProxyPort, s.SOCKS)
	}
	if h.capture != nil {
		h.sendCapture(h.capture)
	}
}

// receiveConfine reads the rest of the setup, built by the supervisor
// while this helper started and mounted, and the ruleset with it.
func (h *helper) receiveConfine() (*wire.ConfineMsg, int) {
	c, cfds, err := h.rcv.Recv()
	if err != nil || c.Kind != wire.Confine || c.Confine == nil || len(cfds) != 1 {
		h.fail(125, "helper: bad confine message: %v", err)
	}
	h.mark("confine received")
	return c.Confine, cfds[0]
}

// restrict completes the ruleset, makes the helper undumpable, drops
// every capability and restricts itself with Landlock.
func (h *helper) restrict(s *wire.SetupMsg, rulesetFD int) {
	sup := landlock.Support{ABI: s.LandlockABI, FS: landlock.Access(s.LandlockFS)}
	rs := landlock.Adopt(rulesetFD, sup)
	h.check(125, addHelperRules(rs, s))
	h.mark("landlock rules")
	if err := requireNoNewPrivs(); err != nil {
		h.fail(125, "%v", err)
	}
	if h.execErr != nil {
		h.fail(125, "%v", h.execErr)
	}
	if err := dropCapabilities(s.Namespaces || os.Geteuid() == 0, h.execLocked); err != nil {
		h.fail(125, "%v", err)
	}
	h.check(125, landlock.Restrict(rs.FD(), s.LandlockFlags))
	rs.Close()
	if s.LandlockFlags != 0 {
		// Announce the domain (with this pid) to the supervisor's audit
		// reader through one deliberate denial.
		probeDomain()
	}
	// The command must not read the helper's memory or environment. Not
	// before the probe: a helper that is not dumpable has /proc/self
	// owned by its namespace's root, and when that is not the helper's
	// own uid (a root supervisor running for another user) the probe's
	// open fails on the file's mode before Landlock sees it, so the
	// domain is never announced. No process of the command exists yet.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		h.fail(125, "sandbox: dumpable: %v", err)
	}
}

// observe installs the filter. It observes write and connect calls; the
// supervisor answers them on the descriptor it gets here, before
// anything can block.
func (h *helper) observe(filter []byte) {
	lfd, err := seccomp.InstallWithListener(filter)
	h.check(125, err)
	h.check(125, wire.Send(h.sock, wire.Message{Kind: wire.Listener}, lfd))
	unix.Close(lfd)
	h.mark("confined")
}

// enterDir makes dir the helper's working directory, which the command
// inherits, once every mount is in place. sandboxd checked dir (resolved,
// inside the workspace) before the run; it is opened here without
// following any symlink, so a directory swapped for a link since then is
// refused, never followed out of the workspace, and the command starts
// in the very directory that was opened.
func (h *helper) enterDir(dir string) {
	if dir == "" {
		return
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, dir, &how)
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		// Gone, as a chdir would have found it: the command cannot run.
		h.fail(127, "sandboxd: the working directory %s does not exist or is not a directory", dir)
	case err != nil:
		h.fail(125, "sandbox: the working directory %s is not the directory that was checked (%v)", dir, err)
	}
	err = unix.Fchdir(fd)
	unix.Close(fd)
	h.check(125, err)
}

// startCommand forks the command in a session of its own and tells the
// supervisor it runs.
func (h *helper) startCommand(s *wire.SetupMsg, argv0 string, pipes []int) int {
	// The command inherits the highest OOM score and the helper takes its
	// own back (no lower than it had, which needs no privilege): at the
	// memory limit the kernel's killer picks the command's processes,
	// never the helper, whose size says nothing of the layer's and the
	// tmpfs's pages the group is charged for.
	setOOMScore(h.oomScore, 1000)
	files := []uintptr{0, 1, 2}
	for _, fd := range pipes {
		files = append(files, uintptr(fd))
	}
	h.check(125, setDataLimit(s))
	pid, err := syscall.ForkExec(argv0, s.Argv, &syscall.ProcAttr{
		// The helper's own working directory (enterDir): a path could
		// have changed since.
		Env:   s.Env,
		Files: files,
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	for _, fd := range pipes {
		unix.Close(fd) // the command's now, or never
	}
	setOOMScore(h.oomScore, 0)
	if h.oomScore >= 0 {
		unix.Close(h.oomScore)
	}
	if err != nil {
		code := 126
		if errors.Is(err, unix.ENOENT) {
			code = 127
		}
		h.fail(code, "sandboxd: %s: cannot be executed (%v)", s.Argv[0], err)
	}
	h.mark("started")
	wire.Send(h.sock, wire.Message{Kind: wire.Started, Info: &wire.StartedInfo{SetupNanos: int64(time.Since(h.start)), Phases: h.phases}})
	return pid
}

// control relays the supervisor's requests (terminate, kill) while the
// command runs, and answers its requests for sockets; the helper exits,
// so the goroutine needs no end of its own.
func (h *helper) control() <-chan wire.Kind {
	ctl := make(chan wire.Kind, 4)
	go func() {
		for {
			m, _, err := h.rcv.Recv()
			if err != nil {
				// The supervisor is gone: nobody is left to report to.
				ctl <- wire.Kill
				return
			}
			if m.Kind == wire.Socket {
				h.answerSocket(m)
				continue
			}
			ctl <- m.Kind
		}
	}()
	return ctl
}

// exit kills what is left of the command, marks the end of its audit
// records, reports its status and exits with it.
func (h *helper) exit(s *wire.SetupMsg, status unix.WaitStatus, xfsz bool) {
	h.phases = h.phases[:0] // the Started message took the setup's
	h.mark("command reaped")
	// Every process of the command is gone once reaped: none can log a
	// denial after the end marker, and the supervisor, which sees the
	// run's group empty but for the helper, need not wait for the
	// kernel to tear the helper's namespaces down (see end). Without a
	// pid namespace a command that forks faster than it is killed may
	// outlast killAll: nothing then waits for it here (it would never
	// end), no end marker says its records are complete, and the
	// supervisor, which sees it in the group, waits for the helper's
	// exit and its cgroup kills the rest.
	gone := killAll(s.Namespaces, unix.SIGKILL)
	if gone {
		reapAll(s.Namespaces)
	}
	if s.LandlockFlags != 0 && gone {
		// Mark the end of the command's audit records (dumpable again,
		// so that the probe reaches Landlock: see restrict; nothing is
		// left to read the helper).
		unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
		probeDomain()
	}
	var exit wire.Message
	switch {
	case status.Exited():
		exit = wire.Message{Kind: wire.Exit, Code: status.ExitStatus()}
	case status.Signaled():
		exit = wire.Message{Kind: wire.Exit, Code: 128 + int(status.Signal()), Sig: int(status.Signal())}
	default:
		exit = wire.Message{Kind: wire.Exit, Code: 125}
	}
	exit.Limits = limitsSeen(s, status, xfsz)
	h.mark("exiting")
	exit.Info = &wire.StartedInfo{Phases: h.phases}
	h.end(exit)
}

// end says how the command ended and lets go of everything the
// supervisor waits on before it exits: its copies of the command's
// streams (the supervisor's relays then end with the command's last
// process, not with the helper) and, once the status is sent, its end of
// the socket, shut down rather than closed (the control goroutine's
// receive holds the descriptor; shutdown reaches the peer at once). The
// supervisor then goes on while the kernel tears the helper down.
func (h *helper) end(exit wire.Message) {
	for fd := range 3 {
		unix.Close(fd)
	}
	wire.Send(h.sock, exit)
	unix.Shutdown(h.sock, unix.SHUT_RDWR)
	os.Exit(exit.Code & 0xff)
}

// waitCoarseClock returns once CLOCK_REALTIME_COARSE, which stamps file
// changes, is past t (nanoseconds); normally it already is.
func waitCoarseClock(t int64) {
	for t > 0 {
		var now unix.Timespec
		if unix.ClockGettime(unix.CLOCK_REALTIME_COARSE, &now) != nil || now.Nano() > t {
			return
		}
		time.Sleep(time.Duration(t-now.Nano()) + 100*time.Microsecond)
	}
}
