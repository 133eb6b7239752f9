package detect

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/seccomp"
	"golang.org/x/sys/unix"
)

// Connects, made by the supervisor.
//
// With unix sockets allowed (a network namespace of the run's own), every
// connect stops, and the supervisor makes it itself, on the caller's own
// socket (pidfd_getfd: the same open socket) with the address it read
// once: a call let through would read its address, and look up its
// descriptor, again, after the check (another thread may change either).
//
// A pathname unix socket is reached only when a socket of the run's own
// network namespace is bound to it: the supervisor resolves the path as
// the caller's root and cwd would, holds the file it found, asks the
// namespace's sock_diag which of its sockets are bound to which file, and
// connects to the file it holds, through /proc/self/fd. A socket a host
// program made (ssh-agent, docker, D-Bus, anything in $HOME or the
// workspace) is bound in another namespace: the call fails with EACCES
// and the refusal is a boundary (resolve_unix) when the host's own
// namespace has a socket bound there; ECONNREFUSED when nobody is, as
// the kernel says for a stale socket file. Abstract names are the
// namespace's own already (they are per network namespace). Every other
// address (TCP, in the run's namespace) is connected as the caller would:
// the socket belongs to the namespace, which is what confines it.
//
// What differs from the caller's own call: the listener's peer
// credentials (SO_PEERCRED) name the supervisor, not the caller; and the
// socket file's own permission is checked against the supervisor's
// credentials.

// connecting is one connect the supervisor makes: the caller's socket,
// the address to give it, and the file it names (for a pathname).
type connecting struct {
	sock int    // the caller's socket, duplicated here
	buf  []byte // the address, as the kernel takes it, in buf[:n] (buf is never empty)
	n    int
	file int // an O_PATH descriptor of the socket file (-1: none)
}

func (c *connecting) close() {
	unix.Close(c.sock)
	if c.file >= 0 {
		unix.Close(c.file)
	}
}

// answerConnect decides a connect notification and answers it (the call
// itself on its own goroutine: a connect may wait for a listener's
// backlog, or for a TCP handshake). It returns the intents to record.
func (o *Observer) answerConnect(n seccomp.Notification) []Intent {
	p := &proc{pid: n.Pid, o: o}
	c, errno, in := o.prepareConnect(p, n)
	if errno != 0 {
		if err := o.l.Return(n.ID, errno); err != nil {
			o.log.Warn("observer", "err", err)
		}
		return in
	}
	if !o.l.Valid(n.ID) {
		c.close() // the caller is gone, or was interrupted
		return nil
	}
	if fl, err := unix.FcntlInt(uintptr(c.sock), unix.F_GETFL, 0); err == nil && fl&unix.O_NONBLOCK != 0 {
		// A non-blocking socket's connect returns at once: made here,
		// with no goroutine to start.
		errno := c.try()
		c.close()
		if err := o.l.Return(n.ID, errno); err != nil {
			o.log.Warn("observer", "err", err)
		}
		return in
	}
	o.connectMu.Lock()
	if o.connectsUnderWay >= maxConnecting {
		o.connectMu.Unlock()
		c.close()
		o.log.Debug("observer: too many connects under way", "max", maxConnecting)
		o.l.Return(n.ID, unix.EAGAIN)
		return in
	}
	o.connectsUnderWay++
	o.connectMu.Unlock()
	o.pending.Add(1)
	go func() {
		defer o.pending.Done()
		errno := o.connect(c, n.ID)
		c.close()
		o.connectMu.Lock()
		o.connectsUnderWay--
		o.connectMu.Unlock()
		if err := o.l.Return(n.ID, errno); err != nil {
			o.log.Warn("observer", "err", err)
		}
	}()
	return in
}

// maxConnecting bounds the connects under way in one run: each holds a
// descriptor or two and, while it waits, a thread. Beyond it a connect
// fails with EAGAIN.
const maxConnecting = 1024

// sizeofSockaddrStorage is the largest address connect takes.
const sizeofSockaddrStorage = 128

