package seccomp

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"

	"golang.org/x/sys/unix"
)

// Action is what the filter does with a matching system call.
type Action uint8

const (
	// Allow lets the call through to the kernel, which still applies
	// Landlock, mount flags and permissions.
	Allow Action = iota + 1
	// Errno fails the call with the rule's Errno.
	Errno
	// Notify stops the caller until the supervisor, listening on the
	// filter's notification descriptor, lets the call continue. It is
	// used to observe, never to decide: the kernel still enforces.
	Notify
)

// Op compares one system call argument.
type Op uint8

const (
	// Eq matches when arg == Value.
	Eq Op = iota + 1
	// MaskedEq matches when arg & Mask == Value.
	MaskedEq
	// Ne matches when arg != Value.
	Ne
	// Ge matches when arg >= Value (unsigned).
	Ge
)

// Cond is one argument comparison; all conditions of a rule must hold.
type Cond struct {
	Arg   uint   // argument index, 0-based
	Op    Op     // comparison
	Mask  uint64 // for MaskedEq
	Value uint64 // datum
}

// Rule is one entry of the filter. A call with no rule gets the default
// action (ENOSYS). A call may have several conditional rules; an
// unconditional rule must be its only rule, because libseccomp lets an
// unconditional rule override conditional ones.
type Rule struct {
	Nr     int    // x86_64 system call number
	Name   string // for messages and tests
	Action Action
	Errno  unix.Errno // for Errno
	Conds  []Cond
}

// Rules is a whole filter: its rules and its fixed defaults.
type Rules struct {
	List []Rule
}

// DefaultErrno is returned for every call the filter does not know, so a
// program probing a new system call falls back as it would on an old kernel.
const DefaultErrno = unix.ENOSYS

// Options select the few parts of the filter that vary between sandboxes.
type Options struct {
	// Observe turns every call that could write, create, remove, rename,
	// link or change metadata, and every connect, into a user
	// notification, so the supervisor learns exactly what was attempted
	// even where a read-only mount (EROFS) leaves no audit record.
	// Read-only opens are not observed.
	Observe bool
	// ObserveReads observes read-only opens and execs too: the detector
	// of denied reads and executions where kernel audit cannot be read
	// (unprivileged callers).
	ObserveReads bool
	// UnixSockets allows socket(AF_UNIX) for stream and seqpacket sockets
	// and stops every connect for the supervisor, which performs it itself
	// (see package detect): a pathname connect then reaches only a socket
	// of the run's own. Only with a network namespace of the run's own,
	// whose sockets are the run's.
	UnixSockets bool
	// UDP allows UDP sockets (socket(AF_INET/AF_INET6, SOCK_DGRAM) with
	// protocol 0 or IPPROTO_UDP). Only with a network namespace of the
	// run's own whose netfilter rules drop every datagram but those to
	// and from its stub resolver (see sandbox/confine).
	UDP bool
	// Explain stops every call of a class the filter refuses by design
	// (refusals.go: netlink, raw and packet sockets, new namespaces,
	// ptrace, mounts) for the supervisor, which fails it with the errno
	// the filter would have returned (see Refused) and records its
	// class, so sandboxd can say why a tool was refused. Only those
	// argument combinations stop, never a call that is allowed. Should
	// the listener be gone, the kernel fails a stopped call with ENOSYS:
	// still refused.
	Explain bool
}

// observed are the calls Observe reports (open and openat are split by
// their flags in observeOpen).
var observed = map[int]bool{
	unix.SYS_CREAT: true, unix.SYS_MKDIR: true, unix.SYS_MKDIRAT: true,
	unix.SYS_UNLINK: true, unix.SYS_UNLINKAT: true, unix.SYS_RMDIR: true,
	unix.SYS_RENAME: true, unix.SYS_RENAMEAT: true, unix.SYS_RENAMEAT2: true,
	unix.SYS_LINK: true, unix.SYS_LINKAT: true, unix.SYS_SYMLINK: true, unix.SYS_SYMLINKAT: true,
	unix.SYS_MKNOD: true, unix.SYS_MKNODAT: true,
	unix.SYS_CHMOD: true, unix.SYS_FCHMOD: true, unix.SYS_FCHMODAT: true, unix.SYS_FCHMODAT2: true,
	unix.SYS_CHOWN: true, unix.SYS_FCHOWN: true, unix.SYS_LCHOWN: true, unix.SYS_FCHOWNAT: true,
	unix.SYS_UTIME: true, unix.SYS_UTIMES: true, unix.SYS_UTIMENSAT: true, unix.SYS_FUTIMESAT: true,
	unix.SYS_SETXATTR: true, unix.SYS_LSETXATTR: true, unix.SYS_FSETXATTR: true,
	unix.SYS_REMOVEXATTR: true, unix.SYS_LREMOVEXATTR: true, unix.SYS_FREMOVEXATTR: true,
	unix.SYS_SETXATTRAT: true, unix.SYS_REMOVEXATTRAT: true,
	unix.SYS_TRUNCATE: true, unix.SYS_FTRUNCATE: true,
	unix.SYS_CONNECT: true,
	// A new inotify instance: the command watches files (a dev server, a
	// test watcher), which a copy-on-write layer affects. One call per
	// watcher, not per watch.
	unix.SYS_INOTIFY_INIT: true, unix.SYS_INOTIFY_INIT1: true,
}

