package wire

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// The supervisor and the helper talk over a SOCK_SEQPACKET socketpair
// (the helper's fd 3): one JSON message per packet, descriptors attached
// with SCM_RIGHTS.

const (
	// HelperArg is os.Args[1] of the re-exec'd helper.
	HelperArg = "__sandbox-init"
	// PrepareNet, then PrepareCapture, may follow HelperArg and the
	// supervisor's build stamp (Stamp): what the helper prepares while it waits for its setup, which depends on no
	// caller's plan (ready_linux.go). PrepareNet: its network namespace
	// is new (loopback is brought up). PrepareCapture: the run captures
	// direct connects (the listeners at a port of the helper's choosing,
	// the stub resolver's socket, the rules and routes; SetupMsg.Capture).
	PrepareNet     = "net"
	PrepareCapture = "capture"
	// ProbeArg is os.Args[1] of doctor's namespace probe: a short-lived
	// process in fresh namespaces that waits for its stdin to close;
	// doctor uses its user namespace to try an id-mapped mount.
	ProbeArg = "__sandbox-probe"
	// SocketFD is the helper's end of the control socket.
	SocketFD   = 3
	maxMessage = 256 << 10
)

// Kind names a message.
type Kind string

const (
	Setup     Kind = "setup"     // supervisor -> helper: the mount namespace, with descriptors
	Confine   Kind = "confine"   // supervisor -> helper: the ruleset, filter and persistence binds
	Terminate Kind = "terminate" // supervisor -> helper: SIGTERM everything
	Kill      Kind = "kill"      // supervisor -> helper: SIGKILL everything
	Listener  Kind = "listener"  // helper -> supervisor: the seccomp notification descriptor
	Layer     Kind = "layer"     // helper -> supervisor: the copy-on-write layer's file system
	Started   Kind = "started"   // helper -> supervisor: the command runs
	Error     Kind = "error"     // helper -> supervisor: setup failed
	Exit      Kind = "exit"      // helper -> supervisor: the command ended
	// Egress: helper -> supervisor, the proxy's listening socket on the
	// namespace's loopback (SetupMsg.ProxyPort), then, with
	// SetupMsg.SOCKS, the SOCKS5 endpoint's (ProxyPort+2).
	Egress Kind = "egress"
	// Diag: helper -> supervisor, a NETLINK_SOCK_DIAG socket of the
	// network namespace (the observer asks it which ports listen inside).
	Diag Kind = "diag"
	// Socket: supervisor -> helper, a request (Family, Seq) for a fresh
	// unconnected TCP socket of the namespace; helper -> supervisor, the
	// answer with the socket attached (or Error), same Seq. The supervisor
	// connects it itself: that is how the proxy reaches a server the
	// command listens with on its own loopback.
	Socket Kind = "socket"
	// Capture: helper -> supervisor, the transparent capture of direct
	// connects (SetupMsg.Capture): its listening sockets (TCP, IPv4
	// then IPv6 if any) and the stub resolver's UDP socket, or Error
	// when it could not be installed.
	Capture Kind = "capture"
	// Caches: helper -> supervisor, what became of each SetupMsg.Caches
	// entry (Message.Caches), sent once its mounts are done.
	Caches Kind = "caches"
)

// Message is one packet.
type Message struct {
	Kind    Kind        `json:"kind"`
	Setup   *SetupMsg   `json:"setup,omitempty"`
	Confine *ConfineMsg `json:"confine,omitempty"`
	// Error is an internal error's text, for the supervisor's log (and,
	// for Error, its own error).
	Error string `json:"error,omitempty"`
	// Why (Capture) says why there is no capture, in sandboxd's words:
	// the report shows it, never Error. With an Error it is the public
	// sentence for the failure (Skew), when the helper has one.
	Why    string       `json:"why,omitempty"`
	Code   int          `json:"code,omitempty"` // exit status for Exit and Error
	Sig    int          `json:"sig,omitempty"`
	Info   *StartedInfo `json:"info,omitempty"`
	Family int          `json:"family,omitempty"` // Socket: AF_INET or AF_INET6
	Seq    uint64       `json:"seq,omitempty"`    // Socket: matches an answer to its request
	// Caches: one outcome per SetupMsg.Caches entry, in order.
	Caches []CacheOutcome `json:"caches,omitempty"`
	// Limits (Exit): what the helper saw the command run into: "tmp",
	// "shm" (that tmpfs is full), "file_size" (a process died of SIGXFSZ).
	Limits []string `json:"limits,omitempty"`
}

