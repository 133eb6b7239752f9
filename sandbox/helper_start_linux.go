package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox/detect"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// helper is a started helper process, seen from the supervisor.
//
// Its goroutines: the one that started it waits for it and closes exited
// (that thread stays locked, so the helper's parent-death signal is
// tied to it); one relay per standard stream that is not a terminal;
// while wait runs, the message reader; and the observer the reader
// starts. cleanup stops and waits for all of them.
type helper struct {
	cmd        *exec.Cmd
	sock       int
	relays     sync.WaitGroup
	homeMapped bool
	// groups is the caller's identity; the thread that starts the
	// helper takes its supplementary groups.
	groups  fsid.ID
	started time.Time // when the helper reported the command started
	// neverRan is set when the helper reported that the command could not
	// be run (126, 127): no process of it existed.
	neverRan bool
	// stdinSock is a stdin socket copied to the helper (see stdin).
	stdinSock net.Conn
	// stdio are the command's stdin, stdout and stderr, which the setup
	// carries; owned are those sandboxd made (a pipe's end, /dev/null),
	// closed once it has (sentStdio).
	stdio, owned []*os.File
	// launch is what the helper was made for; startCPU what starting it
	// took on the starting thread.
	launch   launch
	startCPU time.Duration
	// exited is closed once the helper has been waited for; waitErr is
	// cmd.Wait's error, set before.
	exited  chan struct{}
	waitErr error
	// obs observes the command's write and connect calls; set by the
	// message reader when the helper hands over the descriptor.
	obs *detect.Observer
	// layer is the workspace's copy-on-write layer, handed over by the
	// helper once it is mounted.
	layer *os.File
	// shared are the writable roots the sandbox sees at their host paths.
	shared []string
	// egress serves the proxy's listener once the helper hands it over
	// (nil: no egress).
	egress *egress
	// diag is the namespace's sock_diag socket (nil: none), shared by
	// the observer and the egress proxy.
	diag *detect.Diag
	// connects: the observer makes every connect (namespaces only).
	connects bool
	// haveExit: the helper said how the command ended (Exit or Error);
	// exitLimits are the limits its Exit named.
	haveExit   bool
	exitLimits []string
	// caches takes the helper's word on the cache layers it mounted.
	caches cacheNotes
	// sudoUID is the SUDO_UID the command gets (see gitEnv), or -1.
	sudoUID int
	// onWatch is the spec's OnWatch in a transactional run, else nil.
	onWatch func()
	// group lists the processes in the run's pids group, which the
	// command is forked into (nil: the run has none).
	group func() ([]int, error)
}

// alone reports whether the run's group holds no process but the
// helper's: every process of the command is gone, by the kernel's
// account. Without a group, or when its list cannot be read, it is
// never known before the helper exits.
func (h *helper) alone() bool {
	if h.group == nil {
		return false
	}
	pids, err := h.group()
	if err != nil {
		return false
	}
	for _, pid := range pids {
		if pid != h.cmd.Process.Pid {
			return false
		}
	}
	return true
}

// launch is how a helper process is made for a run: its namespaces, its
// ids inside and on the host, its groups. A helper started for one
// launch serves only a run whose launch is equal (ReadyHelpers).
type launch struct {
	ns, root bool
	// capture: the run captures direct connects (namespaces, and an
	// Egress that asks for it); its helper prepares the capture before
	// the setup, so a run that does not capture never takes a helper
	// made for one, nor the other way round.
	capture    bool
	attr       *syscall.SysProcAttr
	groups     fsid.ID
	homeMapped bool
	sudoUID    int
	// exe is the separate helper binary (Spec.Helper; nil: sandboxd).
	exe *os.File
}

// startHelper gives the run a helper: a ready one made for the same
// launch, else one started now; then ties it to spec.
func startHelper(spec Spec, ns, root bool, log *slog.Logger) (*helper, error) {
	l := newLaunch(spec, ns, root)
	h := spec.Ready.take(l)
	log.Debug("sandbox helper", "ready", h != nil)
	if h == nil {
		var err error
		if h, err = spawnHelper(l); err != nil {
			return nil, err
		}
	}
	if err := h.attach(spec, log); err != nil {
		h.cleanup()
		return nil, err
	}
	return h, nil
}