// createBits are the open flags that create a file.
const createBits = unix.O_CREAT | (unix.O_TMPFILE &^ unix.O_DIRECTORY)

// observeOpen replaces the allow rules of open (flags at argument fa,
// mode at fa+1) with: read-only opens allowed, every writing, truncating
// or creating open observed. Each rule is a single masked comparison per
// argument, and the rules of different actions never overlap (the
// setuid/setgid refusals need a creation flag and a mode bit, which the
// observed creations exclude).
func observeOpen(nr int, name string, fa uint) []Rule {
	masked := func(arg uint, mask, v uint64) Cond { return Cond{Arg: arg, Op: MaskedEq, Mask: mask, Value: v} }
	r := func(a Action, conds ...Cond) Rule { return Rule{Nr: nr, Name: name, Action: a, Conds: conds} }
	return []Rule{
		r(Allow, masked(fa, createBits|unix.O_WRONLY|unix.O_RDWR|unix.O_TRUNC, 0)),
		r(Notify, masked(fa, createBits|unix.O_WRONLY, unix.O_WRONLY)),
		r(Notify, masked(fa, createBits|unix.O_RDWR, unix.O_RDWR)),
		r(Notify, masked(fa, createBits|unix.O_TRUNC, unix.O_TRUNC)),
		r(Notify, masked(fa, unix.O_CREAT, unix.O_CREAT), masked(fa+1, privModeBits, 0)),
		r(Notify, masked(fa, unix.O_TMPFILE&^unix.O_DIRECTORY, unix.O_TMPFILE&^unix.O_DIRECTORY), masked(fa+1, privModeBits, 0)),
	}
}

// Mode bits that must never be set by the sandbox.
const privModeBits = unix.S_ISUID | unix.S_ISGID

// TCP socket options that enable Fast Open, which sends data in the SYN and
// is not covered by Landlock's connect rules on this kernel.
const (
	tcpFastOpen        = 23 // TCP_FASTOPEN
	tcpFastOpenConnect = 30 // TCP_FASTOPEN_CONNECT
)

