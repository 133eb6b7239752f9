package confine

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// Capability and credential state is per thread on Linux, and the Go
// runtime runs many threads, so every change here goes through psx, which
// repeats the system call on all of them.

// securebits that make uid 0 inside the user namespace an ordinary user
// for good: no capabilities on exec, none on setuid, no ambient raise.
const lockedSecurebits = 1<<0 | 1<<1 | // SECBIT_NOROOT (+ _LOCKED)
	1<<2 | 1<<3 | // SECBIT_NO_SETUID_FIXUP (+ _LOCKED)
	1<<5 | // SECBIT_KEEP_CAPS_LOCKED (KEEP_CAPS off)
	1<<6 | 1<<7 // SECBIT_NO_CAP_AMBIENT_RAISE (+ _LOCKED)

func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 63
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 63
	}
	return n
}

// requireNoNewPrivs checks that no_new_privs is set. The supervisor sets
// it on the thread that forks the helper, so every thread of the helper
// has it from birth; setting it again on all threads would cost a psx
// round. Landlock and seccomp both refuse to load without it, so this
// check only turns their refusal into a clear message.
func requireNoNewPrivs() error {
	v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil || v != 1 {
		return fmt.Errorf("sandbox: no_new_privs is not set (%v)", err)
	}
	return nil
}

// lockExec takes from the calling thread every capability an exec could
// give: it sets the locked securebits, empties the bounding set and
// clears the ambient set. The command inherits the credentials of the
// thread that forks it, which is the calling thread (locked by the
// caller), so these are what it starts with. None of them changes what
// the thread may do itself (its permitted and effective sets stay until
// dropCapabilities), and the helper executes nothing but the command:
// a helper in namespaces does this while it waits for its setup
// (prepare), off the run's path (41 prctl calls, each committing new
// credentials: 0.3 ms). Every other thread of the helper keeps its
// bounding set: it never execs, and dropCapabilities empties its
// permitted, effective and inheritable sets; the per-capability bounding
// drops on every thread through psx cost ~5 ms.
func lockExec() error {
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, lockedSecurebits, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: securebits: %w", err)
	}
	for c := 0; c <= lastCap(); c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("sandbox: drop bounding capability %d: %w", c, err)
		}
	}
	return clearAmbient()
}

func clearAmbient() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: clear ambient capabilities: %w", err)
	}
	return nil
}

// dropCapabilities empties every capability set. Unless locked (lockExec
// already ran on the calling thread), it first does what lockExec does,
// or with canDrop false (no CAP_SETPCAP, as in landlock-only mode for an
// unprivileged caller) clears the ambient set alone: the bounding set
// cannot be cleared, and the caller reports that as a degradation.
// Then every thread of the helper loses its permitted, effective and
// inheritable sets (one psx round).
func dropCapabilities(canDrop, locked bool) error {
	switch {
	case locked:
	case canDrop:
		if err := lockExec(); err != nil {
			return err
		}
	default:
		if err := clearAmbient(); err != nil {
			return err
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if _, _, e := psx.Syscall3(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("sandbox: capset: %w", e)
	}
	return nil
}
