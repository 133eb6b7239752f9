package detect

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/seccomp"
	"golang.org/x/sys/unix"
)

// An Intent is one observed call that could write or connect: what the
// command tried, named as the kernel would resolve it in the sandbox.
// Observation never decides anything; the kernel still enforces, and the
// supervisor later judges from its own copy of the policy which intents
// the sandbox refused.
type Intent struct {
	Op          boundary.Operation // write_file, make_reg, make_dir, remove_file, remove_dir, rename, link, make_sym, make_fifo, make_sock, chmod, chown, utime, xattr, truncate, connect
	Path        string             // absolute, symlinks resolved as far as they exist
	Destination string             // host:port for connect
	Ino         uint64             // the object's inode, when it existed at the call
	Born        int64              // and its birth time
	// Inside is set for a loopback connect that a server in the sandbox's
	// own network namespace was listening for when the call was made, and
	// Host when a server on the host's loopback was (netns mode only).
	Inside, Host bool
	// Program is the executable that made the call, for make_dir only
	// (whether a missing parent is a tool's own state depends on which
	// tool creates it): "" when unknown.
	Program string
}

// Observer answers a filter's notifications, recording intents.
type Observer struct {
	l    *seccomp.Listener
	log  *slog.Logger
	skip int // the helper's own pid: its probes are not the command's
	// onWatch, if set, is called (from the run goroutine) the first time
	// the command makes an inotify instance.
	onWatch func()
	watched bool

	// Used only by the run goroutine: memory descriptors by pid, a
	// reusable buffer, and the writable roots the sandbox sees at the
	// same paths as the host (so paths in them resolve without entering
	// the sandbox).
	mems  map[int]*os.File
	buf   []byte
	roots []fastRoot
	// inside and hostDiag are sock_diag sockets of the sandbox's network
	// namespace and of the supervisor's (nil: none): whether a loopback
	// connect reaches a server of the run, or is cut off from one of the
	// host's, and which unix sockets are the run's. inside is shared
	// with the egress proxy, and not the observer's to close.
	inside, hostDiag *Diag
	// connects: the supervisor makes every connect (connect_linux.go);
	// connectsUnderWay counts those under way (under connectMu), pending
	// waits for them, and ending tells them the run is over.
	connects bool
	// netns is the run's network namespace: a connect is made only on a
	// socket of it (zero: unknown, every connect refused).
	netns            nsID
	mounts           map[uint64]mountInfo // by mount id (run goroutine only)
	connectMu        sync.Mutex
	connectsUnderWay int
	pending          sync.WaitGroup
	ending           atomic.Bool

	// mu guards intents, seen and refused.
	mu      sync.Mutex
	intents []Intent
	seen    map[Intent]bool
	// refused counts the calls refused by design, by class, in the order
	// their classes first came.
	refused []Refused
	done    chan struct{}
	stop    chan struct{}
}

type fastRoot struct {
	path string
	fd   int
}

// maxMems bounds the cache of /proc/PID/mem descriptors.
const maxMems = 256

// StartObserver answers the notifications of the filter whose listener
// is fd (which it takes over) until Finish. The helper's own calls
// (helperPid) are not the command's; shared are the writable roots the
// sandbox sees at their host paths; diag is the sandbox's network
// namespace's sock_diag socket (nil: none). With connects, the filter
// stops every connect and the observer makes it (see connect_linux.go).
func StartObserver(fd, helperPid int, shared []string, diag *Diag, connects bool, onWatch func(), log *slog.Logger) *Observer {
	o := &Observer{l: seccomp.NewListener(fd), log: log, skip: helperPid, inside: diag, onWatch: onWatch,
		connects: connects, mounts: map[uint64]mountInfo{},
		mems: map[int]*os.File{}, buf: make([]byte, unix.PathMax),
		seen: map[Intent]bool{}, done: make(chan struct{}), stop: make(chan struct{})}
	for _, r := range shared {
		// Each root as the sandbox sees it (through the helper's root):
		// the workspace may be behind a copy-on-write layer whose merged
		// view differs from the host's (a directory the command replaced
		// by a symlink), and binds inside it end the fast path.
		inside := fmt.Sprintf("/proc/%d/root%s", helperPid, r)
		if rfd, err := unix.Open(inside, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			o.roots = append(o.roots, fastRoot{path: r, fd: rfd})
		}
	}
	if diag != nil {
		if h, err := OpenDiag(); err == nil {
			o.hostDiag = NewDiag(h)
		}
	}
	if connects {
		var st unix.Stat_t
		if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", helperPid), &st); err == nil {
			o.netns = nsID{dev: st.Dev, ino: st.Ino}
		}
	}
	go o.run()
	return o
}

