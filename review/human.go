package review

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"

	"strings"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/termfilter"
	"golang.org/x/sys/unix"
)

// DefaultTimeout is how long a person has to answer.
const DefaultTimeout = 60 * time.Second

// Human asks the person at sandboxd's controlling terminal. Nothing the
// command printed can stand in for the prompt: the command's output to a
// terminal passes through termfilter, which drops every sequence that
// could move the cursor or rewrite lines and removes reverse video, which
// frames the question; every value in the question is escaped
// (termfilter.Escape); while the question is open the command's terminal
// output is held back and it reads nothing from the terminal (Hold); and
// the prompt is written and read on /dev/tty directly, not on the
// command's streams. No terminal, no answer in time, or anything but
// "y"/"yes" is a deny. A question the model denied as critical and
// deferred to the person (broker.Deferred), or about a production target
// (critical before the model is asked), takes the typed phrase
// "BREAK-GLASS CODE", as `sandboxd break-glass` does, not a "y".
type Human struct {
	// TTY is the terminal device (default /dev/tty).
	TTY string
	// File, if set, is the terminal, already open (one a client of the
	// daemon passed, checked to be its controlling terminal): asked on
	// it instead of TTY.
	File *os.File
	// Timeout bounds the wait for an answer (default DefaultTimeout).
	Timeout time.Duration
	// Hold, if set, holds the command's use of the terminal (its output
	// and its input) while a question is open.
	Hold Holder
	// Page, if set, says where else the question may be answered (the
	// daemon's approvals page): a line under the notification. Never the
	// page's link, which only `sandboxd approve --page` shows.
	Page string
}

// notification is what the terminal is sent before a question: OSC 9
// (iTerm2, Windows Terminal, kitty, WezTerm, ghostty) and OSC 777
// (rxvt-unicode, foot, VTE) desktop notifications, which terminals that
// know neither ignore. Each ends in ST (ESC \), not BEL, which a
// terminal that ignores the sequence could still ring. Its text is
// fixed: nothing of the command's reaches it.
const notification = "\x1b]9;sandboxd: a question waits for your answer\x1b\\" +
	"\x1b]777;notify;sandboxd;a question waits for your answer\x1b\\"

// Holder holds back a command's terminal output and input until Release.
type Holder interface {
	Hold()
	Release()
}

// Reachable reports whether the terminal can be opened: without one
// nobody can be asked, and the broker denies instead of waiting.
func (h *Human) Reachable() (bool, string) {
	fd, err := h.open(unix.O_RDWR)
	if err != nil {
		return false, noTerminal
	}
	unix.Close(fd)
	return true, ""
}

// noTerminal is the deny when nobody can be asked.
const noTerminal = "no terminal to ask a person on"

