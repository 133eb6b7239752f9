package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// maxPassedFDs bounds the descriptors a connection may pass: a client
// passes one terminal; the rest are closed as they come.
const maxPassedFDs = 1

// fdConn is an accepted connection whose reads keep the descriptors the
// peer passes (SCM_RIGHTS): net/http reads with Read, which would drop
// them. They are received close-on-exec (the runtime asks for
// MSG_CMSG_CLOEXEC), at most maxPassedFDs are kept, and every one still
// kept is closed with the connection.
type fdConn struct {
	*net.UnixConn
	// mu guards fds and closed.
	mu     sync.Mutex
	fds    []*os.File
	closed bool
}

// fdListener accepts fdConns.
type fdListener struct{ *net.UnixListener }

func (l fdListener) Accept() (net.Conn, error) {
	c, err := l.AcceptUnix()
	if err != nil {
		return nil, err
	}
	return &fdConn{UnixConn: c}, nil
}

// Read reads as the connection's Read does, keeping passed descriptors.
func (c *fdConn) Read(p []byte) (int, error) {
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(p, oob)
	if oobn > 0 {
		c.keep(oob[:oobn], flags&unix.MSG_CTRUNC != 0)
	}
	// ReadMsgUnix answers -1 with its error; io.Reader's contract (and
	// net/http, which panics on a negative count) wants 0.
	return max(n, 0), err
}

// keep parses the control messages and keeps what a connection may.
func (c *fdConn) keep(oob []byte, truncated bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return
	}
	var fds []int
	for _, m := range msgs {
		if got, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, got...)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, fd := range fds {
		if c.closed || truncated || len(c.fds) >= maxPassedFDs {
			unix.Close(fd)
			continue
		}
		c.fds = append(c.fds, os.NewFile(uintptr(fd), "passed"))
	}
}

// take hands the kept descriptors to the caller, who closes them.
func (c *fdConn) take() []*os.File {
	c.mu.Lock()
	defer c.mu.Unlock()
	fds := c.fds
	c.fds = nil
	return fds
}

// Close closes the connection and every descriptor it still keeps.
func (c *fdConn) Close() error {
	c.mu.Lock()
	for _, f := range c.fds {
		f.Close()
	}
	c.fds, c.closed = nil, true
	c.mu.Unlock()
	return c.UnixConn.Close()
}

type connKey struct{}

// passedTerminal is the terminal the peer passed with its request, when
// it is the peer's controlling terminal; every other descriptor it
// passed is closed. why says, when one was passed and refused, why (a
// sentence safe to show).
func passedTerminal(ctx context.Context) (tty *os.File, why string) {
	c, _ := ctx.Value(connKey{}).(*fdConn)
	if c == nil {
		return nil, ""
	}
	fds := c.take()
	if len(fds) == 0 {
		return nil, ""
	}
	for _, f := range fds[1:] {
		f.Close()
	}
	f := fds[0]
	if err := controllingTerminal(c.UnixConn, f); err != nil {
		f.Close()
		return nil, "the terminal passed with the request is not your controlling terminal, so nobody is asked on it (" + err.Error() + ")"
	}
	return f, ""
}

// controllingTerminal checks that f is a terminal and the controlling
// terminal of the process at the other end of c. The process is named
// by its pidfd (SO_PEERPIDFD), so a pid reused meanwhile cannot stand
// in: its tty is read from /proc by pid, then the pidfd must still name
// a live process with that pid. Errors are sentences safe to show.
func controllingTerminal(c *net.UnixConn, f *os.File) error {
	if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err != nil {
		return errors.New("it is not a terminal")
	}
	if ptyMaster(f) {
		// A master's TIOCGDEV names its slave, and what is written to a
		// master is typed into the slave: it is the other end of a
		// terminal, not one a person reads.
		return errors.New("it is the controlling side of a pseudo-terminal, not a terminal")
	}
	// The device of the terminal behind the descriptor, whichever name
	// opened it (/dev/tty's own inode would say 5:0): encoded as tty_nr is.
	dev, err := unix.IoctlGetUint32(int(f.Fd()), unix.TIOCGDEV)
	if err != nil {
		return errors.New("it is not a terminal device")
	}
	raw, err := c.SyscallConn()
	if err != nil {
		return errors.New("the peer is unknown")
	}
	pidfd := -1
	raw.Control(func(fd uintptr) { pidfd, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD) })
	if err != nil || pidfd < 0 {
		return errors.New("the peer is unknown")
	}
	defer unix.Close(pidfd)
	pid, err := pidOfPidfd(pidfd)
	if err != nil {
		return errors.New("the peer is gone")
	}
	ttyNr, err := ttyOf(pid)
	if err != nil {
		return errors.New("the peer's terminal cannot be read")
	}
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		return errors.New("the peer is gone")
	}
	if again, err := pidOfPidfd(pidfd); err != nil || again != pid {
		return errors.New("the peer is gone")
	}
	if ttyNr == 0 || uint32(ttyNr) != dev {
		return errors.New("it is another terminal than the one the client runs on")
	}
	return nil
}

// ptyMaster reports whether f is a pseudo-terminal's master (only a
// master answers TIOCGPTN).
func ptyMaster(f *os.File) bool {
	_, err := unix.IoctlGetUint32(int(f.Fd()), unix.TIOCGPTN)
	return err == nil
}

// pidOfPidfd is the pid (in this pid namespace) a pidfd names: its
// fdinfo's Pid line, -1 once the process is gone.
func pidOfPidfd(pidfd int) (int, error) {
	f, err := os.Open("/proc/self/fdinfo/" + strconv.Itoa(pidfd))
	if err != nil {
		return 0, fmt.Errorf("daemon: pidfd info: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Pid:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil || pid <= 0 {
				return 0, errors.New("daemon: the pidfd's process is gone")
			}
			return pid, nil
		}
	}
	return 0, errors.New("daemon: pidfd info has no Pid line")
}

// ttyOf is tty_nr of /proc/pid/stat: the process's controlling
// terminal's device (0: none).
func ttyOf(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("daemon: stat: %w", err)
	}
	// The command name may hold anything, ")" too: the fields follow the
	// last ")". After it: state ppid pgrp session tty_nr.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("daemon: stat: no command name")
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 5 {
		return 0, errors.New("daemon: stat: too few fields")
	}
	return strconv.Atoi(fields[4])
}
