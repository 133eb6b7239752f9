package confine

import (
	"fmt"
	"os"

	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// IsProbe reports whether args ask for doctor's namespace probe.
func IsProbe(args []string) bool { return len(args) > 1 && args[1] == wire.ProbeArg }

// ProbeMain (os.Args[3]: the stamp of the sandboxd that started it, which
// must be its own) mounts a tmpfs on os.Args[2] and a copy-on-write layer over
// it, in its own (private) mount namespace, and prints "ok" or why not;
// then it installs the capture of direct connects in its own network
// namespace (capture) and prints "ok" or why not on a second line; then
// it waits until stdin closes and exits. (An overlay cannot take a
// lower layer with mounts locked below it, such as "/" in a new user
// namespace; the sandbox's workspace is a tree it attached itself.)
//
// Each line is a sentence of doctor's report, in sandboxd's words with the
// OS's reason: doctor has no log to hold an internal error's text.
func ProbeMain() {
	if len(os.Args) < 4 || os.Args[3] != wire.Stamp() {
		// A doctor of another build (os.Args[3], its stamp): whatever
		// this probe found would not be what that sandboxd's runs get.
		fmt.Println(wire.Skew)
		os.Exit(125)
	}
	msg := "ok"
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		msg = "/ cannot be made private in a new mount namespace (" + publicerr.Reason(err) + ")"
	} else if err := unix.Mount("tmpfs", os.Args[2], "tmpfs", 0, "size=64k"); err != nil {
		msg = "a tmpfs cannot be mounted in a new mount namespace (" + publicerr.Reason(err) + ")"
	} else if fd, err := mountLayer(os.Args[2], 1<<20); err != nil {
		msg = "an overlay over a size-limited tmpfs cannot be mounted in the sandbox's user namespace (" + publicerr.Reason(err) + ")"
	} else {
		unix.Close(fd)
	}
	fmt.Println(msg)
	capture := "ok"
	if err := loopbackUp(); err != nil {
		capture = "the loopback cannot be brought up in a new network namespace (" + publicerr.Reason(err) + ")"
	} else if c := prepareCapture(); c.err != nil {
		capture = "nf_tables TPROXY cannot be installed in a new network namespace (" + publicerr.Reason(c.err) + ")"
	}
	fmt.Println(capture)
	var b [1]byte
	os.Stdin.Read(b[:])
	os.Exit(0)
}

// probePath is what the helper opens for writing, deliberately denied, so
// the kernel announces the run's domain with the helper's pid (and, at
// the end, marks that every earlier record of the run was delivered).
// The supervisor's audit reader knows these records by it (detect).
const probePath = "/proc/self/comm"

// probeDomain makes the deliberate denied access that announces the
// helper's Landlock domain. The error is expected.
func probeDomain() {
	fd, err := unix.Open(probePath, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
	}
}
