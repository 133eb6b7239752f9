package seccomp

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Install loads a compiled program into every thread of the calling
// process (SECCOMP_FILTER_FLAG_TSYNC). The caller must have set
// no_new_privs on all threads first. The filter is permanent and is
// inherited by every child.
func Install(prog []byte) error {
	if len(prog) == 0 || len(prog)%8 != 0 || len(prog)/8 > 0xffff {
		return fmt.Errorf("seccomp: program of %d bytes is not a BPF program", len(prog))
	}
	fprog := unix.SockFprog{
		Len:    uint16(len(prog) / 8),
		Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0])),
	}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return fmt.Errorf("seccomp: install: %w", errno)
	}
	if r != 0 {
		return fmt.Errorf("seccomp: install: thread %d could not be synchronised", r)
	}
	return nil
}

// InstallWithListener is Install for a program with Notify rules: it
// returns the notification descriptor (close-on-exec) that the supervisor
// reads. Threads that cannot be synchronised make it fail (ESRCH) rather
// than leave some threads unfiltered.
func InstallWithListener(prog []byte) (int, error) {
	if len(prog) == 0 || len(prog)%8 != 0 || len(prog)/8 > 0xffff {
		return -1, fmt.Errorf("seccomp: program of %d bytes is not a BPF program", len(prog))
	}
	fprog := unix.SockFprog{
		Len:    uint16(len(prog) / 8),
		Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0])),
	}
	flags := uintptr(unix.SECCOMP_FILTER_FLAG_TSYNC | unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH | unix.SECCOMP_FILTER_FLAG_NEW_LISTENER)
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	if errno != 0 {
		return -1, fmt.Errorf("seccomp: install: %w", errno)
	}
	fd := int(r)
	unix.CloseOnExec(fd)
	return fd, nil
}
