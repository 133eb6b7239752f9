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