func (o *Observer) run() {
	defer close(o.done)
	defer o.l.Close()
	defer o.endConnects() // before the listener they answer on is closed
	defer func() {
		for _, f := range o.mems {
			f.Close()
		}
		for _, r := range o.roots {
			unix.Close(r.fd)
		}
		o.hostDiag.Close()
	}()
	for {
		n, ok, err := o.l.Receive(100)
		if err != nil {
			if !errors.Is(err, seccomp.ErrGone) {
				o.log.Warn("observer", "err", err)
			}
			return
		}
		if !ok {
			select {
			case <-o.stop:
				return
			default:
				continue
			}
		}
		if ref, errno, refused := seccomp.Refused(n.Nr, n.Args); refused {
			// Refused by design: failed with the errno the filter gives
			// without Explain, never let through.
			if err := o.l.Return(n.ID, errno); err != nil {
				o.log.Warn("observer", "err", err)
			}
			o.refuse(n.Pid, ref)
			continue
		}
		if n.Nr == unix.SYS_CONNECT && o.connects {
			o.record(n.Pid, o.answerConnect(n))
			continue
		}
		in, good := o.decode(n)
		// What was read from the process's memory is only trusted if the
		// call is still the one we were told about.
		valid := o.l.Valid(n.ID)
		if err := o.l.Continue(n.ID); err != nil {
			o.log.Warn("observer", "err", err)
		}
		if good && valid {
			o.record(n.Pid, in)
		}
	}
}

// record keeps the intents of a call of process pid.
func (o *Observer) record(pid int, in []Intent) {
	if pid == o.skip || len(in) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, i := range in {
		if !o.seen[i] {
			o.seen[i] = true
			o.intents = append(o.intents, i)
		}
	}
}

// refuse counts a call of process pid refused by design.
func (o *Observer) refuse(pid int, ref seccomp.Refusal) {
	if pid == o.skip || ref.Class == "" {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range o.refused {
		if o.refused[i].Class == ref.Class {
			o.refused[i].Count++
			return
		}
	}
	o.refused = append(o.refused, Refused{Class: ref.Class, What: ref.What, Why: ref.Why, Count: 1, Probed: ref.Probed})
}

// Refusals are the classes of calls refused by design so far, with their
// counts (complete once Finish has returned).
func (o *Observer) Refusals() []Refused {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Refused(nil), o.refused...)
}