// SetupMsg is what the helper needs to build its mount namespace; it is
// sent as soon as the helper runs. Descriptors travel alongside: Cgroups
// "tasks" files, then one tree per entry of Attach. The rest (ConfineMsg)
// follows when the supervisor has built it, while the helper mounts.
type SetupMsg struct {
	// Stamp is the supervisor's build stamp (see Stamp): the helper acts
	// on nothing of a setup whose stamp is not its own.
	Stamp string   `json:"stamp"`
	Argv  []string `json:"argv"`
	Env   []string `json:"env"`
	Dir   string   `json:"dir"`

	Namespaces bool `json:"namespaces"`
	Cgroups    int  `json:"cgroups"` // how many cgroup "tasks" descriptors follow the ruleset
	// LeaveMemory: the last of the Cgroups descriptors is the v1 memory
	// parent's "tasks" file, which the helper's forking thread writes
	// "0" to once the command is forked (it leaves the run's memory
	// group; see sandbox's limits).
	LeaveMemory bool `json:"leave_memory,omitempty"`
	// Stdio: the three descriptors before the Pipes are the command's
	// stdin, stdout and stderr, which the helper makes its own 0-2 (a
	// helper is started with /dev/null there, possibly long before the
	// run it serves: see sandbox.ReadyHelpers).
	Stdio bool `json:"stdio,omitempty"`
	// Pipes is how many descriptors, last in the message, the command
	// gets as 3, 4, ... (Spec.Pipes).
	Pipes int `json:"pipes,omitempty"`
	// Clone lists writable roots the helper clones itself (when the
	// supervisor did not hand over id-mapped trees), in mount order.
	Clone []string `json:"clone,omitempty"`
	// Attach lists where each handed-over tree goes, in mount order.
	Attach []string `json:"attach,omitempty"`
	// Skeleton lists directories the command's uid cannot search that
	// lie above an Attach target; each gets an empty tmpfs holding only
	// the path to the targets.
	Skeleton []string `json:"skeleton,omitempty"`
	// Mask lists directories hidden behind an empty read-only tmpfs.
	Mask      []string `json:"mask,omitempty"`
	Workspace string   `json:"workspace"`
	TmpSize   int64    `json:"tmp_size"`
	// Layer, when non-zero, puts the workspace behind a copy-on-write
	// layer of at most this many bytes.
	Layer int64 `json:"layer,omitempty"`
	// NotBefore: the command starts only once the coarse wall clock is
	// past this (nanoseconds), so every change made while it runs gets a
	// later change time than anything before it.
	NotBefore int64 `json:"not_before,omitempty"`
	// ExceptionBinds are granted files the helper binds itself (callers
	// whose command runs as their own uid: no id-mapped trees).
	ExceptionBinds []ExceptionBind `json:"exception_binds,omitempty"`
	// TmpDir is the private TMPDIR when there is no mount namespace.
	TmpDir string `json:"tmp_dir,omitempty"`
	// Caches are the private tool caches the helper mounts once the
	// trees are attached: overlays on host caches, or their private
	// layers alone.
	Caches []CacheMount `json:"caches,omitempty"`
	// CacheRoots are the private cache roots whose layers directory
	// (".layers"), if there is one, the helper hides.
	CacheRoots []string `json:"cache_roots,omitempty"`

	Limits     Limits `json:"limits"`
	LimitNproc bool   `json:"limit_nproc"` // no pids cgroup: use RLIMIT_NPROC
	LimitData  bool   `json:"limit_data"`  // no memory cgroup: use RLIMIT_DATA
	// PidsCgroup: a pids cgroup bounds the run (RLIMIT_NPROC is then a
	// looser second bound, so that the cgroup is what refuses a fork and
	// says so).
	PidsCgroup bool `json:"pids_cgroup,omitempty"`

	// ProxyPort, when non-zero, has the helper listen on 127.0.0.1 at
	// this port inside the network namespace and hand the socket over
	// (Egress).
	ProxyPort uint16 `json:"proxy_port,omitempty"`
	// Capture has the helper capture every TCP connect off loopback to
	// listeners at a port of its own choosing (no variable names it; it
	// is no secret either: the command sees it in /proc/net/tcp, and a
	// connect to it is refused as malformed) and serve a stub resolver on
	// 127.0.0.1:53 (Capture). The helper prepared it before the setup
	// came, told by its command line (PrepareCapture); a setup that
	// disagrees with what the helper prepared fails the run.
	Capture bool `json:"capture,omitempty"`
	// SOCKS has the helper listen on ProxyPort+2 as well, for the
	// SOCKS5 endpoint (Egress).
	SOCKS bool `json:"socks,omitempty"`
	// Shown are files the helper shows in place of others once its mounts
	// are done (the stub resolver's /etc/resolv.conf, /etc/hosts, ...).
	Shown []ShownFile `json:"shown,omitempty"`

	LandlockABI   int    `json:"landlock_abi"`
	LandlockFS    uint64 `json:"landlock_fs"`
	LandlockFlags uint32 `json:"landlock_flags"`
}