// open opens the terminal anew with flags, or for File, a duplicate of
// its descriptor (reopening it by name could reach another terminal:
// /dev/tty is each opener's own). File's description is the one its
// sender opened for this (a client passes its own open of /dev/tty),
// so making it non-blocking for the read touches nobody else's.
func (h *Human) open(flags int) (int, error) {
	if h.File != nil {
		fd, err := unix.FcntlInt(h.File.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err == nil && flags&unix.O_NONBLOCK != 0 {
			if err = unix.SetNonblock(fd, true); err != nil {
				unix.Close(fd)
			}
		}
		return fd, err
	}
	tty := h.TTY
	if tty == "" {
		tty = "/dev/tty"
	}
	return unix.Open(tty, flags|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
}

// Review shows exactly what would be allowed and takes one answer.
func (h *Human) Review(ctx context.Context, req grants.Request) (broker.Decision, error) {
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if dl, ok := ctx.Deadline(); ok && req.Held {
		// A held connection waits as long as the proxy holds it (the
		// policy's network.hold_timeout), not the default for a retry.
		timeout = time.Until(dl)
	}
	// nobody is the deny when no person answered: "decided by: human"
	// is shown only for a person's own answer.
	nobody := func(why string) (broker.Decision, error) {
		return broker.Decision{Outcome: broker.Deny, Rationale: why, Source: broker.SourceNoReviewer}, nil
	}
	fd, err := h.open(unix.O_RDWR)
	if err != nil {
		return nobody(noTerminal)
	}
	defer unix.Close(fd)
	if h.Hold != nil {
		// Nothing the command prints can land inside or after the
		// question before it is answered, and the answer is the person's.
		h.Hold.Hold()
		defer h.Hold.Release()
	}
	// Drop anything typed before the question was asked.
	unix.IoctlSetInt(fd, unix.TCFLSH, unix.TCIFLUSH)
	prompt, want, err := question(ctx, req)
	if err != nil {
		return nobody("the question could not be made")
	}
	note := notification
	if h.Page != "" {
		note += "\r\nsandboxd: " + termfilter.Escape(h.Page) + "\r\n"
	}
	prompt = append([]byte(note), prompt...)
	if _, err := unix.Write(fd, prompt); err != nil {
		return nobody("could not write to the terminal")
	}
	// Read from a non-blocking descriptor of its own: a poll that saw
	// input another reader took must not leave the read waiting past the
	// timeout.
	rfd, err := h.open(unix.O_RDONLY | unix.O_NONBLOCK)
	if err != nil {
		return nobody("could not read the terminal")
	}
	defer unix.Close(rfd)
	answer, err := readLine(ctx, rfd, timeout)
	if err != nil {
		unix.Write(fd, []byte("\r\n"))
		return nobody(noAnswer(err))
	}
	if want(answer) {
		return broker.Decision{Outcome: broker.Allow, Rationale: "allowed by the person at the terminal", Source: broker.SourceHuman}, nil
	}
	return broker.Decision{Outcome: broker.Deny, Rationale: "denied by the person at the terminal", Source: broker.SourceHuman}, nil
}

// question is the prompt for req and the test of an answer that allows:
// "y" or "yes", or for a question the model denied as critical, the
// break-glass phrase it shows.
func question(ctx context.Context, req grants.Request) ([]byte, func(string) bool, error) {
	target := req.Path
	if req.Surface == boundary.Network {
		target = req.DestinationText()
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "\r\n%s---- sandboxd: permission request ----%s\r\n", termfilter.FrameOn, termfilter.FrameOff)
	fmt.Fprintf(&b, "  allow:   %s %s\r\n", safe(string(req.Operation)), safe(target))
	fmt.Fprintf(&b, "  command: %s\r\n", safe(req.Command))
	fmt.Fprintf(&b, "  cwd:     %s\r\n", safe(req.Cwd))
	if req.Intent != "" {
		fmt.Fprintf(&b, "  intent:  %s\r\n", safe(req.Intent))
	}
	yes := func(a string) bool {
		a = strings.ToLower(strings.TrimSpace(a))
		return a == "y" || a == "yes"
	}
	question := "Allow exactly this, once?"
	if req.Held {
		question = "Allow connections to this destination? (the command waits)"
	}
	if model, ok := broker.Deferred(ctx); ok {
		judged := "The model judged this critical."
		if model.Production != "" {
			// Nobody judged it: its name made it critical.
			fmt.Fprintf(&b, "  production: %s\r\n", safe(model.Rationale))
			judged = "This is a production target (marker " + safe(model.Production) + ")."
		} else {
			fmt.Fprintf(&b, "  model:   denied it (risk %s): %s\r\n", safe(string(model.RiskLevel)), safe(model.Rationale))
		}
		if model.RiskLevel == broker.RiskCritical || model.Production != "" {
			code, err := BreakGlassCode()
			if err != nil {
				return nil, nil, err
			}
			phrase := "BREAK-GLASS " + code
			question = judged + " To allow it once, type " + phrase + "; anything else denies:"
			yes = func(a string) bool { return strings.TrimSpace(a) == phrase }
			fmt.Fprintf(&b, "%s%s%s ", termfilter.FrameOn, question, termfilter.FrameOff)
			return b.Bytes(), yes, nil
		}
	}
	fmt.Fprintf(&b, "%s%s [y/N]%s ", termfilter.FrameOn, question, termfilter.FrameOff)
	return b.Bytes(), yes, nil
}

// BreakGlassCode is 8 characters a person reads and types (the approvals
// page shows one per critical question too): uniform over
// an unambiguous alphabet.
func BreakGlassCode() (string, error) {
	const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)] // 256 is a multiple of 32: no bias
	}
	return string(b[:]), nil
}