// allowed is the unconditional allow list, grouped as a reader would look
// for a call. Calls with argument checks are in conditional().
var allowedGroups = [][]int{
	// files and descriptors
	{unix.SYS_READ, unix.SYS_WRITE, unix.SYS_READV, unix.SYS_WRITEV, unix.SYS_PREAD64,
		unix.SYS_PWRITE64, unix.SYS_PREADV, unix.SYS_PWRITEV, unix.SYS_PREADV2,
		unix.SYS_PWRITEV2, unix.SYS_CLOSE, unix.SYS_CLOSE_RANGE, unix.SYS_LSEEK,
		unix.SYS_DUP, unix.SYS_DUP2, unix.SYS_DUP3, unix.SYS_FCNTL, unix.SYS_FLOCK,
		unix.SYS_FSYNC, unix.SYS_FDATASYNC, unix.SYS_SYNC, unix.SYS_SYNCFS,
		unix.SYS_SYNC_FILE_RANGE, unix.SYS_FTRUNCATE, unix.SYS_TRUNCATE,
		unix.SYS_FALLOCATE, unix.SYS_FADVISE64, unix.SYS_READAHEAD, unix.SYS_SENDFILE,
		unix.SYS_SPLICE, unix.SYS_TEE, unix.SYS_VMSPLICE, unix.SYS_COPY_FILE_RANGE,
		unix.SYS_STAT, unix.SYS_FSTAT, unix.SYS_LSTAT, unix.SYS_NEWFSTATAT, unix.SYS_STATX,
		unix.SYS_STATFS, unix.SYS_FSTATFS, unix.SYS_ACCESS, unix.SYS_FACCESSAT,
		unix.SYS_FACCESSAT2, unix.SYS_READLINK, unix.SYS_READLINKAT, unix.SYS_GETDENTS,
		unix.SYS_GETDENTS64, unix.SYS_GETCWD, unix.SYS_CHDIR, unix.SYS_FCHDIR,
		unix.SYS_MKDIR, unix.SYS_MKDIRAT, unix.SYS_RMDIR, unix.SYS_UNLINK, unix.SYS_UNLINKAT,
		unix.SYS_RENAME, unix.SYS_RENAMEAT, unix.SYS_RENAMEAT2, unix.SYS_LINK, unix.SYS_LINKAT,
		unix.SYS_SYMLINK, unix.SYS_SYMLINKAT, unix.SYS_CHOWN, unix.SYS_FCHOWN,
		unix.SYS_LCHOWN, unix.SYS_FCHOWNAT, unix.SYS_UTIME, unix.SYS_UTIMES,
		unix.SYS_UTIMENSAT, unix.SYS_FUTIMESAT, unix.SYS_UMASK, unix.SYS_NAME_TO_HANDLE_AT,
		unix.SYS_MEMFD_CREATE, unix.SYS_INOTIFY_INIT, unix.SYS_INOTIFY_INIT1,
		unix.SYS_INOTIFY_ADD_WATCH, unix.SYS_INOTIFY_RM_WATCH, unix.SYS_PIPE, unix.SYS_PIPE2,
		unix.SYS_CACHESTAT},
	// extended attributes: writing security.* and trusted.* needs capabilities
	// the sandbox does not have, and every path outside the writable roots
	// is on a read-only mount.
	{unix.SYS_SETXATTR, unix.SYS_LSETXATTR, unix.SYS_FSETXATTR, unix.SYS_GETXATTR,
		unix.SYS_LGETXATTR, unix.SYS_FGETXATTR, unix.SYS_LISTXATTR, unix.SYS_LLISTXATTR,
		unix.SYS_FLISTXATTR, unix.SYS_REMOVEXATTR, unix.SYS_LREMOVEXATTR,
		unix.SYS_FREMOVEXATTR, unix.SYS_SETXATTRAT, unix.SYS_GETXATTRAT,
		unix.SYS_LISTXATTRAT, unix.SYS_REMOVEXATTRAT},
	// waiting and events
	{unix.SYS_SELECT, unix.SYS_PSELECT6, unix.SYS_POLL, unix.SYS_PPOLL,
		unix.SYS_EPOLL_CREATE, unix.SYS_EPOLL_CREATE1, unix.SYS_EPOLL_CTL,
		unix.SYS_EPOLL_WAIT, unix.SYS_EPOLL_PWAIT, unix.SYS_EPOLL_PWAIT2, unix.SYS_EVENTFD,
		unix.SYS_EVENTFD2, unix.SYS_SIGNALFD, unix.SYS_SIGNALFD4, unix.SYS_TIMERFD_CREATE,
		unix.SYS_TIMERFD_SETTIME, unix.SYS_TIMERFD_GETTIME},
	// memory
	{unix.SYS_MMAP, unix.SYS_MUNMAP, unix.SYS_MPROTECT, unix.SYS_MREMAP, unix.SYS_MSYNC,
		unix.SYS_MINCORE, unix.SYS_MADVISE, unix.SYS_BRK, unix.SYS_MLOCK, unix.SYS_MLOCK2,
		unix.SYS_MUNLOCK, unix.SYS_MLOCKALL, unix.SYS_MUNLOCKALL, unix.SYS_MEMBARRIER,
		unix.SYS_PKEY_ALLOC, unix.SYS_PKEY_FREE, unix.SYS_PKEY_MPROTECT,
		unix.SYS_GET_MEMPOLICY, unix.SYS_SET_MEMPOLICY, unix.SYS_MBIND,
		unix.SYS_SET_MEMPOLICY_HOME_NODE, unix.SYS_MAP_SHADOW_STACK, unix.SYS_MSEAL,
		unix.SYS_REMAP_FILE_PAGES},
	// processes, threads, credentials (a single-id user namespace and no
	// capabilities leave nothing to change to), scheduling, limits
	{unix.SYS_FORK, unix.SYS_VFORK, unix.SYS_EXECVE, unix.SYS_EXECVEAT, unix.SYS_EXIT,
		unix.SYS_EXIT_GROUP, unix.SYS_WAIT4, unix.SYS_WAITID, unix.SYS_KILL, unix.SYS_TKILL,
		unix.SYS_TGKILL, unix.SYS_RT_SIGQUEUEINFO, unix.SYS_RT_TGSIGQUEUEINFO,
		unix.SYS_PIDFD_OPEN, unix.SYS_PIDFD_SEND_SIGNAL, unix.SYS_GETPID, unix.SYS_GETPPID,
		unix.SYS_GETTID, unix.SYS_GETPGID, unix.SYS_SETPGID, unix.SYS_GETPGRP,
		unix.SYS_GETSID, unix.SYS_SETSID, unix.SYS_GETUID, unix.SYS_GETEUID, unix.SYS_GETGID,
		unix.SYS_GETEGID, unix.SYS_GETRESUID, unix.SYS_GETRESGID, unix.SYS_GETGROUPS,
		unix.SYS_SETUID, unix.SYS_SETGID, unix.SYS_SETREUID, unix.SYS_SETREGID,
		unix.SYS_SETRESUID, unix.SYS_SETRESGID, unix.SYS_SETGROUPS, unix.SYS_SETFSUID,
		unix.SYS_SETFSGID, unix.SYS_CAPGET, unix.SYS_CAPSET, unix.SYS_PRCTL,
		unix.SYS_ARCH_PRCTL, unix.SYS_GETPRIORITY, unix.SYS_SETPRIORITY,
		unix.SYS_SCHED_YIELD, unix.SYS_SCHED_GETAFFINITY, unix.SYS_SCHED_SETAFFINITY,
		unix.SYS_SCHED_GETPARAM, unix.SYS_SCHED_SETPARAM, unix.SYS_SCHED_GETSCHEDULER,
		unix.SYS_SCHED_SETSCHEDULER, unix.SYS_SCHED_GET_PRIORITY_MAX,
		unix.SYS_SCHED_GET_PRIORITY_MIN, unix.SYS_SCHED_RR_GET_INTERVAL,
		unix.SYS_SCHED_GETATTR, unix.SYS_SCHED_SETATTR, unix.SYS_GETRLIMIT,
		unix.SYS_SETRLIMIT, unix.SYS_PRLIMIT64, unix.SYS_GETRUSAGE, unix.SYS_TIMES,
		unix.SYS_SYSINFO, unix.SYS_UNAME, unix.SYS_SET_TID_ADDRESS, unix.SYS_SET_ROBUST_LIST,
		unix.SYS_GET_ROBUST_LIST, unix.SYS_FUTEX, unix.SYS_FUTEX_WAITV, unix.SYS_FUTEX_WAKE,
		unix.SYS_FUTEX_WAIT, unix.SYS_FUTEX_REQUEUE, unix.SYS_RSEQ, unix.SYS_RESTART_SYSCALL,
		unix.SYS_GETRANDOM, unix.SYS_IOPRIO_GET, unix.SYS_IOPRIO_SET, unix.SYS_GETCPU,
		// adding a filter only ever narrows what a process may do
		unix.SYS_SECCOMP},
	// signals and time
	{unix.SYS_RT_SIGACTION, unix.SYS_RT_SIGPROCMASK, unix.SYS_RT_SIGRETURN,
		unix.SYS_RT_SIGSUSPEND, unix.SYS_RT_SIGPENDING, unix.SYS_RT_SIGTIMEDWAIT,
		unix.SYS_SIGALTSTACK, unix.SYS_PAUSE, unix.SYS_ALARM, unix.SYS_NANOSLEEP,
		unix.SYS_CLOCK_NANOSLEEP, unix.SYS_CLOCK_GETTIME, unix.SYS_CLOCK_GETRES,
		unix.SYS_GETTIMEOFDAY, unix.SYS_TIME, unix.SYS_GETITIMER, unix.SYS_SETITIMER,
		unix.SYS_TIMER_CREATE, unix.SYS_TIMER_SETTIME, unix.SYS_TIMER_GETTIME,
		unix.SYS_TIMER_GETOVERRUN, unix.SYS_TIMER_DELETE},
	// sockets once created (creation is checked in conditional())
	{unix.SYS_CONNECT, unix.SYS_ACCEPT, unix.SYS_ACCEPT4, unix.SYS_BIND, unix.SYS_LISTEN,
		unix.SYS_GETSOCKNAME, unix.SYS_GETPEERNAME, unix.SYS_RECVFROM, unix.SYS_RECVMSG,
		unix.SYS_RECVMMSG, unix.SYS_SHUTDOWN, unix.SYS_GETSOCKOPT},
	// System V and POSIX IPC, private to the sandbox's IPC namespace
	{unix.SYS_SHMGET, unix.SYS_SHMAT, unix.SYS_SHMCTL, unix.SYS_SHMDT, unix.SYS_SEMGET,
		unix.SYS_SEMOP, unix.SYS_SEMTIMEDOP, unix.SYS_SEMCTL, unix.SYS_MSGGET,
		unix.SYS_MSGSND, unix.SYS_MSGRCV, unix.SYS_MSGCTL, unix.SYS_MQ_OPEN,
		unix.SYS_MQ_UNLINK, unix.SYS_MQ_TIMEDSEND, unix.SYS_MQ_TIMEDRECEIVE,
		unix.SYS_MQ_NOTIFY, unix.SYS_MQ_GETSETATTR},
	// legacy asynchronous I/O (not io_uring)
	{unix.SYS_IO_SETUP, unix.SYS_IO_DESTROY, unix.SYS_IO_GETEVENTS, unix.SYS_IO_SUBMIT,
		unix.SYS_IO_CANCEL, unix.SYS_IO_PGETEVENTS},
}

