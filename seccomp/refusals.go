package seccomp

import "golang.org/x/sys/unix"

// Refusal is a class of calls the filter refuses by design: no policy,
// grant or reviewer can allow one, so a refusal is never a boundary. The
// tool that asked usually says only "Permission denied" or "Operation
// not permitted"; with Options.Explain the supervisor learns the class
// and can say why.
type Refusal struct {
	// Class names the class in the report: netlink, raw_socket,
	// namespace, ptrace or mount.
	Class string
	// What is what was refused, with the tools that commonly ask for it,
	// to be read after "refused".
	What string
	// Why says why the sandbox refuses it.
	Why string
	// Probed marks a class programs try routinely and carry on without
	// (glibc's name lookups open a netlink socket): worth a word only
	// when the command failed.
	Probed bool
}

// refusalClass is one class of the table: its calls, each with the
// argument conditions that put it in the class, and the errno every one
// of them fails with, whether the filter answers (Errno) or the
// supervisor does (Notify).
type refusalClass struct {
	Refusal
	errno unix.Errno
	calls []classCall
}

type classCall struct {
	nr    int
	name  string
	conds []Cond
}

// whole is a call in the class whatever its arguments.
func whole(nr int, name string) classCall { return classCall{nr: nr, name: name} }

// refusalClasses is the class table: the one home of each class's
// calls, errno and reason. Build turns it into rules (Errno, or Notify
// with Explain) and Refused classifies a notification by it, so the
// command sees the same errno either way.
//
// A class is worth a hint when a tool people run fails on it with a bare
// errno and no fallback, and the calls are rare, so stopping each costs
// nothing that matters. Refused by design but left to the filter's own
// errno, with no hint:
//   - clone3: its flags are behind a pointer, so the filter cannot tell a
//     thread from a namespace; it gets ENOSYS and libc falls back to clone
//     (whose namespace flags are in this table). Stopping it would stop
//     every thread and process libc creates.
//   - io_uring and the key retention service (ENOSYS): programs fall back
//     as on a kernel without them, so a hint would only be noise.
//   - statmount and listmount (EPERM): reading the mount tree; libmount
//     falls back to /proc/self/mountinfo.
//   - kcmp and process_madvise (EPERM): Mesa and systemd compare
//     descriptors with kcmp and carry on without it.
//   - bpf, perf_event_open, userfaultfd, fanotify, open_by_handle_at,
//     nested Landlock, the machine's administration: no everyday tool
//     asks, and the errno reads as what it is.
//   - the other socket families and types (UDP without capture, vsock,
//     SCTP, Multipath TCP, unix datagram): glibc's resolver and syslog(3)
//     try some of them on every lookup or log line and carry on.
//   - socketpair of netlink, raw or packet sockets: no such family
//     implements socketpair (the kernel's own answer would be
//     EOPNOTSUPP), so it is no way to one.
var refusalClasses = []refusalClass{
	{
		Refusal: Refusal{Class: "netlink",
			What:   "a netlink socket (ip, ifconfig, ss, hostname -I)",
			Why:    "netlink, the kernel's configuration interface (addresses, routes, firewall, audit), is closed to the command, so it can neither read nor change the machine's network settings (name lookups that only probe netlink carry on without it)",
			Probed: true},
		errno: unix.EACCES,
		calls: []classCall{{nr: unix.SYS_SOCKET, name: "socket", conds: []Cond{eq(0, unix.AF_NETLINK)}}},
	},
	{
		Refusal: Refusal{Class: "raw_socket",
			What: "a raw or packet socket (ping, traceroute, tcpdump, nmap)",
			Why:  "raw and packet sockets send and capture any packet, past the egress proxy and its review; the command gets TCP and its own unix sockets only"},
		errno: unix.EACCES,
		calls: []classCall{
			{nr: unix.SYS_SOCKET, name: "socket", conds: []Cond{eq(0, unix.AF_PACKET)}},
			{nr: unix.SYS_SOCKET, name: "socket", conds: []Cond{eq(0, unix.AF_INET), masked(1, 0xf, unix.SOCK_RAW)}},
			{nr: unix.SYS_SOCKET, name: "socket", conds: []Cond{eq(0, unix.AF_INET6), masked(1, 0xf, unix.SOCK_RAW)}},
			// The kernel turns (AF_INET, SOCK_PACKET) into a packet socket.
			{nr: unix.SYS_SOCKET, name: "socket", conds: []Cond{eq(0, unix.AF_INET), masked(1, 0xf, unix.SOCK_PACKET)}},
			{nr: unix.SYS_SOCKET, name: "socket", conds: []Cond{eq(0, unix.AF_INET6), masked(1, 0xf, unix.SOCK_PACKET)}},
		},
	},
	{
		Refusal: Refusal{Class: "namespace",
			What: "a new namespace (unshare, bwrap, podman, Chrome's sandbox)",
			Why:  "a new user namespace would hand the command every capability inside it, the kernel surface most sandbox escapes go through, so no sandbox or container starts inside this one"},
		errno: unix.EPERM,
		calls: append([]classCall{whole(unix.SYS_UNSHARE, "unshare"), whole(unix.SYS_SETNS, "setns")}, cloneNamespaces()...),
	},
	{
		Refusal: Refusal{Class: "ptrace",
			What: "tracing or reading another process (strace, gdb, ltrace, LeakSanitizer)",
			Why:  "no process of the command may read or steer another one (ptrace, process_vm_readv and _writev, pidfd_getfd), the sandbox's own helper included"},
		errno: unix.EPERM,
		calls: []classCall{whole(unix.SYS_PTRACE, "ptrace"), whole(unix.SYS_PROCESS_VM_READV, "process_vm_readv"),
			whole(unix.SYS_PROCESS_VM_WRITEV, "process_vm_writev"), whole(unix.SYS_PIDFD_GETFD, "pidfd_getfd")},
	},
	{
		Refusal: Refusal{Class: "mount",
			What: "a mount or a new root (mount, umount, chroot, pivot_root)",
			Why:  "the file system tree the command sees is fixed before it starts, because it decides what the command may read and write; uid 0 inside holds no capability to change it"},
		errno: unix.EPERM,
		calls: []classCall{whole(unix.SYS_MOUNT, "mount"), whole(unix.SYS_UMOUNT2, "umount2"),
			whole(unix.SYS_PIVOT_ROOT, "pivot_root"), whole(unix.SYS_CHROOT, "chroot"), whole(unix.SYS_OPEN_TREE, "open_tree"),
			whole(unix.SYS_OPEN_TREE_ATTR, "open_tree_attr"), whole(unix.SYS_MOVE_MOUNT, "move_mount"),
			whole(unix.SYS_FSOPEN, "fsopen"), whole(unix.SYS_FSCONFIG, "fsconfig"), whole(unix.SYS_FSMOUNT, "fsmount"),
			whole(unix.SYS_FSPICK, "fspick"), whole(unix.SYS_MOUNT_SETATTR, "mount_setattr")},
	},
}

