package seccomp

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The filter is permanent, so every probe runs in a child copy of the test
// binary that installs it first (the go-landlock pattern).
const childEnv = "SANDBOXD_SECCOMP_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

type probe struct {
	name string
	call func(dir string) error
	want unix.Errno // 0 = success
}

func raw(nr uintptr, args ...uintptr) error {
	var a [6]uintptr
	copy(a[:], args)
	_, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	if e != 0 {
		return e
	}
	return nil
}

func socket(domain, typ, proto int) func(string) error {
	return func(string) error {
		fd, err := unix.Socket(domain, typ, proto)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
}

func socketpair(typ int) func(string) error {
	return func(string) error {
		fds, err := unix.Socketpair(unix.AF_UNIX, typ, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	}
}

func cstr(s string) uintptr {
	b, _ := unix.BytePtrFromString(s)
	return uintptr(unsafe.Pointer(b))
}

var probes = []probe{
	{"socket tcp4", socket(unix.AF_INET, unix.SOCK_STREAM, 0), 0},
	{"socket tcp4 nonblock cloexec", socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0), 0},
	{"socket tcp6 proto tcp", socket(unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_TCP), 0},
	{"socket udp4", socket(unix.AF_INET, unix.SOCK_DGRAM, 0), unix.EACCES},
	{"socket udp6 nonblock", socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK, 0), unix.EACCES},
	{"socket raw", socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP), unix.EACCES},
	{"socket mptcp", socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_MPTCP), unix.EACCES},
	{"socket sctp", socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP), unix.EACCES},
	{"socket unix", socket(unix.AF_UNIX, unix.SOCK_STREAM, 0), unix.EACCES},
	{"socket unix dgram", socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0), unix.EACCES},
	{"socket netlink", socket(unix.AF_NETLINK, unix.SOCK_RAW, 0), unix.EACCES},
	{"socket packet", socket(unix.AF_PACKET, unix.SOCK_RAW, 0), unix.EACCES},
	{"socket packet dgram", socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0), unix.EACCES},
	{"socket raw6", socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_NONBLOCK, unix.IPPROTO_ICMPV6), unix.EACCES},
	{"socket inet SOCK_PACKET", socket(unix.AF_INET, unix.SOCK_PACKET, 0), unix.EACCES},
	{"socket netlink route cloexec", socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE), unix.EACCES},
	{"socket netlink dgram", socket(unix.AF_NETLINK, unix.SOCK_DGRAM, unix.NETLINK_AUDIT), unix.EACCES},
	{"socket icmp dgram", socket(unix.AF_INET, unix.SOCK_DGRAM, unix.IPPROTO_ICMP), unix.EACCES},
	{"socket vsock", socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0), unix.EACCES},
	{"socket family 77", socket(77, unix.SOCK_STREAM, 0), unix.ENOSYS},
	{"socketpair unix", func(string) error {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	}, 0},
	{"socketpair unix seqpacket", socketpair(unix.SOCK_SEQPACKET | unix.SOCK_CLOEXEC), 0},
	{"socketpair unix dgram", socketpair(unix.SOCK_DGRAM), unix.EACCES},
	{"socketpair unix dgram cloexec", socketpair(unix.SOCK_DGRAM | unix.SOCK_CLOEXEC), unix.EACCES},
	{"setsockopt nodelay", func(string) error {
		fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		defer unix.Close(fd)
		return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	}, 0},
	{"setsockopt reuseaddr", func(string) error {
		fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		defer unix.Close(fd)
		return unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	}, 0},
	{"setsockopt fastopen connect", func(string) error {
		fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		defer unix.Close(fd)
		return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, tcpFastOpenConnect, 1)
	}, unix.EPERM},
	{"setsockopt fastopen", func(string) error {
		fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		defer unix.Close(fd)
		return unix.SetsockoptInt(fd, unix.IPPROTO_TCP, tcpFastOpen, 5)
	}, unix.EPERM},
	{"sendto fastopen", func(string) error {
		fd, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		defer unix.Close(fd)
		return unix.Sendto(fd, []byte("x"), unix.MSG_FASTOPEN, &unix.SockaddrInet4{Port: 9, Addr: [4]byte{127, 0, 0, 1}})
	}, unix.EPERM},
	{"ioctl FIONREAD", func(string) error {
		var p [2]int
		unix.Pipe(p[:])
		defer unix.Close(p[0])
		defer unix.Close(p[1])
		_, err := unix.IoctlGetInt(p[0], unix.TIOCINQ)
		return err
	}, 0},
	{"ioctl TIOCSTI", func(string) error { return raw(unix.SYS_IOCTL, 0, unix.TIOCSTI, 0) }, unix.EPERM},
	{"ioctl TIOCSTI high bits", func(string) error { return raw(unix.SYS_IOCTL, 0, 0x1_0000_0000|unix.TIOCSTI, 0) }, unix.EPERM},
	{"ioctl TIOCLINUX", func(string) error { return raw(unix.SYS_IOCTL, 0, unix.TIOCLINUX, 0) }, unix.EPERM},
	{"unshare user", func(string) error { return unix.Unshare(unix.CLONE_NEWUSER) }, unix.EPERM},
	{"setns", func(string) error { return raw(unix.SYS_SETNS, 0, 0) }, unix.EPERM},
	{"clone newuser", func(string) error { return raw(unix.SYS_CLONE, unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD)) }, unix.EPERM},
	{"clone newnet", func(string) error { return raw(unix.SYS_CLONE, unix.CLONE_NEWNET|uintptr(unix.SIGCHLD)) }, unix.EPERM},
	{"clone newns newpid", func(string) error {
		return raw(unix.SYS_CLONE, unix.CLONE_NEWNS|unix.CLONE_NEWPID|uintptr(unix.SIGCHLD))
	}, unix.EPERM},
	{"unshare net", func(string) error { return unix.Unshare(unix.CLONE_NEWNET) }, unix.EPERM},
	{"clone3", func(string) error { return raw(unix.SYS_CLONE3, 0, 0) }, unix.ENOSYS},
	{"openat2", func(string) error { return raw(unix.SYS_OPENAT2, 0, 0, 0, 0) }, unix.ENOSYS},
	{"io_uring_setup", func(string) error { return raw(unix.SYS_IO_URING_SETUP, 1, 0) }, unix.ENOSYS},
	{"keyctl", func(string) error { return raw(unix.SYS_KEYCTL, 0) }, unix.ENOSYS},
	{"add_key", func(string) error { return raw(unix.SYS_ADD_KEY, 0) }, unix.ENOSYS},
	{"landlock_create_ruleset", func(string) error { return raw(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1) }, unix.ENOSYS},
	{"landlock_restrict_self", func(string) error { return raw(unix.SYS_LANDLOCK_RESTRICT_SELF, 0, 0) }, unix.ENOSYS},
	{"mount", func(string) error { return unix.Mount("none", "/", "", unix.MS_REMOUNT, "") }, unix.EPERM},
	{"open_tree", func(string) error { return raw(unix.SYS_OPEN_TREE, ^uintptr(99), cstr("/"), 0) }, unix.EPERM},
	{"fsopen", func(string) error { return raw(unix.SYS_FSOPEN, cstr("tmpfs"), 0) }, unix.EPERM},
	{"ptrace", func(string) error { return raw(unix.SYS_PTRACE, unix.PTRACE_TRACEME) }, unix.EPERM},
	{"process_vm_readv", func(string) error { return raw(unix.SYS_PROCESS_VM_READV, 1) }, unix.EPERM},
	{"process_vm_writev", func(string) error { return raw(unix.SYS_PROCESS_VM_WRITEV, 1) }, unix.EPERM},
	{"pidfd_getfd", func(string) error { return raw(unix.SYS_PIDFD_GETFD, 0, 0, 0) }, unix.EPERM},
	{"kcmp", func(string) error { return raw(unix.SYS_KCMP, 1, 1, 0) }, unix.EPERM},
	{"umount2", func(string) error { return raw(unix.SYS_UMOUNT2, cstr("/"), 0) }, unix.EPERM},
	{"chroot", func(string) error { return raw(unix.SYS_CHROOT, cstr("/")) }, unix.EPERM},
	{"statmount", func(string) error { return raw(unix.SYS_STATMOUNT, 0, 0, 0, 0) }, unix.EPERM},
	{"bpf", func(string) error { return raw(unix.SYS_BPF, 0) }, unix.EPERM},
	{"perf_event_open", func(string) error { return raw(unix.SYS_PERF_EVENT_OPEN, 0) }, unix.EPERM},
	{"userfaultfd", func(string) error { return raw(unix.SYS_USERFAULTFD, 0) }, unix.EPERM},
	{"open_by_handle_at", func(string) error { return raw(unix.SYS_OPEN_BY_HANDLE_AT, 0) }, unix.EPERM},
	{"kexec_load", func(string) error { return raw(unix.SYS_KEXEC_LOAD, 0) }, unix.EPERM},
	{"init_module", func(string) error { return raw(unix.SYS_INIT_MODULE, 0) }, unix.EPERM},
	{"reboot", func(string) error { return raw(unix.SYS_REBOOT, 0) }, unix.EPERM},
	{"unknown syscall 1000", func(string) error { return raw(1000) }, unix.ENOSYS},
	{"personality query", func(string) error { return raw(unix.SYS_PERSONALITY, 0xffffffff) }, 0},
	{"personality no-randomize", func(string) error { return raw(unix.SYS_PERSONALITY, 0x0040000) }, unix.ENOSYS},
	{"chmod 0755", func(d string) error { return unix.Chmod(filepath.Join(d, "f"), 0o755) }, 0},
	{"chmod 4755", func(d string) error { return unix.Chmod(filepath.Join(d, "f"), 0o4755) }, unix.EPERM},
	{"chmod 2755", func(d string) error { return unix.Chmod(filepath.Join(d, "f"), 0o2755) }, unix.EPERM},
	{"fchmodat 4755", func(d string) error { return unix.Fchmodat(unix.AT_FDCWD, filepath.Join(d, "f"), 0o4755, 0) }, unix.EPERM},
	{"fchmodat2 6755", func(d string) error {
		return raw(unix.SYS_FCHMODAT2, ^uintptr(99), cstr(filepath.Join(d, "f")), 0o6755, 0)
	}, unix.EPERM},
	{"fchmod 4755", func(d string) error {
		fd, err := unix.Open(filepath.Join(d, "f"), unix.O_RDONLY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fchmod(fd, 0o4755)
	}, unix.EPERM},
	{"openat create 0644", func(d string) error {
		fd, err := unix.Open(filepath.Join(d, "g"), unix.O_CREAT|unix.O_WRONLY, 0o644)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}, 0},
	{"openat create 4755", func(d string) error {
		_, err := unix.Open(filepath.Join(d, "h"), unix.O_CREAT|unix.O_WRONLY, 0o4755)
		return err
	}, unix.EPERM},
	{"openat tmpfile 2755", func(d string) error {
		_, err := unix.Open(d, unix.O_TMPFILE|unix.O_WRONLY, 0o2755)
		return err
	}, unix.EPERM},
	{"openat read with garbage mode", func(d string) error {
		fd, err := unix.Open(filepath.Join(d, "f"), unix.O_RDONLY, 0o4755)
		if err == nil {
			unix.Close(fd)
		}
		return err
	}, 0},
	{"creat 4755", func(d string) error {
		return raw(unix.SYS_CREAT, cstr(filepath.Join(d, "i")), 0o4755)
	}, unix.EPERM},
	{"mknod fifo", func(d string) error { return unix.Mkfifo(filepath.Join(d, "fifo"), 0o644) }, 0},
	{"mknod chr", func(d string) error { return unix.Mknod(filepath.Join(d, "null"), unix.S_IFCHR|0o666, 0x103) }, unix.EPERM},
	{"mknod blk", func(d string) error { return unix.Mknod(filepath.Join(d, "blk"), unix.S_IFBLK|0o666, 0x800) }, unix.EPERM},
	{"fork via clone", func(string) error {
		cmd := exec.Command("/bin/true")
		return cmd.Run()
	}, 0},
}