// refused lists calls that get a specific errno rather than the default,
// with the reason a reader would ask for. The classes refused by design
// that sandboxd explains (new namespaces, ptrace, mounts, netlink, raw
// sockets) are in refusals.go.
var refused = []struct {
	nrs   []int
	errno unix.Errno
	why   string
}{
	{[]int{unix.SYS_CLONE3}, unix.ENOSYS, "flags are behind a pointer; libc falls back to clone"},
	{[]int{unix.SYS_OPENAT2}, unix.ENOSYS, "mode is behind a pointer; libc falls back to openat"},
	{[]int{unix.SYS_STATMOUNT, unix.SYS_LISTMOUNT}, unix.EPERM, "the mount tree is fixed (changing it is a refusal class)"},
	{[]int{unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER},
		unix.ENOSYS, "io_uring bypasses per-call checks; programs fall back"},
	{[]int{unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY}, unix.ENOSYS,
		"the key retention service is not namespaced"},
	{[]int{unix.SYS_LANDLOCK_CREATE_RULESET, unix.SYS_LANDLOCK_ADD_RULE,
		unix.SYS_LANDLOCK_RESTRICT_SELF}, unix.ENOSYS,
		"a nested domain could hide the command's denials from the audit log"},
	{[]int{unix.SYS_PROCESS_MADVISE, unix.SYS_KCMP}, unix.EPERM,
		"no inspection of other processes (ptrace and the rest are a refusal class)"},
	{[]int{unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
		unix.SYS_FANOTIFY_INIT, unix.SYS_OPEN_BY_HANDLE_AT}, unix.EPERM,
		"kernel attack surface or a way around path checks"},
	{[]int{unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE,
		unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE, unix.SYS_REBOOT, unix.SYS_SWAPON,
		unix.SYS_SWAPOFF, unix.SYS_ACCT, unix.SYS_SYSLOG, unix.SYS_SETTIMEOFDAY,
		unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX, unix.SYS_IOPL,
		unix.SYS_IOPERM, unix.SYS_MODIFY_LDT, unix.SYS_SETHOSTNAME, unix.SYS_SETDOMAINNAME,
		unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD, unix.SYS_VHANGUP, unix.SYS_MIGRATE_PAGES,
		unix.SYS_MOVE_PAGES}, unix.EPERM, "administration of the machine"},
}