// spawnHelper starts a helper for l. It waits for its setup, with
// /dev/null as its standard streams until the setup brings the run's.
func spawnHelper(l launch) (*helper, error) {
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: socketpair: %w", err)
	}
	theirs := os.NewFile(uintptr(pair[1]), "sandbox-control")
	defer theirs.Close()
	// In namespaces the filter allows unix sockets and stops every
	// connect, which the observer makes (seccomp.Options.UnixSockets).
	h := &helper{sock: pair[0], exited: make(chan struct{}), sudoUID: l.sudoUID, connects: l.ns,
		groups: l.groups, homeMapped: l.homeMapped, launch: l}
	h.cmd = &exec.Cmd{
		Args:        []string{"sandboxd", wire.HelperArg},
		Env:         []string{},
		Dir:         "/",
		ExtraFiles:  []*os.File{theirs},
		SysProcAttr: l.attr,
	}
	if h.cmd.Path = helperPath(l.exe); l.exe != nil {
		h.cmd.Args[0] = "sandboxd-helper"
	}
	h.cmd.Args = append(h.cmd.Args, l.prepare()...)
	if err := h.start(); err != nil {
		unix.Close(pair[0])
		return nil, err
	}
	if err := sameBinary(h.cmd.Process.Pid, l.exe); err != nil {
		h.cleanup()
		return nil, err
	}
	return h, nil
}

// helperPath is the program a helper (or doctor's probe) is executed
// as: this process's own executable, or the separate helper binary f at
// the path it was checked at (Spec.Helper). By path, not by f's
// descriptor: a child that executes /proc/self/fd/N after taking the
// caller's ids in its new user namespace fails now and then with EACCES
// (1 to 3 in 600 concurrent launches here). The path is safe because its
// directory and every one above it may be changed by root (or
// sandboxd's owner) alone, which cmd/sandboxd checked; sameBinary makes
// sure nothing else ran.
func helperPath(f *os.File) string {
	if f == nil {
		return "/proc/self/exe"
	}
	return f.Name()
}

// sameBinary checks that the started process pid executes the file f
// (nil: nothing to check): the one checked when sandboxd found it, not
// one put in its place since (an upgrade, say). The process has done
// nothing yet: a helper waits for its setup, the probe for its stdin.
func sameBinary(pid int, f *os.File) error {
	if f == nil {
		return nil
	}
	var want, got unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &want); err != nil {
		return fmt.Errorf("sandbox: helper binary: %w", err)
	}
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/exe", &got); err != nil {
		return fmt.Errorf("sandbox: helper binary: %w", err)
	}
	if got.Dev != want.Dev || got.Ino != want.Ino {
		return publicerr.New("the sandbox helper (" + f.Name() + ") was replaced since sandboxd checked it; restart sandboxd (install both from one build)")
	}
	return nil
}

// attach ties a started helper to the run of spec: its egress, its
// writable roots, and the standard streams its setup will carry.
func (h *helper) attach(spec Spec, log *slog.Logger) error {
	if spec.Egress != nil && h.connects {
		h.egress = newEgress(spec.Egress, h.sock, log)
	}
	h.shared = append(append([]string{spec.Workspace}, spec.Writable...), spec.Caches...)
	if spec.Transaction && h.connects {
		h.onWatch = spec.OnWatch // a watcher matters only behind the layer
	}
	in, err := h.stdin(spec.Stdin)
	if err != nil {
		return err
	}
	h.stdio = append(h.stdio, in)
	return h.streams(spec, h.connects && spec.UID == 0)
}