// Finish waits until every process under the filter is gone (or stop is
// called) and returns the intents.
func (o *Observer) Finish() []Intent {
	select {
	case <-o.done:
	default:
		close(o.stop)
		<-o.done
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.intents
}

// proc reads a stopped process's memory and resolves its paths.
type proc struct {
	pid int
	o   *Observer
}

func (p *proc) mem() (*os.File, error) {
	if f := p.o.mems[p.pid]; f != nil {
		return f, nil
	}
	if len(p.o.mems) >= maxMems {
		for k, f := range p.o.mems {
			f.Close()
			delete(p.o.mems, k)
		}
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", p.pid))
	if err != nil {
		return nil, err
	}
	p.o.mems[p.pid] = f
	return f, nil
}

// str reads a NUL-terminated string (at most PATH_MAX) at addr. Short
// paths need one small read; the pid's memory descriptor is kept (a pid
// cannot be reused while the sandbox's processes are being observed:
// they are all children of its pid namespace or of the helper).
func (p *proc) str(addr uint64) (string, error) {
	if addr == 0 {
		return "", errors.New("null pointer")
	}
	s, err := p.readStr(addr)
	if err != nil {
		// A cached descriptor outlives an execve: it still names the old
		// address space, which reads as empty. Open the memory again, once.
		p.forget()
		s, err = p.readStr(addr)
	}
	return s, err
}

func (p *proc) readStr(addr uint64) (string, error) {
	m, err := p.mem()
	if err != nil {
		return "", err
	}
	for _, size := range []int{256, unix.PathMax} {
		n, err := m.ReadAt(p.o.buf[:size], int64(addr))
		if i := bytes.IndexByte(p.o.buf[:n], 0); i >= 0 {
			return string(p.o.buf[:i]), nil
		}
		if n < size {
			if err == nil {
				err = errors.New("short read")
			}
			return "", err
		}
	}
	return "", errors.New("unterminated path")
}

// forget drops the cached memory descriptor of the process.
func (p *proc) forget() {
	if f := p.o.mems[p.pid]; f != nil {
		f.Close()
		delete(p.o.mems, p.pid)
	}
}

func (p *proc) bytes(addr uint64, n int) ([]byte, error) {
	buf := make([]byte, n)
	for fresh := false; ; fresh = true {
		m, err := p.mem()
		if err != nil {
			return nil, err
		}
		if _, err := m.ReadAt(buf, int64(addr)); err == nil {
			return buf, nil
		} else if fresh {
			return nil, err
		}
		p.forget() // see str
	}
}

// dir returns the directory a *at call's dirfd names (AT_FDCWD: the cwd).
func (p *proc) dir(dirfd uint64) (string, error) {
	if int32(dirfd) == unix.AT_FDCWD {
		return os.Readlink(fmt.Sprintf("/proc/%d/cwd", p.pid))
	}
	return os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", p.pid, int32(dirfd)))
}

// fdPath names what a descriptor refers to.
func (p *proc) fdPath(fd uint64) (string, error) {
	return os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", p.pid, int32(fd)))
}

// errNoName is an fd whose object has no name in the tree.
var errNoName = errors.New("the object has no name")

// fdObject is the path and inode of the object the process's fd is open
// on: a call through an fd acts on an object that exists, which the
// judge must know to report it (its ENOENT shortcut is for names).
func (p *proc) fdObject(fd uint64) (string, uint64, error) {
	link := fmt.Sprintf("/proc/%d/fd/%d", p.pid, int32(fd))
	path, err := os.Readlink(link)
	if err != nil {
		return "", 0, err
	}
	if strings.HasPrefix(path, "/memfd:") || strings.HasSuffix(path, " (deleted)") {
		// No name: a memfd, or a file already unlinked.
		return "", 0, errNoName
	}
	var st unix.Stat_t
	if err := unix.Stat(link, &st); err != nil {
		return path, unknownIno, nil
	}
	return path, st.Ino, nil
}

// at resolves (dirfd, path) as the process would, and reports whether
// the result exists. With follow, a final symlink is followed too. An
// unresolvable path is returned cleaned but unresolved, which is still
// exactly what was attempted.
func (p *proc) at(dirfd, pathAddr uint64, follow bool) (string, uint64, error) {
	name, err := p.str(pathAddr)
	if err != nil {
		return "", 0, err
	}
	if !filepath.IsAbs(name) {
		base, err := p.dir(dirfd)
		if err != nil {
			return "", 0, err
		}
		name = filepath.Join(base, name)
	}
	name = filepath.Clean(name)
	if follow {
		if path, ino, ok := p.reopened(name); ok {
			return path, ino, nil
		}
	}
	// A walk through one of the process's magic links (/proc/self/fd/3/x,
	// /proc/self/cwd/x, /proc/self/root/x, /dev/fd/3/x) is a walk from
	// what the link names; one the observer cannot follow is judged
	// without the existence shortcuts.
	name, sure := p.unmagic(name)
	if !sure {
		return name, unknownIno, nil
	}
	if path, ino, found := p.fast(name, follow); found {
		return path, ino, nil
	}
	path := p.resolve(name, follow)
	var st unix.Stat_t
	if unix.Lstat(fmt.Sprintf("/proc/%d/root%s", p.pid, path), &st) != nil {
		return path, 0, nil
	}
	return path, st.Ino, nil
}

// fast resolves a path inside a root the sandbox shares with the host at
// the same path (the workspace, writable roots, caches) without entering
// the sandbox: if every directory on the way is a real directory beneath
// the root (no symlink, no other file system), the path is already
// resolved. ino is the object's inode (0: it does not exist). found is
// false when the slow path must decide.
func (p *proc) fast(name string, follow bool) (path string, ino uint64, found bool) {
	for _, r := range p.o.roots {
		rel, ok := pathtree.Rel(r.path, name)
		if !ok {
			continue
		}
		if rel == "" {
			var st unix.Stat_t
			if unix.Fstat(r.fd, &st) != nil {
				return "", 0, false
			}
			return name, st.Ino, true
		}
		parent := filepath.Dir(rel)
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV}
		fd, err := unix.Openat2(r.fd, parent, &how)
		if err != nil {
			return "", 0, false
		}
		var st unix.Stat_t
		err = unix.Fstatat(fd, filepath.Base(rel), &st, unix.AT_SYMLINK_NOFOLLOW)
		unix.Close(fd)
		if err != nil {
			return name, 0, true
		}
		if follow && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return "", 0, false
		}
		return name, st.Ino, true
	}
	return "", 0, false
}