// nsFlags are the clone flags that create namespaces. CLONE_NEWTIME shares
// its bit with the exit signal in clone(2) and is only reachable via clone3,
// which is refused.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

// conditional returns the rules that look at arguments, in the order the
// filter gets them.
func conditional(opts Options) []Rule {
	var l ruleList
	l.cloneRules()
	l.socketRules(opts.UnixSockets, opts.UDP)
	l.fastOpenRules()
	l.ioctlRules()
	l.personalityRules()
	l.modeRules()
	l.mknodRules()
	return l.out
}

// ruleList collects conditional rules in order.
type ruleList struct{ out []Rule }

func (l *ruleList) allow(nr int, name string, conds ...Cond) {
	l.out = append(l.out, Rule{Nr: nr, Name: name, Action: Allow, Conds: conds})
}

func (l *ruleList) deny(nr int, name string, errno unix.Errno, conds ...Cond) {
	l.out = append(l.out, Rule{Nr: nr, Name: name, Action: Errno, Errno: errno, Conds: conds})
}

func eq(arg uint, v uint64) Cond { return Cond{Arg: arg, Op: Eq, Value: v} }

func masked(arg uint, mask, v uint64) Cond { return Cond{Arg: arg, Op: MaskedEq, Mask: mask, Value: v} }

// cloneRules: clone makes threads and processes, never namespaces (the
// namespace flags are a refusal class).
func (l *ruleList) cloneRules() {
	l.allow(unix.SYS_CLONE, "clone", masked(0, nsFlags, 0))
}

