package sandbox

import (
	"encoding/json"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// The supervisor and the helper talk over a SOCK_SEQPACKET socketpair
// (the helper's fd 3): one JSON message per packet, descriptors attached
// with SCM_RIGHTS.

const (
	helperArg      = "__sandbox-init" // os.Args[1] of the re-exec'd helper
	helperSocketFD = 3
	maxMessage     = 256 << 10
)

// msgKind names a message.
type msgKind string

const (
	msgSetup     msgKind = "setup"     // supervisor -> helper: the mount namespace, with descriptors
	msgConfine   msgKind = "confine"   // supervisor -> helper: the ruleset, filter and persistence binds
	msgTerminate msgKind = "terminate" // supervisor -> helper: SIGTERM everything
	msgKill      msgKind = "kill"      // supervisor -> helper: SIGKILL everything
	msgListener  msgKind = "listener"  // helper -> supervisor: the seccomp notification descriptor
	msgLayer     msgKind = "layer"     // helper -> supervisor: the copy-on-write layer's file system
	msgStarted   msgKind = "started"   // helper -> supervisor: the command runs
	msgError     msgKind = "error"     // helper -> supervisor: setup failed
	msgExit      msgKind = "exit"      // helper -> supervisor: the command ended
)

type message struct {
	Kind    msgKind     `json:"kind"`
	Setup   *setupMsg   `json:"setup,omitempty"`
	Confine *confineMsg `json:"confine,omitempty"`
	Error   string      `json:"error,omitempty"`
	Code    int         `json:"code,omitempty"` // exit status for msgExit and msgError
	Sig     int         `json:"sig,omitempty"`
	Info    *startedMsg `json:"info,omitempty"`
}

// setupMsg is what the helper needs to build its mount namespace; it is
// sent as soon as the helper runs. Descriptors travel alongside: Cgroups
// "tasks" files, then one tree per entry of Attach. The rest (confineMsg)
// follows when the supervisor has built it, while the helper mounts.
type setupMsg struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`

	Namespaces bool `json:"namespaces"`
	Cgroups    int  `json:"cgroups"` // how many cgroup "tasks" descriptors follow the ruleset
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

	Limits     Limits `json:"limits"`
	LimitNproc bool   `json:"limit_nproc"` // no pids cgroup: use RLIMIT_NPROC
	LimitData  bool   `json:"limit_data"`  // no memory cgroup: use RLIMIT_DATA

	LandlockABI   int    `json:"landlock_abi"`
	LandlockFS    uint64 `json:"landlock_fs"`
	LandlockFlags uint32 `json:"landlock_flags"`
}

// confineMsg completes the setup; its one descriptor is the Landlock
// ruleset.
type confineMsg struct {
	// Pins are directories bound onto themselves so they cannot be
	// renamed or removed; ReadOnly are protected paths bound read-only.
	// Both are relative to Workspace and resolved without symlinks.
	Pins     []string `json:"pins,omitempty"`
	ReadOnly []string `json:"read_only,omitempty"`
	Seccomp  []byte   `json:"seccomp"`
}

type startedMsg struct {
	SetupNanos int64 `json:"setup_ns"`
	// Phases are the helper's setup steps in microseconds since its start.
	Phases []phase `json:"phases,omitempty"`
}

type phase struct {
	Name string `json:"name"`
	US   int64  `json:"us"`
}

func send(fd int, m message, fds ...int) error {
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

// receiver reads messages from one socket, reusing its buffers.
type receiver struct {
	fd  int
	buf []byte
	oob []byte
}

func newReceiver(fd int) *receiver {
	return &receiver{fd: fd, buf: make([]byte, maxMessage), oob: make([]byte, unix.CmsgSpace(16*4))}
}

// recv reads one message. Received descriptors are close-on-exec.
func (r *receiver) recv() (message, []int, error) {
	fd, buf, oob := r.fd, r.buf, r.oob
	n, oobn, flags, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return message{}, nil, fmt.Errorf("sandbox: receive: %w", err)
	}
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		return message{}, nil, fmt.Errorf("sandbox: receive: message truncated")
	}
	if n == 0 {
		return message{}, nil, os.ErrClosed
	}
	var fds []int
	if oobn > 0 {
		cmsgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return message{}, nil, fmt.Errorf("sandbox: receive: %w", err)
		}
		for _, c := range cmsgs {
			r, err := unix.ParseUnixRights(&c)
			if err != nil {
				return message{}, nil, fmt.Errorf("sandbox: receive: %w", err)
			}
			fds = append(fds, r...)
		}
	}
	var m message
	if err := json.Unmarshal(buf[:n], &m); err != nil {
		for _, f := range fds {
			unix.Close(f)
		}
		return message{}, nil, fmt.Errorf("sandbox: decode message: %w", err)
	}
	return m, fds, nil
}