// unmagic rewrites a name that walks through one of the calling
// process's magic links to the path the link names. sure is false for a
// walk it cannot follow (another process's links, a descriptor that
// names no path).
func (p *proc) unmagic(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "/proc/")
	if strings.HasPrefix(name, "/dev/fd/") {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/root/dev/fd", p.pid)); err != nil || l != "/proc/self/fd" {
			return name, true // not the usual link: a plain path
		}
		rest, ok = "self/fd/"+strings.TrimPrefix(name, "/dev/fd/"), true
	}
	if !ok {
		return name, true
	}
	who, rest, _ := strings.Cut(rest, "/")
	if who != "self" && who != "thread-self" {
		if _, err := strconv.ParseUint(who, 10, 31); err != nil {
			return name, true // /proc/sys/..., /proc/net/...: plain paths
		}
		if who != p.nsPid() {
			return name, false // another process's view
		}
	}
	link, tail, _ := strings.Cut(rest, "/")
	var base string
	switch link {
	case "root":
		base = "/"
	case "cwd":
		base = p.link("cwd")
	case "fd":
		n, more, _ := strings.Cut(tail, "/")
		if _, err := strconv.ParseUint(n, 10, 31); err != nil || more == "" {
			return name, true // the link itself: reopened decides
		}
		base, tail = p.link("fd/"+n), more
	default:
		return name, true
	}
	if !filepath.IsAbs(base) {
		return name, false
	}
	return filepath.Join(base, tail), true
}

// link reads one of the calling process's magic links ("" if it cannot).
func (p *proc) link(name string) string {
	l, err := os.Readlink(fmt.Sprintf("/proc/%d/%s", p.pid, name))
	if err != nil {
		return ""
	}
	return l
}

// nsPid is the calling process's pid in its own (the sandbox's) pid
// namespace, as it would name itself under /proc.
func (p *proc) nsPid() string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				return f[len(f)-1]
			}
		}
	}
	return ""
}

// reopened resolves a name that reopens one of the calling process's
// own descriptors (/dev/stdout, /dev/fd/N, /proc/self/fd/N) to what the
// descriptor is, as the kernel's magic link does: a path, or a name like
// "pipe:[4711]" for an object without one (which Landlock does not
// restrict). The /dev aliases count only when they are the usual links.
func (p *proc) reopened(name string) (string, uint64, bool) {
	var fd string
	switch {
	case name == "/dev/stdin" || name == "/dev/stdout" || name == "/dev/stderr":
		n := map[string]string{"/dev/stdin": "0", "/dev/stdout": "1", "/dev/stderr": "2"}[name]
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/root%s", p.pid, name)); err != nil || l != "/proc/self/fd/"+n {
			return "", 0, false
		}
		fd = n
	case strings.HasPrefix(name, "/dev/fd/"):
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/root/dev/fd", p.pid)); err != nil || l != "/proc/self/fd" {
			return "", 0, false
		}
		fd = strings.TrimPrefix(name, "/dev/fd/")
	case strings.HasPrefix(name, "/proc/self/fd/"):
		fd = strings.TrimPrefix(name, "/proc/self/fd/")
	case strings.HasPrefix(name, "/proc/thread-self/fd/"):
		fd = strings.TrimPrefix(name, "/proc/thread-self/fd/")
	default:
		return "", 0, false
	}
	if _, err := strconv.ParseUint(fd, 10, 31); err != nil {
		return "", 0, false
	}
	link := fmt.Sprintf("/proc/%d/fd/%s", p.pid, fd)
	target, err := os.Readlink(link)
	if err != nil {
		return "", 0, false
	}
	var st unix.Stat_t
	if unix.Stat(link, &st) != nil {
		return target, 0, true
	}
	return target, st.Ino, true
}