// socketRules: socket makes TCP over IPv4 and IPv6 only, and, with
// unixSockets, unix stream and seqpacket sockets.
//
// No unix datagram socket exists inside, from socket or socketpair: a
// datagram socket sends to any pathname socket named in sendto or in
// sendmsg's msghdr, which a filter cannot read; a stream socket refuses
// an address there (EISCONN, EOPNOTSUPP) and a seqpacket socket ignores
// it, so a pathname is reached only through connect, which the
// supervisor performs.
func (l *ruleList) socketRules(unixSockets, udp bool) {
	// The type's low 4 bits are the socket type; SOCK_NONBLOCK and
	// SOCK_CLOEXEC sit above them.
	for _, family := range []uint64{unix.AF_INET, unix.AF_INET6} {
		for _, proto := range []uint64{0, unix.IPPROTO_TCP} {
			l.allow(unix.SYS_SOCKET, "socket", eq(0, family), masked(1, 0xf, unix.SOCK_STREAM), eq(2, proto))
		}
		if udp {
			for _, proto := range []uint64{0, unix.IPPROTO_UDP} {
				l.allow(unix.SYS_SOCKET, "socket", eq(0, family), masked(1, 0xf, unix.SOCK_DGRAM), eq(2, proto))
			}
			l.deny(unix.SYS_SOCKET, "socket", unix.EACCES, eq(0, family), masked(1, 0xf, unix.SOCK_DGRAM), eq(2, unix.IPPROTO_UDPLITE))
			l.deny(unix.SYS_SOCKET, "socket", unix.EACCES, eq(0, family), masked(1, 0xf, unix.SOCK_DGRAM), eq(2, unix.IPPROTO_ICMP))
			l.deny(unix.SYS_SOCKET, "socket", unix.EACCES, eq(0, family), masked(1, 0xf, unix.SOCK_DGRAM), eq(2, unix.IPPROTO_ICMPV6))
		}
	}
	// Everything else gets a clear EACCES instead of ENOSYS, so programs
	// report "permission denied" rather than "not implemented". Netlink,
	// packet and raw sockets are a refusal class (same errno).
	for _, family := range []uint64{unix.AF_VSOCK, unix.AF_BLUETOOTH, unix.AF_ALG, unix.AF_KEY, unix.AF_XDP,
		unix.AF_APPLETALK, unix.AF_AX25, unix.AF_X25, unix.AF_TIPC, unix.AF_RDS,
		unix.AF_CAN, unix.AF_QIPCRTR, unix.AF_NFC, unix.AF_SMC, unix.AF_MCTP} {
		l.deny(unix.SYS_SOCKET, "socket", unix.EACCES, eq(0, family))
	}
	for _, family := range []uint64{unix.AF_INET, unix.AF_INET6} {
		for _, typ := range []uint64{unix.SOCK_DGRAM, unix.SOCK_RDM, unix.SOCK_SEQPACKET, unix.SOCK_DCCP} {
			if typ == unix.SOCK_DGRAM && udp {
				continue
			}
			l.deny(unix.SYS_SOCKET, "socket", unix.EACCES, eq(0, family), masked(1, 0xf, typ))
		}
		for _, proto := range []uint64{unix.IPPROTO_MPTCP, unix.IPPROTO_SCTP, unix.IPPROTO_UDP,
			unix.IPPROTO_UDPLITE} {
			l.deny(unix.SYS_SOCKET, "socket", unix.EACCES, eq(0, family), masked(1, 0xf, unix.SOCK_STREAM), eq(2, proto))
		}
	}
	// unix: stream and seqpacket (protocol 0 or PF_UNIX, the only ones
	// the kernel takes), when allowed; socketpair makes the same types
	// always (connected to each other, they never leave the sandbox).
	for _, typ := range []uint64{unix.SOCK_STREAM, unix.SOCK_SEQPACKET} {
		for _, proto := range []uint64{0, unix.AF_UNIX} {
			if unixSockets {
				l.allow(unix.SYS_SOCKET, "socket", eq(0, unix.AF_UNIX), masked(1, 0xf, typ), eq(2, proto))
			} else {
				l.deny(unix.SYS_SOCKET, "socket", unix.EACCES, eq(0, unix.AF_UNIX), masked(1, 0xf, typ), eq(2, proto))
			}
			l.allow(unix.SYS_SOCKETPAIR, "socketpair", eq(0, unix.AF_UNIX), masked(1, 0xf, typ), eq(2, proto))
		}
	}
	for _, typ := range []uint64{unix.SOCK_DGRAM, unix.SOCK_RAW, unix.SOCK_RDM, unix.SOCK_PACKET} {
		l.deny(unix.SYS_SOCKET, "socket", unix.EACCES, eq(0, unix.AF_UNIX), masked(1, 0xf, typ))
		l.deny(unix.SYS_SOCKETPAIR, "socketpair", unix.EACCES, eq(0, unix.AF_UNIX), masked(1, 0xf, typ))
	}
}