// connectSlice is how long one try of a blocking connect may wait.
const connectSlice = 50 * time.Millisecond

// connect makes the call of c, a blocking socket (a non-blocking one gets
// one try on the observer's goroutine, as the kernel would give it). It
// is tried in slices (SO_SNDTIMEO,
// which bounds both a unix connect waiting for a full backlog and a TCP
// handshake, set for the call and restored after): between slices the
// call ends when its caller is gone or interrupted, or the run ends, so
// no connect outlives the run; the caller's own send timeout, if it set
// one, still ends the wait.
func (o *Observer) connect(c *connecting, id uint64) unix.Errno {
	own, err := unix.GetsockoptTimeval(c.sock, unix.SOL_SOCKET, unix.SO_SNDTIMEO)
	if err != nil {
		return c.try()
	}
	slice := unix.NsecToTimeval(connectSlice.Nanoseconds())
	if err := unix.SetsockoptTimeval(c.sock, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &slice); err != nil {
		return c.try()
	}
	defer unix.SetsockoptTimeval(c.sock, unix.SOL_SOCKET, unix.SO_SNDTIMEO, own)
	limit := time.Duration(own.Nano())
	start := time.Now()
	for {
		e := c.try()
		if e != unix.EAGAIN && e != unix.EINPROGRESS && e != unix.EALREADY {
			return e
		}
		switch {
		case limit > 0 && time.Since(start) >= limit:
			return e // the caller's own timeout
		case o.ending.Load(), !o.l.Valid(id):
			return unix.EINTR // nobody waits for it any more
		}
	}
}

// try makes the connect call once.
func (c *connecting) try() unix.Errno {
	if _, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(c.sock), uintptr(unsafe.Pointer(&c.buf[0])), uintptr(c.n)); e != 0 {
		return e
	}
	return 0
}

// endConnects ends the connects still under way (no process is left to
// wait for them: their sockets are only the supervisor's) and waits for
// them, before the listener they answer on is closed.
func (o *Observer) endConnects() {
	o.ending.Store(true)
	o.pending.Wait()
}

// prepareConnect reads the connect's address and takes its socket. For
// a pathname unix socket, it decides whether the run may reach it:
// errno is what the call fails with otherwise (0: connect c).
func (o *Observer) prepareConnect(p *proc, n seccomp.Notification) (*connecting, unix.Errno, []Intent) {
	a := n.Args
	size := int(uint32(a[2]))
	if size > sizeofSockaddrStorage {
		return nil, unix.EINVAL, nil
	}
	buf := make([]byte, max(size, 1)) // a zero-length address is the kernel's to refuse
	if size > 0 {
		b, err := p.bytes(a[1], size)
		if err != nil {
			return nil, unix.EFAULT, nil
		}
		copy(buf, b)
	}
	addr := buf[:size]
	sock, errno := takeFD(p.pid, int(int32(a[0])))
	if errno != 0 {
		return nil, errno, nil
	}
	c := &connecting{sock: sock, buf: buf, n: size, file: -1}
	if !o.ownSocket(sock) {
		// A socket made outside the run (one it inherited, a stdin
		// socket from inetd): connected here it would reach the host's
		// network. Nothing could be granted for it, so no boundary.
		c.close()
		o.log.Debug("observer: connect on a socket of another network namespace refused")
		return nil, unix.EACCES, nil
	}
	domain, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		c.close()
		return nil, errnoOf(err), nil
	}
	if domain != unix.AF_UNIX {
		if typ, err := unix.GetsockoptInt(sock, unix.SOL_SOCKET, unix.SO_TYPE); err == nil && typ == unix.SOCK_DGRAM {
			// UDP (only with capture): a connect sends nothing, and the
			// namespace's netfilter rules drop every datagram but the
			// stub resolver's. No boundary: nothing could be granted.
			return c, 0, nil
		}
		// Observed as before: where the command connects.
		dest := parseSockaddr(addr)
		if dest == "" {
			return c, 0, nil
		}
		in := Intent{Op: "connect", Destination: dest, Inside: o.listening(o.inside, dest)}
		in.Host = !in.Inside && o.listening(o.hostDiag, dest)
		return c, 0, []Intent{in}
	}
	path, ok := unixPath(addr)
	if !ok {
		return c, 0, nil // abstract or unnamed: the namespace's own
	}
	file, errno, refused := o.runSocket(p, path)
	if errno != 0 {
		c.close()
		if refused != "" {
			return nil, errno, []Intent{{Op: boundary.OpResolveUnix, Path: refused}}
		}
		return nil, errno, nil
	}
	// The same call, naming the file held here.
	c.file = file
	c.buf = binary.NativeEndian.AppendUint16(make([]byte, 0, unix.SizeofSockaddrUnix), unix.AF_UNIX)
	c.buf = append(append(c.buf, "/proc/self/fd/"+strconv.Itoa(file)...), 0)
	c.n = len(c.buf)
	return c, 0, nil
}

