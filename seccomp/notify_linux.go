package seccomp

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel structures of seccomp user notification (linux/seccomp.h).
type notifData struct {
	Nr   int32
	Arch uint32
	IP   uint64
	Args [6]uint64
}

type notif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  notifData
}

type notifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// Notification is one observed system call, stopped until answered.
type Notification struct {
	ID   uint64
	Pid  int // in the listener's pid namespace
	Nr   int
	Args [6]uint64
}

// ErrGone means every process under the filter has exited.
var ErrGone = errors.New("seccomp: no process is left under the filter")

// Listener reads notifications from a filter's notification descriptor.
type Listener struct {
	fd int
}

// syncWakeUp is SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6): the
// kernel hands the CPU straight from the stopped task to the listener and
// back, instead of waking each on an idle CPU; in a VM without halt
// polling that wake-up is most of a notification's cost.
const syncWakeUp = 1

// NewListener wraps a notification descriptor (from InstallWithListener,
// usually received from the sandbox helper).
func NewListener(fd int) *Listener {
	flags := uint64(syncWakeUp)
	unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SECCOMP_IOCTL_NOTIF_SET_FLAGS, uintptr(flags)) // best effort: older kernels
	return &Listener{fd: fd}
}

// Close closes the descriptor. Processes stopped in an unanswered call
// then fail it with ENOSYS, so close only once nothing is left to answer.
func (l *Listener) Close() error { return unix.Close(l.fd) }

// Receive waits up to timeoutMs for a notification. ok is false on
// timeout. ErrGone means no process is left under the filter.
func (l *Listener) Receive(timeoutMs int) (n Notification, ok bool, err error) {
	pfd := []unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN}}
	for {
		c, err := unix.Poll(pfd, timeoutMs)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return n, false, fmt.Errorf("seccomp: poll: %w", err)
		}
		if c == 0 {
			return n, false, nil
		}
		if pfd[0].Revents&unix.POLLIN == 0 && pfd[0].Revents&unix.POLLHUP != 0 {
			return n, false, ErrGone
		}
		break
	}
	var raw notif
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(l.fd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&raw))); e != 0 {
		switch e {
		case unix.EINTR, unix.ENOENT: // the caller died before we read it
			return n, false, nil
		}
		return n, false, fmt.Errorf("seccomp: receive notification: %w", e)
	}
	return Notification{ID: raw.ID, Pid: int(raw.Pid), Nr: int(raw.Data.Nr), Args: raw.Data.Args}, true, nil
}

// Valid reports whether the notification is still pending (its process
// has not died or been interrupted): what was read from the process's
// memory since it was received belongs to that call.
func (l *Listener) Valid(id uint64) bool {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(l.fd), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id)))
	return e == 0
}

// Continue lets the call proceed to the kernel, which enforces as it
// would have without the observer.
func (l *Listener) Continue(id uint64) error {
	resp := notifResp{ID: id, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(l.fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp))); e != 0 {
		if e == unix.ENOENT {
			return nil // the caller died meanwhile
		}
		return fmt.Errorf("seccomp: answer notification: %w", e)
	}
	return nil
}

// Return answers the notification in the supervisor's stead: the call
// returns 0, or fails with errno when it is not 0. The supervisor made
// the call itself.
func (l *Listener) Return(id uint64, errno unix.Errno) error {
	resp := notifResp{ID: id, Error: -int32(errno)}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(l.fd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp))); e != 0 {
		if e == unix.ENOENT {
			return nil // the caller died or was interrupted meanwhile
		}
		return fmt.Errorf("seccomp: answer notification: %w", e)
	}
	return nil
}