// fastOpenRules: no TCP Fast Open, which puts data in the SYN.
func (l *ruleList) fastOpenRules() {
	l.allow(unix.SYS_SENDTO, "sendto", masked(3, unix.MSG_FASTOPEN, 0))
	l.deny(unix.SYS_SENDTO, "sendto", unix.EPERM, masked(3, unix.MSG_FASTOPEN, unix.MSG_FASTOPEN))
	l.allow(unix.SYS_SENDMSG, "sendmsg", masked(2, unix.MSG_FASTOPEN, 0))
	l.deny(unix.SYS_SENDMSG, "sendmsg", unix.EPERM, masked(2, unix.MSG_FASTOPEN, unix.MSG_FASTOPEN))
	l.allow(unix.SYS_SENDMMSG, "sendmmsg", masked(3, unix.MSG_FASTOPEN, 0))
	l.deny(unix.SYS_SENDMMSG, "sendmmsg", unix.EPERM, masked(3, unix.MSG_FASTOPEN, unix.MSG_FASTOPEN))
	// setsockopt: everything except the two Fast Open options at the TCP
	// level. A rule cannot say "optname not in {a, b}", so the TCP level is
	// allowed option by option (TCP options are numbered densely below 64).
	l.allow(unix.SYS_SETSOCKOPT, "setsockopt", Cond{Arg: 1, Op: Ne, Value: unix.IPPROTO_TCP})
	for opt := uint64(0); opt < 64; opt++ {
		if opt == tcpFastOpen || opt == tcpFastOpenConnect {
			continue
		}
		l.allow(unix.SYS_SETSOCKOPT, "setsockopt", eq(1, unix.IPPROTO_TCP), eq(2, opt))
	}
	l.deny(unix.SYS_SETSOCKOPT, "setsockopt", unix.EPERM, eq(1, unix.IPPROTO_TCP), eq(2, tcpFastOpen))
	l.deny(unix.SYS_SETSOCKOPT, "setsockopt", unix.EPERM, eq(1, unix.IPPROTO_TCP), eq(2, tcpFastOpenConnect))
}

// ioctlRules: ioctl does all but terminal input injection and the Linux
// console multiplexer.
func (l *ruleList) ioctlRules() {
	// Only the low 32 bits of the request are meaningful to the kernel,
	// so both checks mask the argument. The allow rule matches every
	// request (arg >= 0). libseccomp evaluates the equality checks before
	// a range check on the same argument, so the errno rules win where
	// they overlap; an unconditional or mask-0 allow would win instead.
	// The package tests prove the order.
	l.deny(unix.SYS_IOCTL, "ioctl", unix.EPERM, masked(1, 0xffffffff, unix.TIOCSTI))
	l.deny(unix.SYS_IOCTL, "ioctl", unix.EPERM, masked(1, 0xffffffff, unix.TIOCLINUX))
	l.allow(unix.SYS_IOCTL, "ioctl", Cond{Arg: 1, Op: Ge, Value: 0})
}

// personalityRules: personality takes the values Docker allows;
// ADDR_NO_RANDOMIZE and friends stay off.
func (l *ruleList) personalityRules() {
	for _, p := range []uint64{0x0, 0x8, 0x20000, 0x20008, 0xffffffff} {
		l.allow(unix.SYS_PERSONALITY, "personality", eq(0, p))
	}
}

// modeRules: no setuid/setgid bits, on chmod or on creation.
func (l *ruleList) modeRules() {
	for _, bit := range []uint64{unix.S_ISUID, unix.S_ISGID} {
		l.deny(unix.SYS_CHMOD, "chmod", unix.EPERM, masked(1, bit, bit))
		l.deny(unix.SYS_FCHMOD, "fchmod", unix.EPERM, masked(1, bit, bit))
		l.deny(unix.SYS_FCHMODAT, "fchmodat", unix.EPERM, masked(2, bit, bit))
		l.deny(unix.SYS_FCHMODAT2, "fchmodat2", unix.EPERM, masked(2, bit, bit))
		l.deny(unix.SYS_CREAT, "creat", unix.EPERM, masked(1, bit, bit))
		for _, create := range []uint64{unix.O_CREAT, unix.O_TMPFILE &^ unix.O_DIRECTORY} {
			l.deny(unix.SYS_OPEN, "open", unix.EPERM, masked(1, create, create), masked(2, bit, bit))
			l.deny(unix.SYS_OPENAT, "openat", unix.EPERM, masked(2, create, create), masked(3, bit, bit))
		}
	}
	for _, nr := range []struct {
		nr   int
		name string
		arg  uint
	}{{unix.SYS_CHMOD, "chmod", 1}, {unix.SYS_FCHMOD, "fchmod", 1}, {unix.SYS_FCHMODAT, "fchmodat", 2},
		{unix.SYS_FCHMODAT2, "fchmodat2", 2}, {unix.SYS_CREAT, "creat", 1}} {
		l.allow(nr.nr, nr.name, masked(nr.arg, privModeBits, 0))
	}
	l.allow(unix.SYS_OPEN, "open", masked(2, privModeBits, 0))
	l.allow(unix.SYS_OPEN, "open", masked(1, unix.O_CREAT|(unix.O_TMPFILE&^unix.O_DIRECTORY), 0))
	l.allow(unix.SYS_OPENAT, "openat", masked(3, privModeBits, 0))
	l.allow(unix.SYS_OPENAT, "openat", masked(2, unix.O_CREAT|(unix.O_TMPFILE&^unix.O_DIRECTORY), 0))
}