// CacheMount is one private tool cache. Root is an attached writable
// tree (a Spec.Caches entry); Dir and Layer are relative to it and opened
// beneath it with no symlink allowed (the command wrote there before).
type CacheMount struct {
	Name string `json:"name"`
	Root string `json:"root"`
	// Dir is the mountpoint, what the command's environment names.
	Dir string `json:"dir"`
	// Layer holds "upper" and "work" (the private cache in overlay
	// form). Empty with Ephemeral.
	Layer string `json:"layer,omitempty"`
	// Lower is the host cache as the helper sees it (symlink-free); ""
	// binds Layer's upper alone onto Dir.
	Lower string `json:"lower,omitempty"`
	// Ephemeral puts upper and work in a fresh tmpfs of TmpSize bytes
	// (another run holds the private layer).
	Ephemeral bool `json:"ephemeral,omitempty"`
	// Masks are relative to Dir, the last element possibly a glob:
	// hidden after the overlay is mounted.
	Masks []string `json:"masks,omitempty"`
	// Mounted is what the helper mounted on Dir ("overlay", "bind" or
	// ""): its own note for the Landlock rules, never sent.
	Mounted string `json:"-"`
}

// CacheOutcome is what the helper made of one CacheMount.
type CacheOutcome struct {
	// Mounted is "overlay", "bind" or "" (Dir is used as it is).
	Mounted string `json:"mounted,omitempty"`
	// Why says why an overlay was not mounted, in sandboxd's words (the
	// report shows it).
	Why string `json:"why,omitempty"`
	// Cause is the error behind Why, for the supervisor's log.
	Cause string `json:"cause,omitempty"`
}

// Limits bound a run; the same fields as sandbox.Limits, which converts
// to it.
type Limits struct {
	Pids     int64 // tasks (processes and threads)
	Memory   int64 // bytes
	FileSize int64 // bytes, largest file the command may write
	TmpSize  int64 // bytes, private /tmp
}

// ConfineMsg completes the setup; its one descriptor is the Landlock
// ruleset.
type ConfineMsg struct {
	// Pins are directories bound onto themselves so they cannot be
	// renamed or removed; ReadOnly are protected paths bound read-only.
	// Both are relative to Workspace and resolved without symlinks.
	Pins     []string `json:"pins,omitempty"`
	ReadOnly []string `json:"read_only,omitempty"`
	Seccomp  []byte   `json:"seccomp"`
	// SeccompNoUDP is Seccomp without UDP sockets, when Seccomp allows
	// them (SetupMsg.Capture): the helper installs it instead when
	// its capture failed, so that UDP exists only beside the netfilter
	// rules that confine it.
	SeccompNoUDP []byte `json:"seccomp_no_udp,omitempty"`
}

// StartedInfo comes with Started; with Exit, only its Phases (the
// helper's end).
type StartedInfo struct {
	SetupNanos int64 `json:"setup_ns"`
	// Phases are the helper's steps in microseconds since its start.
	Phases []Phase `json:"phases,omitempty"`
}

// Phase is one setup step of the helper: when it was reached, in
// microseconds since the helper's start and since the Unix epoch (so a
// benchmark can place it beside the supervisor's and a client's), and
// the helper's CPU time (user and system) by then.
type Phase struct {
	Name string `json:"name"`
	US   int64  `json:"us"`
	Unix int64  `json:"unix_us"`
	CPU  int64  `json:"cpu_us"`
}