func (p *proc) resolve(name string, follow bool) string {
	root, err := unix.Open(fmt.Sprintf("/proc/%d/root", p.pid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return name
	}
	defer unix.Close(root)
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	target, parent := strings.TrimPrefix(name, "/"), strings.TrimPrefix(filepath.Dir(name), "/")
	if follow {
		if fd, err := unix.Openat2(root, target, &how); err == nil {
			defer unix.Close(fd)
			if r, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd)); err == nil {
				return r
			}
		}
		if dangling, ok := p.danglingTarget(root, name); ok {
			// O_CREAT through a symlink to a missing file creates that
			// file: the name to judge is the link's target.
			return dangling
		}
	}
	if parent == "" {
		parent = "."
	}
	fd, err := unix.Openat2(root, parent, &how)
	if err != nil {
		return name
	}
	defer unix.Close(fd)
	r, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return name
	}
	return filepath.Join(r, filepath.Base(name))
}

// danglingTarget resolves a symlink at name whose target does not exist
// (yet), following links as the kernel does, at most 8 of them.
func (p *proc) danglingTarget(root int, name string) (string, bool) {
	followed := false
	for hop := 0; hop < 8; hop++ {
		// The parent resolved in the sandbox's root: real directories
		// only, so reading the link below cannot leave that root.
		parent := p.resolve(filepath.Dir(name), true)
		full := filepath.Join(parent, filepath.Base(name))
		l, err := readlinkAt(root, strings.TrimPrefix(full, "/"))
		if err != nil {
			return full, followed
		}
		if !filepath.IsAbs(l) {
			l = filepath.Join(parent, l)
		}
		name, followed = filepath.Clean(l), true
	}
	return name, followed
}