// mknodRules: mknod makes FIFOs and sockets, never devices.
func (l *ruleList) mknodRules() {
	for _, typ := range []uint64{unix.S_IFCHR, unix.S_IFBLK} {
		l.deny(unix.SYS_MKNOD, "mknod", unix.EPERM, masked(1, unix.S_IFMT, typ))
		l.deny(unix.SYS_MKNODAT, "mknodat", unix.EPERM, masked(2, unix.S_IFMT, typ))
	}
	for _, typ := range []uint64{unix.S_IFIFO, unix.S_IFREG, unix.S_IFSOCK, 0} {
		l.allow(unix.SYS_MKNOD, "mknod", masked(1, unix.S_IFMT|privModeBits, typ))
		l.allow(unix.SYS_MKNODAT, "mknodat", masked(2, unix.S_IFMT|privModeBits, typ))
	}
}

// Build returns the filter for opts.
func Build(opts Options) Rules {
	var list []Rule
	for _, group := range allowedGroups {
		for _, nr := range group {
			list = append(list, Rule{Nr: nr, Action: Allow})
		}
	}
	for _, r := range refused {
		for _, nr := range r.nrs {
			list = append(list, Rule{Nr: nr, Action: Errno, Errno: r.errno})
		}
	}
	list = append(list, conditional(opts)...)
	list = append(list, refusalRules(opts.Explain)...)
	if opts.Observe {
		var out []Rule
		for _, r := range list {
			switch {
			case r.Action == Allow && (r.Nr == unix.SYS_OPEN || r.Nr == unix.SYS_OPENAT):
				continue // replaced below
			case r.Action == Allow && observed[r.Nr]:
				r.Action = Notify
			}
			out = append(out, r)
		}
		out = append(out, observeOpen(unix.SYS_OPEN, "open", 1)...)
		out = append(out, observeOpen(unix.SYS_OPENAT, "openat", 2)...)
		if opts.ObserveReads {
			for i, r := range out {
				switch {
				case (r.Nr == unix.SYS_OPEN || r.Nr == unix.SYS_OPENAT) && r.Action == Allow,
					r.Nr == unix.SYS_EXECVE || r.Nr == unix.SYS_EXECVEAT:
					out[i].Action = Notify
				}
			}
		}
		list = out
	}
	if opts.UnixSockets {
		// Every connect stops, whatever else is observed: the supervisor
		// makes it (a continued call would read its address again).
		for i, r := range list {
			if r.Nr == unix.SYS_CONNECT {
				list[i].Action = Notify
			}
		}
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].Nr < list[j].Nr })
	return Rules{List: list}
}

// Key is a stable digest of the filter, used to cache compiled programs.
func (r Rules) Key() string {
	h := sha256.New()
	var b [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	put(uint64(DefaultErrno))
	for _, rule := range r.List {
		put(uint64(rule.Nr))
		put(uint64(rule.Action))
		put(uint64(rule.Errno))
		put(uint64(len(rule.Conds)))
		for _, c := range rule.Conds {
			put(uint64(c.Arg))
			put(uint64(c.Op))
			put(c.Mask)
			put(c.Value)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Validate checks the invariants libseccomp needs and the ones our tests
// rely on: no unconditional rule shares a call with another rule.
func (r Rules) Validate() error {
	uncond := map[int]bool{}
	count := map[int]int{}
	for _, rule := range r.List {
		count[rule.Nr]++
		if len(rule.Conds) == 0 {
			uncond[rule.Nr] = true
		}
		if rule.Action == Errno && rule.Errno == 0 {
			return fmt.Errorf("seccomp: rule for %d has no errno", rule.Nr)
		}
	}
	for nr := range uncond {
		if count[nr] > 1 {
			return fmt.Errorf("seccomp: syscall %d has an unconditional rule and others", nr)
		}
	}
	return nil
}