// cloneNamespaces are clone's calls that make a namespace: one rule per
// flag (a rule's conditions must all hold, so "any of" is several).
func cloneNamespaces() []classCall {
	var out []classCall
	for _, f := range []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
		unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP} {
		out = append(out, classCall{nr: unix.SYS_CLONE, name: "clone", conds: []Cond{masked(0, f, f)}})
	}
	return out
}

// refusalRules are the class table's rules: each call fails with its
// class's errno, or, with explain, stops for the supervisor.
func refusalRules(explain bool) []Rule {
	var out []Rule
	for _, c := range refusalClasses {
		for _, k := range c.calls {
			r := Rule{Nr: k.nr, Name: k.name, Action: Errno, Errno: c.errno, Conds: k.conds}
			if explain {
				r.Action, r.Errno = Notify, 0
			}
			out = append(out, r)
		}
	}
	return out
}

// Refused classifies a notification of a filter built with Explain.
// refused reports whether nr is a call whose notifications are refusals:
// such a call must be answered with errno and never let through to the
// kernel. ref is its class; it is zero when the arguments match none
// (which the filter never stops), and errno is then EPERM, so even a
// filter and a supervisor of different versions fail closed.
func Refused(nr int, args [6]uint64) (ref Refusal, errno unix.Errno, refused bool) {
	for _, c := range refusalClasses {
		for _, k := range c.calls {
			if k.nr != nr {
				continue
			}
			refused = true
			if holds(k.conds, args) {
				return c.Refusal, c.errno, true
			}
		}
	}
	if refused {
		return Refusal{}, unix.EPERM, true
	}
	return Refusal{}, 0, false
}

// holds reports whether every condition holds for args, as the filter
// compares them (all 64 bits).
func holds(conds []Cond, args [6]uint64) bool {
	for _, c := range conds {
		if c.Arg >= uint(len(args)) {
			return false
		}
		a := args[c.Arg]
		var ok bool
		switch c.Op {
		case Eq:
			ok = a == c.Value
		case MaskedEq:
			ok = a&c.Mask == c.Value
		case Ne:
			ok = a != c.Value
		case Ge:
			ok = a >= c.Value
		}
		if !ok {
			return false
		}
	}
	return true
}
