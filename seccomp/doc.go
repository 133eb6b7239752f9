// Package seccomp owns the sandbox's system call filter: a default-deny allow
// list in the spirit of Docker's default profile, tightened for coding agents.
//
// The filter is described as plain data ([Rules]) so it can be tested,
// hashed and cached; [Compile] turns that description into a classic BPF
// program with libseccomp (the only cgo in sandboxd), and [Install] loads a
// compiled program into the calling process with a raw seccomp(2) call,
// synchronised across all threads. Compiling with libseccomp costs a few
// milliseconds, so the supervisor compiles once, caches the program in
// sandboxd's state directory keyed by [Rules.Key], and the sandbox helper
// only installs bytes it is handed.
//
// What the filter refuses (see rules.go for the full list and the errno each
// case returns):
//   - any system call not on the allow list, including future ones (ENOSYS);
//   - any architecture but x86_64, which rejects `int 0x80` and x32 calls
//     (the process is killed);
//   - new namespaces (unshare, setns, clone with namespace flags; clone3 gets
//     ENOSYS so libc falls back to clone), the mount family and the new
//     mount API, io_uring, the key retention service, bpf, perf_event_open,
//     ptrace, process_vm_*, kexec, modules, reboot, open_by_handle_at,
//     userfaultfd, and Landlock itself (so a command cannot stack a domain
//     that hides its own denials);
//   - sockets other than TCP over IPv4/IPv6 (no UDP, raw, packet, netlink,
//     vsock, SCTP or Multipath TCP), socket(AF_UNIX) (socketpair stays),
//     MSG_FASTOPEN and TCP_FASTOPEN(_CONNECT);
//   - TIOCSTI and TIOCLINUX;
//   - setuid/setgid mode bits on chmod and on file creation, and device
//     nodes from mknod, so nothing written carries privilege out.
//
// Five classes of those refusals are worth a word to the person, since the
// tool that meets one says only "Permission denied": netlink, raw and
// packet sockets, new namespaces, ptrace and mounts (refusals.go holds
// each class's calls, errno and reason). With [Options.Explain] the filter
// stops each such call for the supervisor instead of failing it, and
// [Refused] tells the supervisor the class and the errno to fail it with,
// so the command sees no difference.
//
// Of sandboxd's packages it imports none. It must never import broker,
// review/..., netproxy or openai-go.
package seccomp