// readlinkAt reads the symlink at rel beneath root (no symlink followed
// on the way but the parent's own resolution).
func readlinkAt(root int, rel string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(root, rel, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// decode turns a notification into intents.
func (o *Observer) decode(n seccomp.Notification) ([]Intent, bool) {
	p := &proc{pid: n.Pid, o: o}
	a := n.Args
	switch n.Nr {
	case unix.SYS_OPENAT, unix.SYS_OPEN, unix.SYS_CREAT:
		return p.decodeOpen(n.Nr, a)
	case unix.SYS_EXECVE, unix.SYS_EXECVEAT:
		return p.decodeExec(n.Nr, a)
	case unix.SYS_INOTIFY_INIT, unix.SYS_INOTIFY_INIT1:
		if !o.watched && n.Pid != o.skip && o.onWatch != nil {
			o.watched = true
			o.onWatch()
		}
		return nil, false
	case unix.SYS_CONNECT:
		dest, err := p.sockaddr(a[1], a[2])
		if err != nil || dest == "" {
			return nil, false
		}
		// In its own namespace a loopback connect reaches the run's own
		// servers only; it is cut off from the host's (self: the
		// supervisor's namespace) when one listens there.
		// The host is asked only when nothing inside listens: every
		// connect to the run's proxy waits here.
		in := Intent{Op: "connect", Destination: dest, Inside: o.listening(o.inside, dest)}
		in.Host = !in.Inside && o.listening(o.hostDiag, dest)
		return []Intent{in}, true
	}
	if in, ok, known := p.decodeNames(n.Nr, a); known {
		return in, ok
	}
	return p.decodeMeta(n.Nr, a)
}

// one is the single intent of a call, if its path could be read.
func one(op boundary.Operation, path string, ino uint64, err error) ([]Intent, bool) {
	if err != nil {
		return nil, false
	}
	return []Intent{{Op: op, Path: path, Ino: ino}}, true
}

// decodeOpen names everything an open asks for: creating a file, writing
// an existing one, truncating it (Landlock checks each separately).
func (p *proc) decodeOpen(nr int, a [6]uint64) ([]Intent, bool) {
	var path string
	var ino, flags uint64
	var err error
	switch nr {
	case unix.SYS_OPENAT:
		path, ino, err = p.at(a[0], a[1], a[2]&unix.O_NOFOLLOW == 0)
		flags = a[2]
	case unix.SYS_OPEN:
		path, ino, err = p.at(cwd, a[0], a[1]&unix.O_NOFOLLOW == 0)
		flags = a[1]
	default: // creat
		path, ino, err = p.at(cwd, a[0], true)
		flags = unix.O_CREAT | unix.O_WRONLY | unix.O_TRUNC
	}
	if err != nil {
		return nil, false
	}
	if flags&unix.O_CREAT != 0 && ino == 0 {
		return []Intent{{Op: "make_reg", Path: path}}, true
	}
	var out []Intent
	if flags&unix.O_ACCMODE != unix.O_WRONLY && flags&unix.O_PATH == 0 {
		// Read-only and read-write opens read (only observed when
		// reads are: no audit to report them).
		op := boundary.OpReadFile
		if flags&unix.O_DIRECTORY != 0 {
			op = "read_dir"
		}
		out = append(out, Intent{Op: op, Path: path, Ino: ino})
	}
	if flags&(unix.O_WRONLY|unix.O_RDWR) != 0 {
		out = append(out, Intent{Op: "write_file", Path: path, Ino: ino})
	}
	if flags&unix.O_TRUNC != 0 {
		out = append(out, Intent{Op: "truncate", Path: path, Ino: ino})
	}
	return out, len(out) > 0
}

func (p *proc) decodeExec(nr int, a [6]uint64) ([]Intent, bool) {
	if nr == unix.SYS_EXECVE {
		return one(p.op("execute", cwd, a[0], true))
	}
	if a[1] == 0 || a[4]&unix.AT_EMPTY_PATH != 0 {
		path, err := p.fdPath(a[0])
		return one("execute", path, 0, err)
	}
	return one(p.op("execute", a[0], a[1], a[4]&unix.AT_SYMLINK_NOFOLLOW == 0))
}

// decodeNames decodes the calls that make, remove, rename or link a
// name; known is false for any other call.
func (p *proc) decodeNames(nr int, a [6]uint64) (in []Intent, ok, known bool) {
	known = true
	switch nr {
	case unix.SYS_MKDIR:
		in, ok = p.withProgram(one(p.op("make_dir", cwd, a[0], false)))
	case unix.SYS_MKDIRAT:
		in, ok = p.withProgram(one(p.op("make_dir", a[0], a[1], false)))
	case unix.SYS_UNLINK:
		in, ok = one(p.op("remove_file", cwd, a[0], false))
	case unix.SYS_RMDIR:
		in, ok = one(p.op("remove_dir", cwd, a[0], false))
	case unix.SYS_UNLINKAT:
		op := boundary.OpRemoveFile
		if a[2]&unix.AT_REMOVEDIR != 0 {
			op = "remove_dir"
		}
		in, ok = one(p.op(op, a[0], a[1], false))
	case unix.SYS_RENAME:
		in, ok = p.pair("rename", cwd, a[0], cwd, a[1])
	case unix.SYS_RENAMEAT, unix.SYS_RENAMEAT2:
		in, ok = p.pair("rename", a[0], a[1], a[2], a[3])
	case unix.SYS_LINK:
		in, ok = one(p.op("link", cwd, a[1], false))
	case unix.SYS_LINKAT:
		in, ok = one(p.op("link", a[2], a[3], false))
	case unix.SYS_SYMLINK:
		in, ok = one(p.op("make_sym", cwd, a[1], false))
	case unix.SYS_SYMLINKAT:
		in, ok = one(p.op("make_sym", a[1], a[2], false))
	case unix.SYS_MKNOD:
		in, ok = one(p.op(mknodOp(a[1]), cwd, a[0], false))
	case unix.SYS_MKNODAT:
		in, ok = one(p.op(mknodOp(a[2]), a[0], a[1], false))
	default:
		known = false
	}
	return in, ok, known
}

// decodeMeta decodes the calls that change an object's metadata or
// size.
func (p *proc) decodeMeta(nr int, a [6]uint64) ([]Intent, bool) {
	switch nr {
	case unix.SYS_CHMOD:
		return one(p.op("chmod", cwd, a[0], true))
	case unix.SYS_FCHMODAT, unix.SYS_FCHMODAT2:
		return one(p.op("chmod", a[0], a[1], true))
	case unix.SYS_CHOWN:
		return one(p.op("chown", cwd, a[0], true))
	case unix.SYS_LCHOWN:
		return one(p.op("chown", cwd, a[0], false))
	case unix.SYS_FCHOWNAT:
		return one(p.op("chown", a[0], a[1], a[4]&unix.AT_SYMLINK_NOFOLLOW == 0))
	case unix.SYS_UTIME, unix.SYS_UTIMES:
		return one(p.op("utime", cwd, a[0], true))
	case unix.SYS_FUTIMESAT:
		return one(p.op("utime", a[0], a[1], true))
	case unix.SYS_UTIMENSAT:
		if a[1] == 0 {
			path, ino, err := p.fdObject(a[0])
			return one("utime", path, ino, err)
		}
		return one(p.op("utime", a[0], a[1], a[3]&unix.AT_SYMLINK_NOFOLLOW == 0))
	case unix.SYS_SETXATTR, unix.SYS_REMOVEXATTR:
		return one(p.op("xattr", cwd, a[0], true))
	case unix.SYS_LSETXATTR, unix.SYS_LREMOVEXATTR:
		return one(p.op("xattr", cwd, a[0], false))
	case unix.SYS_SETXATTRAT, unix.SYS_REMOVEXATTRAT:
		return one(p.op("xattr", a[0], a[1], a[2]&unix.AT_SYMLINK_NOFOLLOW == 0))
	case unix.SYS_TRUNCATE:
		return one(p.op("truncate", cwd, a[0], true))
	case unix.SYS_FCHMOD, unix.SYS_FCHOWN, unix.SYS_FTRUNCATE, unix.SYS_FSETXATTR, unix.SYS_FREMOVEXATTR:
		path, ino, err := p.fdObject(a[0])
		op := map[int]boundary.Operation{unix.SYS_FCHMOD: "chmod", unix.SYS_FCHOWN: "chown", unix.SYS_FTRUNCATE: "truncate",
			unix.SYS_FSETXATTR: "xattr", unix.SYS_FREMOVEXATTR: "xattr"}[nr]
		return one(op, path, ino, err)
	}
	return nil, false
}

// cwd stands for AT_FDCWD in calls without a directory argument (the
// kernel reads the argument as a 32-bit int).
var cwd = func() uint64 { v := int32(unix.AT_FDCWD); return uint64(uint32(v)) }()

func (p *proc) op(op boundary.Operation, dirfd, pathAddr uint64, follow bool) (boundary.Operation, string, uint64, error) {
	path, ino, err := p.at(dirfd, pathAddr, follow)
	return op, path, ino, err
}

// withProgram names the executable of the (stopped) caller in its
// intents.
func (p *proc) withProgram(in []Intent, ok bool) ([]Intent, bool) {
	if !ok {
		return in, ok
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p.pid))
	if err != nil {
		return in, ok
	}
	for i := range in {
		in[i].Program = exe
	}
	return in, ok
}

func (p *proc) pair(op boundary.Operation, d1, p1, d2, p2 uint64) ([]Intent, bool) {
	a, _, err1 := p.at(d1, p1, false)
	b, _, err2 := p.at(d2, p2, false)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	return []Intent{{Op: op, Path: a}, {Op: op, Path: b}}, true
}

func mknodOp(mode uint64) boundary.Operation {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "make_fifo"
	case unix.S_IFSOCK:
		return "make_sock"
	default:
		return "make_reg"
	}
}