// ShownFile is Data shown read-only at Path (resolved, no symlink).
type ShownFile struct {
	Path string `json:"path"`
	Data []byte `json:"data"`
}

// ExceptionBind is what the helper needs to bind one granted file itself.
type ExceptionBind struct {
	Operation string `json:"operation"`
	Path      string `json:"path"`
	Dev       uint64 `json:"dev"`
	Ino       uint64 `json:"ino"`
	// Source, if set, is bound onto Path instead of Path itself (a
	// sanitized copy shown in place of a file); Dev and Ino are Source's.
	Source string `json:"source,omitempty"`
}

// Send writes one message with its descriptors.
func Send(fd int, m Message, fds ...int) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("sandbox: encode %s: %w", m.Kind, err)
	}
	if len(b) > maxMessage {
		return fmt.Errorf("sandbox: %s message of %d bytes is too large", m.Kind, len(b))
	}
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	if err := unix.Sendmsg(fd, b, oob, nil, 0); err != nil {
		return fmt.Errorf("sandbox: send %s: %w", m.Kind, err)
	}
	return nil
}

// Receiver reads messages from one socket, reusing its buffers. It is
// used by one goroutine at a time.
type Receiver struct {
	fd  int
	buf []byte
	oob []byte
}

// maxFDs is the most descriptors one message carries (the setup's: the
// cgroup files, the trees, the standard streams and the pipes).
const maxFDs = 64

// NewReceiver reads from fd, which stays the caller's.
func NewReceiver(fd int) *Receiver {
	return &Receiver{fd: fd, buf: make([]byte, maxMessage), oob: make([]byte, unix.CmsgSpace(maxFDs*4))}
}

// Recv reads one message. Received descriptors are close-on-exec and
// belong to the caller. At the peer's end it returns os.ErrClosed. A
// message that does not decode whole (a field of another type: a peer of
// another build) comes back as far as it decoded, with the error and
// without its descriptors, so that the helper can still read its Stamp.
func (r *Receiver) Recv() (Message, []int, error) {
	fd, buf, oob := r.fd, r.buf, r.oob
	n, oobn, flags, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return Message{}, nil, fmt.Errorf("sandbox: receive: %w", err)
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		return Message{}, nil, fmt.Errorf("sandbox: receive: message truncated")
	}
	if n == 0 {
		return Message{}, nil, os.ErrClosed
	}
	fds, err := rights(oob[:oobn])
	if err != nil {
		return Message{}, nil, err
	}
	var m Message
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		for _, f := range fds {
			unix.Close(f)
		}
		return m, nil, fmt.Errorf("sandbox: decode message: %w", err)
	}
	return m, fds, nil
}

func rights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	cmsgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("sandbox: receive: %w", err)
	}
	var fds []int
	for _, c := range cmsgs {
		r, err := unix.ParseUnixRights(&c)
		if err != nil {
			return nil, fmt.Errorf("sandbox: receive: %w", err)
		}
		fds = append(fds, r...)
	}
	return fds, nil
}

// InOwnTmpfs reports whether p lies in a tmpfs the helper mounts itself
// (its private /tmp, /var/tmp and /dev/shm).
func InOwnTmpfs(p string) bool {
	return strings.HasPrefix(p, "/tmp/") || strings.HasPrefix(p, "/var/tmp/") || strings.HasPrefix(p, "/dev/shm/")
}

// GrantTree clones the single file fd names (a granted exception's
// object, at path) into a detached mount: writable when the operation
// writes, read-only otherwise, id-mapped when the command runs as another
// host uid (userns >= 0). The supervisor uses it for id-mapped grants,
// the helper for those it binds itself.
func GrantTree(fd int, path, operation string, userns int) (int, error) {
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return -1, fmt.Errorf("sandbox: grant for %s: clone: %w", path, err)
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if Writes(operation) {
		attr.Attr_clr = unix.MOUNT_ATTR_RDONLY
	} else {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if userns >= 0 {
		attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
		attr.Userns_fd = uint64(userns)
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(tree)
		return -1, fmt.Errorf("sandbox: grant for %s: %w", path, err)
	}
	return tree, nil
}

// Writes reports whether a granted operation needs its object on a
// writable mount.
func Writes(operation string) bool {
	return operation == "write_file" || operation == "make_reg" || operation == "truncate"
}