// nsID names a namespace: its nsfs inode.
type nsID struct{ dev, ino uint64 }

// ownSocket reports whether sock belongs to the run's network namespace
// (SIOCGSKNS: a descriptor of the socket's namespace; the ioctl needs
// CAP_NET_ADMIN over it, which the supervisor has over the run's only,
// unless it is root).
func (o *Observer) ownSocket(sock int) bool {
	if o.netns == (nsID{}) {
		return false
	}
	fd, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(sock), unix.SIOCGSKNS, 0)
	if e != 0 {
		return false
	}
	defer unix.Close(int(fd))
	var st unix.Stat_t
	if err := unix.Fstat(int(fd), &st); err != nil {
		return false
	}
	return nsID{dev: st.Dev, ino: st.Ino} == o.netns
}

// takeFD duplicates descriptor fd of process pid (a thread's id, as a
// notification names the caller) into the supervisor.
func takeFD(pid, fd int) (int, unix.Errno) {
	pidfd, err := unix.PidfdOpen(pid, pidfdThread)
	if errors.Is(err, unix.EINVAL) {
		// Before 6.9: the thread group's leader shares the descriptors.
		pidfd, err = unix.PidfdOpen(tgid(pid), 0)
	}
	if err != nil {
		return -1, unix.ESRCH
	}
	defer unix.Close(pidfd)
	dup, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		if e := errnoOf(err); e == unix.EBADF {
			return -1, unix.EBADF
		}
		return -1, unix.EPERM
	}
	return dup, 0
}

// tgid is the thread group of thread pid (pid itself when unknown).
func tgid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return pid
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
				return n
			}
		}
	}
	return pid
}

// pidfdThread is PIDFD_THREAD (Linux 6.9): a pidfd of any thread, not
// only of a thread group's leader.
const pidfdThread = unix.O_EXCL

func errnoOf(err error) unix.Errno {
	if e, ok := err.(unix.Errno); ok {
		return e
	}
	return unix.EINVAL
}

// unixPath returns the pathname of a unix address (ok false: abstract,
// unnamed, not AF_UNIX, or too short to say).
func unixPath(addr []byte) (string, bool) {
	if len(addr) < 3 || binary.NativeEndian.Uint16(addr[0:2]) != unix.AF_UNIX || addr[2] == 0 {
		return "", false
	}
	b := addr[2:]
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b), true
}

