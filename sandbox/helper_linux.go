package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/landlock"
	"github.com/sandboxd/sandboxd/seccomp"
	"golang.org/x/sys/unix"
)

// IsHelper reports whether args (os.Args) ask for the sandbox helper.
// cmd/sandboxd checks this before anything else, as runc does with "init".
func IsHelper(args []string) bool { return len(args) > 1 && args[1] == helperArg }

// HelperMain is the re-exec'd helper: pid 1 of the sandbox. It receives
// its setup from the supervisor, builds the mount namespace, confines
// itself (capabilities, no_new_privs, Landlock, seccomp), starts the
// command in its own session, reaps every orphan, forwards signals, and
// exits with the command's status once it has killed everything else.
// It never returns.
func HelperMain() {
	start := time.Now()
	// The command inherits this thread's credentials; it is never unlocked.
	runtime.LockOSThread()
	var phases []phase
	mark := func(name string) { phases = append(phases, phase{name, time.Since(start).Microseconds()}) }
	sock := helperSocketFD
	unix.CloseOnExec(sock)
	// Nothing but 0-2 and the control socket may reach the command.
	unix.CloseRange(helperSocketFD+1, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	fail := func(code int, format string, args ...any) {
		send(sock, message{Kind: msgError, Code: code, Error: fmt.Sprintf(format, args...)})
		os.Exit(code)
	}
	rcv := newReceiver(sock)
	m, fds, err := rcv.recv()
	if err != nil || m.Kind != msgSetup || m.Setup == nil {
		fail(125, "helper: bad setup message: %v", err)
	}
	s := m.Setup
	mark("setup received")
	// Signals are forwarded from now on; the kernel drops signals to a pid
	// namespace's init that it has no handler for.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGCHLD, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT,
		unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH, unix.SIGCONT, unix.SIGALRM, unix.SIGPIPE)

	if len(fds) < s.Cgroups {
		fail(125, "helper: setup message lacks descriptors")
	}
	cgroupFDs, trees := fds[:s.Cgroups], fds[s.Cgroups:]
	if s.Namespaces {
		layerFD, err := setupMounts(s, trees)
		if err != nil {
			fail(125, "sandbox: %v", err)
		}
		if layerFD >= 0 {
			if err := send(sock, message{Kind: msgLayer}, layerFD); err != nil {
				fail(125, "sandbox: %v", err)
			}
			unix.Close(layerFD)
		}
		if err := bindExceptionsInHelper(s.ExceptionBinds); err != nil {
			fail(125, "sandbox: %v", err)
		}
		mark("mounts")
		if err := loopbackUp(); err != nil {
			fail(125, "sandbox: %v", err)
		}
		mark("loopback")
	} else {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			fail(125, "sandbox: subreaper: %v", err)
		}
	}
	// The rest of the setup, built by the supervisor while this helper
	// started and mounted.
	c, cfds, err := rcv.recv()
	if err != nil || c.Kind != msgConfine || c.Confine == nil || len(cfds) != 1 {
		fail(125, "helper: bad confine message: %v", err)
	}
	mark("confine received")
	if s.Namespaces {
		if err := protectWorkspace(s.Workspace, c.Confine); err != nil {
			fail(125, "sandbox: %v", err)
		}
	}
	argv0, code, err := lookPath(s.Argv[0], s.Env, s.Dir)
	if err != nil {
		fail(code, "sandboxd: %s: %v", s.Argv[0], err)
	}
	if err := setRlimits(s); err != nil {
		fail(125, "sandbox: %v", err)
	}
	sup := landlock.Support{ABI: s.LandlockABI, FS: landlock.Access(s.LandlockFS)}
	rs := landlock.Adopt(cfds[0], sup)
	if err := addHelperRules(rs, s); err != nil {
		fail(125, "sandbox: %v", err)
	}
	mark("landlock rules")
	// The command must not read the helper's memory or environment.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fail(125, "sandbox: dumpable: %v", err)
	}
	if err := requireNoNewPrivs(); err != nil {
		fail(125, "%v", err)
	}
	if err := dropCapabilities(s.Namespaces || os.Geteuid() == 0); err != nil {
		fail(125, "%v", err)
	}
	if err := landlock.Restrict(rs.FD(), s.LandlockFlags); err != nil {
		fail(125, "sandbox: %v", err)
	}
	rs.Close()
	if s.LandlockFlags != 0 {
		// Announce the domain (with this pid) to the supervisor's audit
		// reader through one deliberate denial.
		probeDomain()
	}
	// The filter observes write and connect calls; the supervisor answers
	// them on the descriptor it gets here, before anything can block.
	lfd, err := seccomp.InstallWithListener(c.Confine.Seccomp)
	if err != nil {
		fail(125, "sandbox: %v", err)
	}
	if err := send(sock, message{Kind: msgListener}, lfd); err != nil {
		fail(125, "sandbox: %v", err)
	}
	unix.Close(lfd)
	mark("confined")
	// Join the run's cgroups with this thread only; the command is forked
	// from it (see Run).
	for _, fd := range cgroupFDs {
		if _, err := unix.Write(fd, []byte("0")); err != nil {
			fail(125, "sandbox: join cgroup: %v", err)
		}
		unix.Close(fd)
	}
	waitCoarseClock(s.NotBefore)
	pid, err := syscall.ForkExec(argv0, s.Argv, &syscall.ProcAttr{
		Dir:   s.Dir,
		Env:   s.Env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		code := 126
		if errors.Is(err, unix.ENOENT) {
			code = 127
		}
		fail(code, "sandboxd: %s: %v", s.Argv[0], err)
	}
	mark("started")
	send(sock, message{Kind: msgStarted, Info: &startedMsg{SetupNanos: int64(time.Since(start)), Phases: phases}})

	ctl := make(chan msgKind, 4)
	go func() {
		for {
			m, _, err := rcv.recv()
			if err != nil {
				// The supervisor is gone: nobody is left to report to.
				ctl <- msgKill
				return
			}
			ctl <- m.Kind
		}
	}()
	status := reapUntil(pid, s.Namespaces, sigs, ctl)
	killAll(s.Namespaces, unix.SIGKILL)
	if s.LandlockFlags != 0 {
		// Every process of the command is gone: mark the end of its
		// audit records.
		reapAll(s.Namespaces)
		probeDomain()
	}
	var exit message
	switch {
	case status.Exited():
		exit = message{Kind: msgExit, Code: status.ExitStatus()}
	case status.Signaled():
		exit = message{Kind: msgExit, Code: 128 + int(status.Signal()), Sig: int(status.Signal())}
	default:
		exit = message{Kind: msgExit, Code: 125}
	}
	send(sock, exit)
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

// reapUntil waits for the command, reaping every other process on the way
// and forwarding signals to the command's process group.
func reapUntil(pid int, ns bool, sigs <-chan os.Signal, ctl <-chan msgKind) unix.WaitStatus {
	for {
		for {
			var ws unix.WaitStatus
			got, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err != nil || got <= 0 {
				break
			}
			if got == pid && (ws.Exited() || ws.Signaled()) {
				return ws
			}
		}
		select {
		case sig := <-sigs:
			if sig == unix.SIGCHLD {
				continue
			}
			unix.Kill(-pid, sig.(unix.Signal))
		case k := <-ctl:
			switch k {
			case msgTerminate:
				killAll(ns, unix.SIGTERM)
			case msgKill:
				killAll(ns, unix.SIGKILL)
			}
		}
	}
}

// reapAll waits until the helper has no children left, so none of the
// command's processes can log a denial after the end marker.
func reapAll(ns bool) {
	for {
		_, err := unix.Wait4(-1, nil, 0, nil)
		if err != nil { // ECHILD: none left
			return
		}
	}
}

// killAll signals every process of the sandbox but the helper. In a pid
// namespace kill(-1) reaches all of them; without one the helper is a
// child subreaper, so every orphan is its child and is found in /proc.
func killAll(ns bool, sig unix.Signal) {
	if ns {
		unix.Kill(-1, sig)
		return
	}
	for round := 0; round < 1000; round++ {
		kids := children()
		if len(kids) == 0 {
			return
		}
		for _, k := range kids {
			unix.Kill(k, sig)
		}
		if sig != unix.SIGKILL {
			return
		}
		for {
			if got, err := unix.Wait4(-1, nil, unix.WNOHANG, nil); err != nil || got <= 0 {
				break
			}
		}
		time.Sleep(time.Millisecond)
	}
}

func children() []int {
	var out []int
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "children"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			var n int
			if _, err := fmt.Sscan(f, &n); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// lookPath resolves the command as a shell would, in the sandbox's view,
// returning the POSIX exit status for failures (127 not found, 126 not
// executable).
func lookPath(name string, env []string, dir string) (string, int, error) {
	check := func(p string) (int, error) {
		st, err := os.Stat(p)
		if err != nil {
			return 127, errors.New("command not found")
		}
		if st.IsDir() {
			return 126, errors.New("is a directory")
		}
		if err := unix.Access(p, unix.X_OK); err != nil {
			return 126, errors.New("permission denied")
		}
		return 0, nil
	}
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		code, err := check(p)
		return p, code, err
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	notExec := false
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		code, err := check(p)
		if err == nil {
			return p, 0, nil
		}
		if code == 126 {
			notExec = true
		}
	}
	if notExec {
		return "", 126, errors.New("permission denied")
	}
	return "", 127, errors.New("command not found")
}

func setRlimits(s *setupMsg) error {
	set := func(res int, v uint64, what string) error {
		lim := unix.Rlimit{Cur: v, Max: v}
		var old unix.Rlimit
		if err := unix.Getrlimit(res, &old); err == nil && old.Max < v {
			lim = unix.Rlimit{Cur: old.Max, Max: old.Max}
		}
		if err := unix.Setrlimit(res, &lim); err != nil {
			return fmt.Errorf("rlimit %s: %w", what, err)
		}
		return nil
	}
	if err := set(unix.RLIMIT_CORE, 0, "core"); err != nil {
		return err
	}
	if s.Limits.FileSize > 0 {
		if err := set(unix.RLIMIT_FSIZE, uint64(s.Limits.FileSize), "fsize"); err != nil {
			return err
		}
	}
	// A pid namespace's processes all count against one uid in a fresh
	// user namespace, so RLIMIT_NPROC is a second bound even with a pids
	// cgroup; without one it is the only bound (uid 0 in the initial user
	// namespace ignores it, but the command never runs as that).
	if s.Limits.Pids > 0 {
		if err := set(unix.RLIMIT_NPROC, uint64(s.Limits.Pids), "nproc"); err != nil {
			return err
		}
	}
	if s.LimitData && s.Limits.Memory > 0 {
		if err := set(unix.RLIMIT_DATA, uint64(s.Limits.Memory), "data"); err != nil {
			return err
		}
	}
	return nil
}

// addHelperRules grants what only the helper can name: the mounts it
// created and the standard streams it passes on.
func addHelperRules(rs *landlock.Ruleset, s *setupMsg) error {
	all := landlock.Access(s.LandlockFS)
	dev := landlock.ReadAccess | landlock.AccessWriteFile | landlock.AccessIoctlDev
	if s.Namespaces {
		roots := []string{"/tmp", "/dev/shm"}
		if s.Layer > 0 {
			// The overlay's inodes are not the workspace's.
			roots = append(roots, s.Workspace)
		}
		for _, p := range roots {
			if err := rs.AddPath(p, all); err != nil {
				return err
			}
		}
		if err := rs.AddPath("/dev/pts", all); err != nil {
			return err
		}
		for _, name := range devNodes {
			if err := rs.AddPath("/dev/"+name, dev); err != nil {
				return err
			}
		}
		// /proc and /dev read (their host mountpoints are carved separately).
		for _, p := range []string{"/proc", "/dev"} {
			if err := rs.AddPath(p, landlock.ReadAccess); err != nil {
				return err
			}
		}
	} else if s.TmpDir != "" {
		if err := rs.AddPath(s.TmpDir, all); err != nil {
			return err
		}
	}
	// Reopening a standard stream through /dev/stdout or /proc/self/fd
	// keeps the access it was opened with, no more.
	for fd := 0; fd <= 2; fd++ {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil {
			continue
		}
		t := st.Mode & unix.S_IFMT
		if t != unix.S_IFREG && t != unix.S_IFCHR {
			continue
		}
		acc := landlock.Access(0)
		switch fl & unix.O_ACCMODE {
		case unix.O_RDONLY:
			acc = landlock.AccessReadFile
		case unix.O_WRONLY:
			acc = landlock.AccessWriteFile | landlock.AccessTruncate
		case unix.O_RDWR:
			acc = landlock.AccessReadFile | landlock.AccessWriteFile | landlock.AccessTruncate
		}
		if t == unix.S_IFCHR {
			acc |= landlock.AccessIoctlDev
		}
		if err := rs.AddFD(fd, acc); err != nil {
			return err
		}
	}
	return nil
}