// newLaunch puts the helper in the run's namespaces, mapped to the
// command's uid, with the capabilities it needs to set them up.
func newLaunch(spec Spec, ns, root bool) launch {
	attr := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	l := launch{ns: ns, root: root, capture: ns && spec.Egress.captures(), attr: attr, groups: spec.caller(), sudoUID: -1, exe: spec.Helper}
	uid, gid := spec.UID, spec.GID
	if !ns {
		// The caller's ids, whoever runs sandboxd: for a process running
		// for itself a no-op, for a root one serving another user the
		// drop to that user (its groups come from the starting thread).
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		return l
	}
	inUID, inGID, hostUID, hostGID := uid, gid, uid, gid
	if root {
		hostUID, hostGID = spec.HostUID, spec.HostGID
		inUID, inGID = ownerOf(spec.Workspace)
		if hu, _ := ownerOf(spec.Home); spec.Home != "" && hu == inUID {
			l.homeMapped = true
		}
	}
	attr.Cloneflags = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWPID |
		unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: inUID, HostID: hostUID, Size: 1}}
	if root {
		// Host ownership shown truthfully (see truthfulUIDMap).
		attr.UidMappings, l.sudoUID = rootUIDMap(inUID, hostUID)
	}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: inGID, HostID: hostGID, Size: 1}}
	attr.GidMappingsEnableSetgroups = false
	attr.Credential = &syscall.Credential{Uid: uint32(inUID), Gid: uint32(inGID), NoSetGroups: true}
	// A non-zero uid inside keeps its namespace capabilities across
	// exec only as ambient capabilities.
	// CAP_DAC_OVERRIDE: overlayfs works in its work directory with
	// the mounter's credentials. CAP_NET_BIND_SERVICE: the stub
	// resolver's port 53. All of these are the namespace's,
	// over the caller's own files only, and gone before the command.
	attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_NET_BIND_SERVICE, unix.CAP_SETPCAP, unix.CAP_DAC_OVERRIDE}
	return l
}

// key is l in one string: equal for equal launches only.
func (l launch) key() string {
	b, err := json.Marshal(struct {
		NS, Root   bool
		Capture    bool
		Attr       *syscall.SysProcAttr
		Groups     fsid.ID
		HomeMapped bool
		SudoUID    int
		Exe        uintptr // which open file is the helper binary (0: sandboxd)
	}{l.ns, l.root, l.capture, l.attr, l.groups, l.homeMapped, l.sudoUID, exeFD(l.exe)})
	if err != nil {
		return "" // take refuses it
	}
	return string(b)
}

// prepare is what a helper of l prepares before its setup comes: the
// arguments after wire.HelperArg, this build's stamp first (a helper of
// another build prepares nothing, and its setup fails the run).
func (l launch) prepare() []string {
	args := []string{wire.Stamp()}
	switch {
	case l.capture:
		args = append(args, wire.PrepareNet, wire.PrepareCapture)
	case l.ns:
		args = append(args, wire.PrepareNet)
	}
	return args
}

// exeFD is f's descriptor, 0 for none: the process holds the helper
// binary open for as long as it may start helpers, so the number names
// the file.
func exeFD(f *os.File) uintptr {
	if f == nil {
		return 0
	}
	return f.Fd()
}

// stdin is the command's stdin as the helper gets it: /dev/null for
// none; a pipe instead of a socket (inetd, a systemd socket unit with
// Accept=yes, nc -e), since a socket of the host's network namespace
// could be connected anywhere from inside (connect(AF_UNSPEC), then
// connect) or send datagrams to any address, its bytes copied until the
// helper is gone (the read is then cut short: the peer may never close
// it); a pipe for a reader that is no file, copied until it ends (Run
// waits for that copy, see Spec.Stdin); any other file itself.
func (h *helper) stdin(r io.Reader) (*os.File, error) {
	if r == nil {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return nil, fmt.Errorf("sandbox: stdin: %w", err)
		}
		h.owned = append(h.owned, f)
		return f, nil
	}
	f, isFile := r.(*os.File)
	if isFile {
		if st, err := f.Stat(); err != nil || st.Mode()&os.ModeSocket == 0 {
			return f, nil
		}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: stdin pipe: %w", err)
	}
	h.owned = append(h.owned, pr)
	var src io.Reader = r
	if isFile {
		c, err := net.FileConn(f) // a non-blocking duplicate, with deadlines
		if err != nil {
			pw.Close()
			return nil, fmt.Errorf("sandbox: stdin socket: %w", err)
		}
		h.stdinSock, src = c, c
		go func() {
			<-h.exited
			h.endStdin()
		}()
	}
	h.relays.Add(1)
	go func() {
		defer h.relays.Done()
		io.Copy(pw, src)
		pw.Close()
	}()
	return pr, nil
}