// runSocket resolves the pathname socket path as the calling process
// would and decides whether the run may reach it: the O_PATH descriptor
// of the socket file to connect to, or the errno the call fails with,
// and, when the refusal is a boundary, the path refused.
func (o *Observer) runSocket(p *proc, path string) (int, unix.Errno, string) {
	full := path
	if !strings.HasPrefix(path, "/") {
		base, err := p.dir(cwd)
		if err != nil || !strings.HasPrefix(base, "/") {
			return -1, unix.ENOENT, ""
		}
		full = strings.TrimSuffix(base, "/") + "/" + path // not cleaned: ".." is the walk's
	}
	root, err := unix.Open(fmt.Sprintf("/proc/%d/root", p.pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, unix.ENOENT, ""
	}
	defer unix.Close(root)
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	rel := strings.TrimLeft(full, "/")
	if rel == "" {
		rel = "."
	}
	file, err := unix.Openat2(root, rel, &how)
	if err != nil {
		return -1, errnoOf(err), ""
	}
	var st unix.Statx_t
	if err := unix.Statx(file, "", unix.AT_EMPTY_PATH, unix.STATX_TYPE|unix.STATX_INO|unix.STATX_MNT_ID, &st); err != nil {
		unix.Close(file)
		return -1, unix.ENOENT, ""
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		unix.Close(file)
		return -1, unix.ECONNREFUSED, ""
	}
	named := resolvedName(file, full)
	dev, ok := o.mounts[st.Mnt_id]
	if !ok {
		// The run's mounts are fixed (the mount API is refused inside),
		// and a mount id is never reused while its mount exists.
		dev.major, dev.minor, dev.fstype, ok = mountDev(p.pid, st.Mnt_id)
		if ok {
			o.mounts[st.Mnt_id] = dev
		}
	}
	major, minor, fstype := dev.major, dev.minor, dev.fstype
	if !ok {
		unix.Close(file)
		o.log.Debug("observer: unix connect: mount not found", "path", named, "mnt_id", st.Mnt_id)
		return -1, unix.EACCES, named
	}
	bound, err := o.inside.UnixBound(major, minor, st.Ino, false)
	if err != nil {
		o.log.Debug("observer: unix connect: sock_diag", "err", err)
	}
	if bound && st.Ino <= 0xffffffff {
		return file, 0, ""
	}
	unix.Close(file)
	if bound {
		// A file system with 64-bit inode numbers (XFS's inode64, say):
		// sock_diag's 32 bits cannot tell the run's socket from another
		// file that shares them, so it is refused, and not as a host
		// socket (most likely it is the command's own: the README says
		// to keep such sockets in /tmp).
		o.log.Debug("observer: unix connect: socket on a file system with 64-bit inode numbers refused", "path", named)
		return -1, unix.EACCES, ""
	}
	// Whose is it, then? Through an overlay (the workspace's layer), a
	// host program's socket is the lower layer's file, under a device
	// only the overlay knows: matched by its inode alone, which only
	// chooses between two refusals.
	if bound, _ := o.hostDiag.UnixBound(major, minor, st.Ino, fstype == "overlay"); bound || st.Ino > 0xffffffff {
		return -1, unix.EACCES, named
	}
	// Nobody this host can see is bound to it: a stale socket file.
	return -1, unix.ECONNREFUSED, ""
}

// resolvedName is the path of the file held, as the sandbox names it
// (the caller's spelling when it cannot be read).
func resolvedName(file int, spelled string) string {
	l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", file))
	if err != nil || !strings.HasPrefix(l, "/") {
		return spelled
	}
	return l
}

// mountInfo is what mountDev found for a mount.
type mountInfo struct {
	major, minor uint32
	fstype       string
}

// mountDev is the device (major, minor) and type of the file system of
// mount id in pid's mount namespace, from its mountinfo: the
// superblock's, which sock_diag names a socket's file by (stat shows an
// overlay's files under other devices).
func mountDev(pid int, id uint64) (uint32, uint32, string, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return 0, 0, "", false
	}
	defer f.Close()
	want := strconv.FormatUint(id, 10) + " "
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, want) {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			return 0, 0, "", false
		}
		maj, min, ok := strings.Cut(fields[2], ":")
		a, err1 := strconv.ParseUint(maj, 10, 32)
		b, err2 := strconv.ParseUint(min, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return 0, 0, "", false
		}
		fstype := ""
		if _, after, ok := strings.Cut(line, " - "); ok {
			fstype, _, _ = strings.Cut(after, " ")
		}
		return uint32(a), uint32(b), fstype, true
	}
	return 0, 0, "", false
}
