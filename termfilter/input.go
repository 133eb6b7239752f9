package termfilter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pollInterval is the longest Run waits for input before looking at its
// context again, so it bounds how long Run takes to return once the
// context is done. Hold does not wait for it.
const pollInterval = 50 * time.Millisecond

// Input relays a terminal to a command's stdin and can be held while a
// question is open, so that the answer typed on the terminal is read by
// the reviewer (through its own descriptor for /dev/tty) and not by the
// command.
//
// Input waits for the terminal with poll(2) and reads only what poll
// reports is there. It never sets O_NONBLOCK on the terminal: the file
// description is shared with the user's shell, which would be left with
// a non-blocking terminal if sandboxd died.
type Input struct {
	src *os.File
	dst io.Writer

	// wake holds a token after a Release that Run has not yet seen, so a
	// held Run waits without polling a terminal it may not read.
	wake chan struct{}

	// mu guards holds, and Run holds it from checking holds until its
	// read has returned, so once Hold has taken it no read is in
	// progress, and none starts until the last Release.
	mu    sync.Mutex
	holds int // Hold calls not yet released
}

// NewInput returns an Input that relays src (typically the terminal on
// sandboxd's stdin) to dst (typically the pipe to the command's stdin).
func NewInput(src *os.File, dst io.Writer) *Input {
	return &Input{src: src, dst: dst, wake: make(chan struct{}, 1)}
}

// Hold stops the relay: when Hold returns, no read from the terminal is
// in progress and none will start until the matching Release. Bytes
// typed meanwhile stay in the terminal's input queue for whoever reads it
// next. Holds nest: the relay resumes after as many Releases as Holds.
// Bytes read before Hold may still be on their way to the command.
func (in *Input) Hold() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.holds++
}

// Release ends one Hold; when it ends the last, the relay resumes. A
// Release without a Hold does nothing.
func (in *Input) Release() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.holds == 0 {
		return
	}
	in.holds--
	if in.holds == 0 {
		select {
		case in.wake <- struct{}{}:
		default: // a token is already waiting
		}
	}
}

// Run copies from the terminal to the command until the terminal reports
// end of file (nil), ctx is done (ctx.Err()), or reading or writing
// fails. It returns within pollInterval of ctx being done unless it is
// blocked writing to dst, which closing dst ends. Call Run once.
func (in *Input) Run(ctx context.Context) error {
	rc, err := in.src.SyscallConn()
	if err != nil {
		return fmt.Errorf("termfilter: input %s: %w", in.src.Name(), err)
	}
	buf := make([]byte, 4096)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if in.held() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-in.wake:
			}
			continue
		}
		// The wait is outside mu, so Hold need not wait for it; read
		// looks again, under mu, before reading.
		ready, err := in.poll(rc, pollInterval)
		if err != nil {
			return err
		}
		if !ready {
			continue
		}
		n, eof, err := in.read(rc, buf)
		switch {
		case err != nil:
			return err
		case eof:
			return nil
		case n == 0:
			continue // held meanwhile, or another reader took the input
		}
		if _, err := in.dst.Write(buf[:n]); err != nil {
			return fmt.Errorf("termfilter: input to command: %w", err)
		}
	}
}

func (in *Input) held() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.holds > 0
}

// read reads what the terminal has, unless the relay is held: n == 0
// without eof means there was nothing to read.
func (in *Input) read(rc syscall.RawConn, buf []byte) (n int, eof bool, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.holds > 0 {
		return 0, false, nil
	}
	// Something may have taken the input since the wait (the reviewer,
	// if a Hold and its Release came in between), and a read with
	// nothing there would block, and every Hold with it.
	if ready, err := in.poll(rc, 0); err != nil || !ready {
		return 0, false, err
	}
	var rerr error
	cerr := rc.Control(func(fd uintptr) {
		for {
			n, rerr = unix.Read(int(fd), buf)
			if !errors.Is(rerr, unix.EINTR) {
				return
			}
		}
	})
	switch {
	case cerr != nil:
		return 0, false, fmt.Errorf("termfilter: input %s: %w", in.src.Name(), cerr)
	case errors.Is(rerr, unix.EAGAIN):
		// The descriptor was left non-blocking by someone else (as Go
		// does for files it opens itself) and the input is gone.
		return 0, false, nil
	case rerr != nil:
		return 0, false, fmt.Errorf("termfilter: read %s: %w", in.src.Name(), rerr)
	case n <= 0:
		return 0, true, nil
	}
	return n, false, nil
}

// poll waits up to timeout for the terminal to have input (or to hang up,
// which the next read reports).
func (in *Input) poll(rc syscall.RawConn, timeout time.Duration) (bool, error) {
	var (
		ready bool
		perr  error
	)
	cerr := rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			_, perr = unix.Poll(fds, int(timeout/time.Millisecond))
			if !errors.Is(perr, unix.EINTR) {
				break
			}
		}
		if perr == nil && fds[0].Revents&unix.POLLNVAL != 0 {
			perr = unix.EBADF
		}
		ready = fds[0].Revents&(unix.POLLIN|unix.POLLHUP|unix.POLLERR) != 0
	})
	if cerr != nil {
		return false, fmt.Errorf("termfilter: input %s: %w", in.src.Name(), cerr)
	}
	if perr != nil {
		return false, fmt.Errorf("termfilter: poll %s: %w", in.src.Name(), perr)
	}
	return ready, nil
}