// Why readLine got no answer.
var (
	errTimedOut = errors.New("timed out")
	errClosed   = errors.New("terminal closed")
	errTooLong  = errors.New("answer too long")
)

// NoAnswer is the sentence for a question ReadAnswer got no answer to:
// fixed, never an errno's text.
func NoAnswer(err error) string { return noAnswer(err) }

// ReadAnswer reads one line (at most 64 bytes) typed on the non-blocking
// terminal descriptor fd within timeout: the person's answer to a
// question sandboxd showed (approve and break-glass use it too).
func ReadAnswer(ctx context.Context, fd int, timeout time.Duration) (string, error) {
	return readLine(ctx, fd, timeout)
}

// noAnswer is the rationale for a question nobody answered: a fixed
// sentence, never an errno's text.
func noAnswer(err error) string {
	switch {
	case errors.Is(err, errTimedOut):
		return "no answer in time"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "the question was withdrawn before it was answered"
	case errors.Is(err, errClosed):
		return "the terminal was closed before an answer came"
	case errors.Is(err, errTooLong):
		return "the answer was too long"
	}
	return "the terminal could not be read"
}

// readLine reads one line (at most 64 bytes) within timeout.
func readLine(ctx context.Context, fd int, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	var line []byte
	buf := make([]byte, 64)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return "", errTimedOut
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		wait := min(left, 200*time.Millisecond)
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, int(wait.Milliseconds())+1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return "", err
		}
		if n == 0 {
			continue
		}
		if pfd[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0 && pfd[0].Revents&unix.POLLIN == 0 {
			return "", errClosed
		}
		r, err := unix.Read(fd, buf)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			return "", err
		}
		if r == 0 {
			return "", errClosed
		}
		line = append(line, buf[:r]...)
		if i := bytes.IndexAny(line, "\r\n"); i >= 0 {
			return string(line[:i]), nil
		}
		if len(line) > 64 {
			return "", errTooLong
		}
	}
}

// safe shows a string from the command (a path, the command itself) so
// it cannot carry terminal controls into the prompt.
func safe(s string) string {
	if s == "" {
		return `""`
	}
	return termfilter.Escape(s)
}

// Confirm asks the person at tty (default /dev/tty) a yes/no question,
// framed as sandboxd's own, and reports whether they answered yes. why
// says, when not, what happened (a fixed sentence).
func Confirm(ctx context.Context, tty, question string, timeout time.Duration) (yes bool, why string) {
	if tty == "" {
		tty = "/dev/tty"
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	fd, err := unix.Open(tty, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, noTerminal
	}
	defer unix.Close(fd)
	unix.IoctlSetInt(fd, unix.TCFLSH, unix.TCIFLUSH)
	prompt := fmt.Sprintf("%s%s [y/N]%s ", termfilter.FrameOn, safe(question), termfilter.FrameOff)
	if _, err := unix.Write(fd, []byte(prompt)); err != nil {
		return false, "could not write to the terminal"
	}
	rfd, err := unix.Open(tty, unix.O_RDONLY|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return false, "could not read the terminal"
	}
	defer unix.Close(rfd)
	answer, err := readLine(ctx, rfd, timeout)
	if err != nil {
		unix.Write(fd, []byte("\r\n"))
		return false, noAnswer(err)
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return true, ""
	}
	return false, "the answer was no"
}