// sockaddr reads an IPv4 or IPv6 address and port.
func (p *proc) sockaddr(addr, length uint64) (string, error) {
	if length < 2 || length > 128 {
		return "", nil
	}
	b, err := p.bytes(addr, int(length))
	if err != nil {
		return "", err
	}
	return parseSockaddr(b), nil
}

// parseSockaddr names an IPv4 or IPv6 address and port ("" for any
// other address).
func parseSockaddr(b []byte) string {
	if len(b) < 2 {
		return ""
	}
	switch binary.NativeEndian.Uint16(b[0:2]) {
	case unix.AF_INET:
		if len(b) < 8 {
			return ""
		}
		port := binary.BigEndian.Uint16(b[2:4])
		return net.JoinHostPort(net.IP(b[4:8]).String(), strconv.Itoa(int(port)))
	case unix.AF_INET6:
		if len(b) < 24 {
			return ""
		}
		port := binary.BigEndian.Uint16(b[2:4])
		return net.JoinHostPort(net.IP(b[8:24]).String(), strconv.Itoa(int(port)))
	}
	return ""
}

// listening reports whether a loopback destination has a listening TCP
// socket in the network namespace of the sock_diag socket diag (none
// without a namespace of the run's own: then a connect is judged
// without it).
func (o *Observer) listening(diag *Diag, dest string) bool {
	ap, err := netip.ParseAddrPort(dest)
	if err != nil || !ap.Addr().Unmap().IsLoopback() || diag == nil {
		return false
	}
	ok, err := diag.ListensOn(ap.Port())
	if err != nil {
		o.log.Debug("observer: sock_diag", "err", err)
	}
	return ok
}
