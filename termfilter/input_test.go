package termfilter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY allocates a pseudo-terminal: the master (the "keyboard"), the
// slave opened as sandboxd's stdin would be (blocking, outside Go's
// poller) and its path, for a second reader. The slave reads bytes as
// they are typed, without echo.
func openPTY(t *testing.T) (master, slave *os.File, path string) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skip("no pseudo-terminals:", err)
	}
	t.Cleanup(func() { m.Close() })
	mfd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal("unlockpt:", err)
	}
	n, err := unix.IoctlGetInt(mfd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal("ptsname:", err)
	}
	path = fmt.Sprintf("/dev/pts/%d", n)
	sfd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := os.NewFile(uintptr(sfd), path)
	t.Cleanup(func() { s.Close() })
	tio, err := unix.IoctlGetTermios(sfd, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag &^= unix.ICANON | unix.ECHO
	tio.Cc[unix.VMIN], tio.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(sfd, unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	return m, s, path
}

func typeOn(t *testing.T, master *os.File, s string) {
	t.Helper()
	if _, err := master.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// readOther reads len(want) bytes from the terminal at path through a
// descriptor of its own, as the reviewer reads /dev/tty.
func readOther(t *testing.T, path, want string) {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var got []byte
	buf := make([]byte, 64)
	deadline := time.Now().Add(2 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(fds, 50); err != nil || n == 0 {
			continue
		}
		n, err := unix.Read(fd, buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != want {
		t.Fatalf("second reader got %q, want %q", got, want)
	}
}

func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	var flags int
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) { flags, err = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	if err != nil {
		t.Fatal(err)
	}
	return flags&unix.O_NONBLOCK != 0
}

// run is an Input's Run under way.
type run struct {
	cancel   context.CancelFunc
	finished chan struct{} // closed when Run has returned
	err      error         // Run's result, once finished
}

// start runs in until the test ends.
func start(t *testing.T, in *Input) *run {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{cancel: cancel, finished: make(chan struct{})}
	go func() {
		defer close(r.finished)
		r.err = in.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		if _, ok := r.wait(5 * time.Second); !ok {
			t.Error("Run did not return after cancel")
		}
	})
	return r
}

// wait waits up to d for Run to return, and reports what it returned.
func (r *run) wait(d time.Duration) (error, bool) {
	select {
	case <-r.finished:
		return r.err, true
	case <-time.After(d):
		return nil, false
	}
}

// While held, what is typed stays on the terminal for the reviewer; after
// Release it goes to the command again.
func TestInputHold(t *testing.T) {
	checkGoroutines(t)
	master, slave, path := openPTY(t)
	var dst syncBuffer
	in := NewInput(slave, &dst)
	start(t, in)

	typeOn(t, master, "ls\n")
	waitFor(t, &dst, "ls\n")

	// Hold does not wait for Run's poll to time out.
	for range 10 {
		began := time.Now()
		in.Hold()
		if d := time.Since(began); d > pollInterval/2 {
			t.Errorf("Hold took %v", d)
		}
		in.Release()
	}

	in.Hold()
	typeOn(t, master, "y\n")
	time.Sleep(3 * pollInterval)
	if got := dst.String(); got != "ls\n" {
		t.Fatalf("the command got %q while held", got)
	}
	readOther(t, path, "y\n")
	in.Release()

	// Nested: still held after the inner Release.
	in.Hold()
	in.Hold()
	in.Release()
	typeOn(t, master, "n\n")
	time.Sleep(3 * pollInterval)
	if got := dst.String(); got != "ls\n" {
		t.Fatalf("the command got %q while held", got)
	}
	readOther(t, path, "n\n")
	in.Release()

	typeOn(t, master, "pwd\n")
	waitFor(t, &dst, "ls\npwd\n")

	// Typed while held and read by nobody: the command gets it after.
	in.Hold()
	typeOn(t, master, "late\n")
	time.Sleep(3 * pollInterval)
	if got := dst.String(); got != "ls\npwd\n" {
		t.Fatalf("the command got %q while held", got)
	}
	in.Release()
	waitFor(t, &dst, "ls\npwd\nlate\n")

	if nonblocking(t, slave) {
		t.Error("the terminal was left non-blocking")
	}
}

// Run ends on cancel though nothing is ever typed, held or not.
func TestInputCancel(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run(fmt.Sprint("held=", hold), func(t *testing.T) {
			checkGoroutines(t)
			_, slave, _ := openPTY(t)
			in := NewInput(slave, io.Discard)
			if hold {
				in.Hold()
			}
			r := start(t, in)
			time.Sleep(2 * pollInterval)
			r.cancel()
			err, ok := r.wait(4 * pollInterval)
			if !ok {
				t.Fatal("Run did not return promptly after cancel")
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Run = %v, want %v", err, context.Canceled)
			}
		})
	}
}

// A source that is not a terminal works too, and its end ends Run.
func TestInputPipe(t *testing.T) {
	checkGoroutines(t)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close() })
	var dst syncBuffer
	in := NewInput(pr, &dst)
	r := start(t, in)
	io.WriteString(pw, "hello\n")
	waitFor(t, &dst, "hello\n")
	pw.Close()
	err, ok := r.wait(5 * time.Second)
	if !ok {
		t.Fatal("Run did not return at end of input")
	}
	if err != nil {
		t.Fatalf("Run at end of input = %v", err)
	}
}

func TestInputWriteError(t *testing.T) {
	checkGoroutines(t)
	master, slave, _ := openPTY(t)
	gone := errors.New("command exited")
	in := NewInput(slave, failWriter{gone})
	r := start(t, in)
	typeOn(t, master, "x")
	err, ok := r.wait(5 * time.Second)
	if !ok {
		t.Fatal("Run did not return on a write error")
	}
	if !errors.Is(err, gone) {
		t.Fatalf("Run = %v, want %v", err, gone)
	}
}