// endStdin cuts the copy from a stdin socket short.
func (h *helper) endStdin() {
	if h.stdinSock != nil {
		h.stdinSock.SetReadDeadline(time.Now())
		h.stdinSock.Close()
	}
}

// streams adds the command's stdout and stderr to the helper's
// streams: a terminal directly, anything else through a fresh pipe owned
// by the command's host uid (so that reopening /dev/stdout inside
// works), relayed to the real destination. The pipes' write ends are
// closed once the setup has carried them (sentStdio).
func (h *helper) streams(spec Spec, chown bool) error {
	for _, w := range []io.Writer{spec.Stdout, spec.Stderr} {
		f, direct := w.(*os.File)
		if direct && isTerminal(f) {
			h.stdio = append(h.stdio, f)
			continue
		}
		r, pw, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("sandbox: pipe: %w", err)
		}
		h.owned = append(h.owned, pw)
		h.stdio = append(h.stdio, pw)
		// The pipe is the command's: it may reopen it (/dev/stdout).
		// For a process running for itself the change is none; a root
		// one serving another caller gives it that caller.
		if chown {
			unix.Fchown(int(pw.Fd()), spec.HostUID, spec.HostGID)
		} else {
			unix.Fchown(int(pw.Fd()), spec.UID, spec.GID)
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
	}
	return nil
}

// stdioFDs are the command's standard streams, for the setup message.
func (h *helper) stdioFDs() []int {
	fds := make([]int, len(h.stdio))
	for i, f := range h.stdio {
		fds[i] = int(f.Fd())
	}
	return fds
}

// sentStdio closes sandboxd's copies of the streams it made once the
// helper holds its own, or never will: each relay then ends with the
// helper and the command.
func (h *helper) sentStdio() {
	for _, f := range h.owned {
		f.Close()
	}
	h.owned, h.stdio = nil, nil
}

// start starts the helper from a goroutine whose thread stays locked
// until the helper is gone: Pdeathsig fires when the thread that forked
// the helper exits.
func (h *helper) start() error {
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
		// The helper's supplementary groups are the caller's (its
		// Credential keeps the thread's): a root process's own never
		// reach the command unless they are the caller's.
		if err := fsid.TakeGroups(h.groups); err != nil {
			startErr <- err
			return
		}
		var before, after unix.Timespec
		unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &before)
		if err := h.cmd.Start(); err != nil {
			startErr <- err
			return
		}
		unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &after)
		h.startCPU = time.Duration(after.Nano() - before.Nano())
		startErr <- nil
		h.waitErr = h.cmd.Wait()
		close(h.exited)
	}()
	if err := <-startErr; err != nil {
		return fmt.Errorf("sandbox: start helper: %w", err)
	}
	return nil
}

func isNSRefusal(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EINVAL) ||
		errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EUSERS)
}

func (h *helper) kill() {
	h.cmd.Process.Signal(syscall.SIGKILL)
}

// cleanup kills the helper (in a pid namespace, everything with it) and
// waits for it, its relays and the observer, then releases the socket
// and an unclaimed layer.
func (h *helper) cleanup() {
	h.kill()
	<-h.exited
	h.sentStdio()
	if h.egress != nil {
		h.egress.stop()
	}
	h.relays.Wait()
	if h.obs != nil {
		h.obs.Finish()
	}
	unix.Close(h.sock)
	h.diag.Close()
	if h.layer != nil {
		h.layer.Close()
	}
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// errnoText is the kernel's reason inside err (its errno's text), or a
// fixed phrase: the rest of err names sandboxd's internals.
func errnoText(err error) string {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "the kernel refused to create them"
}