type result struct {
	Name  string `json:"name"`
	Errno int    `json:"errno"`
	Other string `json:"other,omitempty"`
}

func child() int {
	prog, err := os.ReadFile(os.Getenv(childEnv))
	if err != nil {
		return 3
	}
	dir := os.Getenv("SANDBOXD_SECCOMP_TEST_DIR")
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 4
	}
	if os.Getenv("SANDBOXD_SECCOMP_TEST_OBSERVE") == "" && os.Getenv("SANDBOXD_SECCOMP_TEST_EXPLAIN") == "" {
		if err := Install(prog); err != nil {
			os.Stderr.WriteString(err.Error())
			return 5
		}
	}
	if os.Getenv("SANDBOXD_SECCOMP_TEST_OBSERVE") != "" {
		return observeChild(prog, dir)
	}
	if how := os.Getenv("SANDBOXD_SECCOMP_TEST_EXPLAIN"); how != "" {
		return explainChild(prog, dir, how == "gone")
	}
	if os.Getenv("SANDBOXD_SECCOMP_TEST_X32") != "" {
		// getpid through the x32 ABI: the filter must kill the process.
		unix.Syscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)
		return 0
	}
	var out []result
	for _, p := range probes {
		err := p.call(dir)
		r := result{Name: p.name}
		var errno unix.Errno
		if errors.As(err, &errno) {
			r.Errno = int(errno)
		} else if err != nil {
			r.Other = err.Error()
		}
		out = append(out, r)
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

func compiled(t *testing.T) string {
	t.Helper()
	prog, err := Compile(Build(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "filter.bpf")
	if err := os.WriteFile(p, prog, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFilterEffects(t *testing.T) {
	prog := compiled(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := runChild[result](t, childEnv+"="+prog, "SANDBOXD_SECCOMP_TEST_DIR="+dir)
	for i, p := range probes {
		r := got[i]
		if r.Other != "" {
			t.Errorf("%s: unexpected error %s", p.name, r.Other)
			continue
		}
		if unix.Errno(r.Errno) != p.want {
			t.Errorf("%s: errno %v (%d), want %v (%d)", p.name, unix.Errno(r.Errno), r.Errno, p.want, int(p.want))
		}
	}
	// Effects behind the errnos: no setuid file, no device node.
	for _, name := range []string{"h", "i", "null", "blk"} {
		if _, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s was created despite the filter", name)
		}
	}
	st, err := os.Stat(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("f mode %v carries setuid/setgid", st.Mode())
	}
}

func TestRulesValid(t *testing.T) {
	r := Build(Options{})
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if r.Key() != Build(Options{}).Key() {
		t.Fatal("key is not stable")
	}
	// Nothing refused may also be allowed unconditionally.
	allowed := map[int]bool{}
	for _, g := range allowedGroups {
		for _, nr := range g {
			if allowed[nr] {
				t.Errorf("syscall %d listed twice", nr)
			}
			allowed[nr] = true
		}
	}
	for _, ref := range refused {
		for _, nr := range ref.nrs {
			if allowed[nr] {
				t.Errorf("syscall %d is both allowed and refused (%s)", nr, ref.why)
			}
		}
	}
}

func TestX32IsKilled(t *testing.T) {
	prog := compiled(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+prog, "SANDBOXD_SECCOMP_TEST_X32=1")
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("x32 call returned normally (err=%v); the filter must kill it", err)
	}
	ws := exit.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
		t.Fatalf("x32 call ended with %v, want SIGSYS", err)
	}
}

// observeChild installs the observing filter with a listener answered by
// a goroutine of its own, makes a list of calls and prints which were
// observed (by name) and what each returned.
func observeChild(prog []byte, dir string) int {
	fd, err := InstallWithListener(prog)
	if err != nil {
		os.Stderr.WriteString(err.Error())
		return 6
	}
	l := NewListener(fd)
	seen := make(chan int, 64)
	go func() {
		for {
			n, ok, err := l.Receive(1000)
			if err != nil {
				return
			}
			if ok {
				seen <- n.Nr
				l.Continue(n.ID)
			}
		}
	}()
	p := filepath.Join(dir, "f")
	type step struct {
		name string
		call func() error
	}
	steps := []step{
		{"open read", func() error {
			f, err := os.Open(p)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"open write", func() error {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"open create", func() error {
			f, err := os.OpenFile(filepath.Join(dir, "new"), os.O_WRONLY|os.O_CREATE, 0o644)
			if err == nil {
				f.Close()
			}
			return err
		}},
		{"open create setuid", func() error {
			_, err := unix.Open(filepath.Join(dir, "suid"), unix.O_WRONLY|unix.O_CREAT, 0o4755)
			return err
		}},
		{"mkdir", func() error { return os.Mkdir(filepath.Join(dir, "d"), 0o755) }},
		{"chmod", func() error { return os.Chmod(p, 0o600) }},
		{"chmod setuid", func() error { return unix.Chmod(p, 0o4755) }},
		{"rename", func() error { return os.Rename(filepath.Join(dir, "new"), filepath.Join(dir, "new2")) }},
		{"unlink", func() error { return os.Remove(filepath.Join(dir, "new2")) }},
		{"connect", func() error {
			s, _ := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
			defer unix.Close(s)
			return unix.Connect(s, &unix.SockaddrInet4{Port: 1, Addr: [4]byte{127, 0, 0, 1}})
		}},
	}
	out := map[string]string{}
	for _, st := range steps {
		err := st.call()
		var names []string
		for {
			select {
			case nr := <-seen:
				names = append(names, strconv.Itoa(nr))
				continue
			case <-time.After(20 * time.Millisecond):
			}
			break
		}
		errs := "ok"
		if err != nil {
			errs = err.Error()
		}
		out[st.name] = strings.Join(names, ",") + "|" + errs
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

func TestObserveFilter(t *testing.T) {
	prog, err := Compile(Build(Options{Observe: true}))
	if err != nil {
		t.Fatal(err)
	}
	pf := filepath.Join(t.TempDir(), "observe.bpf")
	os.WriteFile(pf, prog, 0o600)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+pf, "SANDBOXD_SECCOMP_TEST_DIR="+dir, "SANDBOXD_SECCOMP_TEST_OBSERVE=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	nr := func(n int) string { return strconv.Itoa(n) }
	want := map[string]string{
		"open read":          "|ok",
		"open write":         nr(unix.SYS_OPENAT) + "|ok",
		"open create":        nr(unix.SYS_OPENAT) + "|ok",
		"open create setuid": "|operation not permitted",
		"mkdir":              nr(unix.SYS_MKDIRAT) + "|ok",
		"chmod":              nr(unix.SYS_FCHMODAT) + "|ok",
		"chmod setuid":       "|operation not permitted",
		"rename":             nr(unix.SYS_RENAMEAT) + "|ok",
		"unlink":             nr(unix.SYS_UNLINKAT) + "|ok",
		"connect":            nr(unix.SYS_CONNECT) + "|connection refused",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %q, want %q", k, got[k], w)
		}
	}
}

// TestUnixSocketsRules: with UnixSockets, unix stream and seqpacket
// sockets are allowed and every connect stops for the supervisor, with
// or without observing; no unix datagram socket is allowed either way.
func TestUnixSocketsRules(t *testing.T) {
	actions := func(r Rules, nr int, match func(Rule) bool) []Action {
		var out []Action
		for _, x := range r.List {
			if x.Nr == nr && match(x) {
				out = append(out, x.Action)
			}
		}
		return out
	}
	hasCond := func(x Rule, arg uint, v uint64) bool {
		for _, c := range x.Conds {
			if c.Arg == arg && c.Value == v {
				return true
			}
		}
		return false
	}
	for _, observe := range []bool{false, true} {
		r := Build(Options{UnixSockets: true, Observe: observe})
		if got := actions(r, unix.SYS_CONNECT, func(Rule) bool { return true }); len(got) != 1 || got[0] != Notify {
			t.Errorf("observe=%v: connect rules %v, want one Notify", observe, got)
		}
		for typ, want := range map[uint64]Action{unix.SOCK_STREAM: Allow, unix.SOCK_SEQPACKET: Allow, unix.SOCK_DGRAM: Errno} {
			got := actions(r, unix.SYS_SOCKET, func(x Rule) bool { return hasCond(x, 0, unix.AF_UNIX) && hasCond(x, 1, typ) })
			if len(got) == 0 {
				t.Errorf("observe=%v: no socket rule for unix type %d", observe, typ)
			}
			for _, a := range got {
				if a != want {
					t.Errorf("observe=%v: socket unix type %d: %v, want %v", observe, typ, a, want)
				}
			}
		}
		if _, err := Compile(r); err != nil {
			t.Fatalf("observe=%v: %v", observe, err)
		}
	}
	r := Build(Options{})
	if got := actions(r, unix.SYS_CONNECT, func(Rule) bool { return true }); len(got) != 1 || got[0] != Allow {
		t.Errorf("without UnixSockets: connect rules %v, want one Allow", got)
	}
}

// probeClass is the class each probe's call must be refused as (none:
// not a refusal class, answered by the filter itself).
var probeClass = map[string]string{
	"socket netlink": "netlink", "socket netlink route cloexec": "netlink", "socket netlink dgram": "netlink",
	"socket raw": "raw_socket", "socket raw6": "raw_socket", "socket packet": "raw_socket",
	"socket packet dgram": "raw_socket", "socket inet SOCK_PACKET": "raw_socket",
	"unshare user": "namespace", "unshare net": "namespace", "setns": "namespace", "clone newuser": "namespace",
	"clone newnet": "namespace", "clone newns newpid": "namespace",
	"ptrace": "ptrace", "process_vm_readv": "ptrace", "process_vm_writev": "ptrace", "pidfd_getfd": "ptrace",
	"mount": "mount", "open_tree": "mount", "fsopen": "mount", "umount2": "mount", "chroot": "mount",
}

type explained struct {
	result
	Classes []string `json:"classes"`
}

// explainChild installs a filter built with Explain and answers its
// notifications as the supervisor does (Refused: the class's errno,
// never the call itself), then runs every probe and prints what each
// returned and which classes were refused on the way. With gone, the
// listener is closed before any probe: the kernel then answers.
func explainChild(prog []byte, dir string, gone bool) int {
	fd, err := InstallWithListener(prog)
	if err != nil {
		os.Stderr.WriteString(err.Error())
		return 6
	}
	seen := make(chan string, 64)
	if gone {
		unix.Close(fd)
	} else {
		l := NewListener(fd)
		go func() {
			for {
				n, ok, err := l.Receive(1000)
				if err != nil {
					return
				}
				if !ok {
					continue
				}
				ref, errno, refused := Refused(n.Nr, n.Args)
				if !refused {
					seen <- "continued:" + strconv.Itoa(n.Nr)
					l.Continue(n.ID)
					continue
				}
				seen <- ref.Class // before the answer: the probe finds it
				l.Return(n.ID, errno)
			}
		}()
	}
	var out []explained
	for _, p := range probes {
		err := p.call(dir)
		r := explained{result: result{Name: p.name}, Classes: []string{}}
		var errno unix.Errno
		if errors.As(err, &errno) {
			r.Errno = int(errno)
		} else if err != nil {
			r.Other = err.Error()
		}
		for drained := false; !drained; {
			select {
			case c := <-seen:
				r.Classes = append(r.Classes, c)
			default:
				drained = true
			}
		}
		out = append(out, r)
	}
	json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

func runExplainChild(t *testing.T, how string) []explained {
	t.Helper()
	prog, err := Compile(Build(Options{Explain: true}))
	if err != nil {
		t.Fatal(err)
	}
	pf := filepath.Join(t.TempDir(), "explain.bpf")
	if err := os.WriteFile(pf, prog, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return runChild[explained](t, childEnv+"="+pf, "SANDBOXD_SECCOMP_TEST_DIR="+dir, "SANDBOXD_SECCOMP_TEST_EXPLAIN="+how)
}

// runChild runs this test binary as the filtered child with env added
// and decodes the one result per probe it prints as JSON.
func runChild[T any](t *testing.T, env ...string) []T {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var got []T
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("child output: %v\n%s", err, out)
	}
	if len(got) != len(probes) {
		t.Fatalf("got %d results, want %d", len(got), len(probes))
	}
	return got
}

// TestExplainFilter: with Explain, every call of a refusal class stops
// for the supervisor, which names its class, and the command sees
// exactly the errno the filter returns without Explain
// (TestFilterEffects' table); nothing else stops.
func TestExplainFilter(t *testing.T) {
	got := runExplainChild(t, "answer")
	for i, p := range probes {
		r := got[i]
		if r.Other != "" {
			t.Errorf("%s: unexpected error %s", p.name, r.Other)
			continue
		}
		if unix.Errno(r.Errno) != p.want {
			t.Errorf("%s: errno %v, want %v as without Explain", p.name, unix.Errno(r.Errno), p.want)
		}
		want := []string{}
		if c := probeClass[p.name]; c != "" {
			want = []string{c}
		}
		if strings.Join(r.Classes, ",") != strings.Join(want, ",") {
			t.Errorf("%s: refused as %q, want %q", p.name, r.Classes, want)
		}
	}
}

// TestExplainListenerGone: when nobody listens any more, the kernel
// fails a call of a refusal class with ENOSYS: it is still refused.
func TestExplainListenerGone(t *testing.T) {
	got := runExplainChild(t, "gone")
	for i, p := range probes {
		r := got[i]
		want := p.want
		if probeClass[p.name] != "" {
			want = unix.ENOSYS
		}
		if r.Other != "" || unix.Errno(r.Errno) != want {
			t.Errorf("%s: errno %v %s, want %v", p.name, unix.Errno(r.Errno), r.Other, want)
		}
	}
}

// TestRefusalRules: each class's calls are rules with its errno, or
// Notify with Explain, whatever else is on; no other rule of those calls
// stops (the supervisor answers every stop of them as a refusal); and
// Refused names the class of arguments the rules match.
func TestRefusalRules(t *testing.T) {
	classNr := map[int]bool{}
	for _, c := range refusalClasses {
		if c.Class == "" || c.What == "" || c.Why == "" || c.errno == 0 || len(c.calls) == 0 {
			t.Errorf("class %+v is incomplete", c.Refusal)
		}
		for _, k := range c.calls {
			classNr[k.nr] = true
		}
	}
	isClassRule := func(r Rule) (refusalClass, bool) {
		for _, c := range refusalClasses {
			for _, k := range c.calls {
				if k.nr == r.Nr && reflect.DeepEqual(k.conds, r.Conds) {
					return c, true
				}
			}
		}
		return refusalClass{}, false
	}
	for _, explain := range []bool{false, true} {
		for _, opts := range []Options{{}, {Observe: true}, {Observe: true, ObserveReads: true},
			{Observe: true, UnixSockets: true, UDP: true}, {UnixSockets: true}} {
			opts.Explain = explain
			r := Build(opts)
			if err := r.Validate(); err != nil {
				t.Fatalf("%+v: %v", opts, err)
			}
			n := 0
			for _, rule := range r.List {
				c, ok := isClassRule(rule)
				switch {
				case ok && explain && rule.Action != Notify:
					t.Errorf("%+v: %s %v: %v, want Notify", opts, rule.Name, rule.Conds, rule.Action)
				case ok && !explain && (rule.Action != Errno || rule.Errno != c.errno):
					t.Errorf("%+v: %s %v: %v %v, want errno %v", opts, rule.Name, rule.Conds, rule.Action, rule.Errno, c.errno)
				case !ok && classNr[rule.Nr] && rule.Action == Notify:
					t.Errorf("%+v: %s %v stops, but is not a refusal", opts, rule.Name, rule.Conds)
				}
				if ok {
					n++
				}
			}
			want := 0
			for _, c := range refusalClasses {
				want += len(c.calls)
			}
			if n != want {
				t.Errorf("%+v: %d class rules, want %d", opts, n, want)
			}
		}
	}
	if _, err := Compile(Build(Options{Observe: true, ObserveReads: true, UnixSockets: true, UDP: true, Explain: true})); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		nr    int
		args  [6]uint64
		class string
		errno unix.Errno
	}{
		{unix.SYS_SOCKET, [6]uint64{unix.AF_NETLINK, unix.SOCK_RAW | unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE}, "netlink", unix.EACCES},
		{unix.SYS_SOCKET, [6]uint64{unix.AF_INET6, unix.SOCK_RAW | unix.SOCK_NONBLOCK, unix.IPPROTO_ICMPV6}, "raw_socket", unix.EACCES},
		{unix.SYS_SOCKET, [6]uint64{unix.AF_PACKET, unix.SOCK_DGRAM, 0}, "raw_socket", unix.EACCES},
		{unix.SYS_CLONE, [6]uint64{unix.CLONE_NEWUSER | unix.CLONE_NEWNS | uint64(unix.SIGCHLD)}, "namespace", unix.EPERM},
		{unix.SYS_UNSHARE, [6]uint64{unix.CLONE_NEWUSER}, "namespace", unix.EPERM},
		{unix.SYS_PROCESS_VM_WRITEV, [6]uint64{1}, "ptrace", unix.EPERM},
		{unix.SYS_FSMOUNT, [6]uint64{}, "mount", unix.EPERM},
		// Arguments no rule stops: still a refusal, EPERM, no class.
		{unix.SYS_SOCKET, [6]uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, "", unix.EPERM},
		{unix.SYS_CLONE, [6]uint64{uint64(unix.SIGCHLD)}, "", unix.EPERM},
	} {
		ref, errno, refused := Refused(tc.nr, tc.args)
		if !refused || ref.Class != tc.class || errno != tc.errno {
			t.Errorf("Refused(%d, %v) = %q %v %v, want %q %v true", tc.nr, tc.args, ref.Class, errno, refused, tc.class, tc.errno)
		}
	}
	for _, nr := range []int{unix.SYS_CONNECT, unix.SYS_OPENAT, unix.SYS_CLONE3, unix.SYS_KCMP, unix.SYS_STATMOUNT} {
		if _, _, refused := Refused(nr, [6]uint64{}); refused {
			t.Errorf("Refused(%d): a refusal, want none", nr)
		}
	}
}
