package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Peer is who is at the other end of a connection, as the kernel says:
// the credentials the peer had when it connected (SO_PEERCRED,
// SO_PEERGROUPS) and, through a pidfd (SO_PEERPIDFD), facts about the
// process that cannot be swapped for another's with a reused pid.
type Peer struct {
	UID, GID int
	Groups   []int
	PID      int
	// Nested: the peer runs in a pid namespace below the daemon's, as
	// every process of a sandboxed run does.
	Nested bool
}

// maxGroups bounds SO_PEERGROUPS (NGROUPS_MAX is 65536).
const maxGroups = 65536

// peerOf reads the peer of a unix connection.
func peerOf(c *net.UnixConn) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, fmt.Errorf("daemon: peer: %w", err)
	}
	var p Peer
	var perr error
	err = raw.Control(func(fd uintptr) { p, perr = peerOfFD(int(fd)) })
	if err == nil {
		err = perr
	}
	return p, err
}

// peerOfFD reads the peer of a connected unix socket.
func peerOfFD(fd int) (Peer, error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return Peer{}, fmt.Errorf("daemon: SO_PEERCRED: %w", err)
	}
	p := Peer{UID: int(cred.Uid), GID: int(cred.Gid), PID: int(cred.Pid)}
	if p.Groups, err = peerGroups(fd); err != nil {
		return Peer{}, err
	}
	pidfd, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PEERPIDFD)
	if err != nil {
		return Peer{}, fmt.Errorf("daemon: SO_PEERPIDFD: %w", err)
	}
	defer unix.Close(pidfd)
	if p.Nested, err = nestedPID(pidfd); err != nil {
		return Peer{}, err
	}
	return p, nil
}

// peerGroups reads SO_PEERGROUPS, growing the buffer as the kernel asks.
func peerGroups(fd int) ([]int, error) {
	n := 64
	for {
		buf := make([]uint32, n)
		size := uint32(len(buf) * 4)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
		if errno == unix.ERANGE && n < maxGroups {
			n = min(max(int(size/4), n*2), maxGroups)
			continue
		}
		if errno != 0 {
			return nil, fmt.Errorf("daemon: SO_PEERGROUPS: %w", errno)
		}
		groups := make([]int, 0, size/4)
		for _, g := range buf[:size/4] {
			groups = append(groups, int(g))
		}
		return groups, nil
	}
}

// nestedPID reports whether the process a pidfd refers to lives in a pid
// namespace below this process's: its fdinfo lists one pid per level
// from this process's namespace down (NSpid), so more than one means
// nested. The pidfd pins the process: a reused pid cannot stand in.
func nestedPID(pidfd int) (bool, error) {
	f, err := os.Open("/proc/self/fdinfo/" + strconv.Itoa(pidfd))
	if err != nil {
		return false, fmt.Errorf("daemon: pidfd info: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "NSpid:"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 || fields[0] == "-1" || fields[0] == "0" {
				// Not visible from here, or gone: not one of ours to trust.
				return true, nil
			}
			return len(fields) > 1, nil
		}
	}
	return false, errors.New("daemon: pidfd info has no NSpid line")
}
