package publicerr

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
)

// Error is an error whose message is safe to show. Cause, if set, is the
// internal error it stands for: logged, never shown.
type Error struct {
	msg   string
	cause error
}

// Error returns the public sentence.
func (e *Error) Error() string { return e.msg }

// Unwrap returns the internal cause, so errors.Is still sees it.
func (e *Error) Unwrap() error { return e.cause }

// New returns an error whose whole message is safe to show.
func New(msg string) error { return &Error{msg: msg} }

// Wrap returns an error that shows msg and carries cause for the log.
func Wrap(cause error, msg string) error { return &Error{msg: msg, cause: cause} }

// Errorf is Wrap with a formatted sentence. Its arguments are shown, so
// none may be an error or a path of sandboxd's own state: only names the
// user gave (a workspace, a policy file) and sandboxd's own words.
func Errorf(cause error, format string, args ...any) error {
	return &Error{msg: fmt.Sprintf(format, args...), cause: cause}
}

// Message returns the public sentence of the outermost public error in
// err's chain, or fallback when there is none.
func Message(err error, fallback string) string {
	var e *Error
	if errors.As(err, &e) {
		return e.msg
	}
	return fallback
}

// Unknown is what Reason says of an error it has no words for.
const Unknown = "an internal error"

// Reason says why err happened, in words that may follow a sentence of
// sandboxd's own in parentheses ("... cannot be read (permission
// denied)"): the public sentence of a public error in err's chain; else
// the OS's reason when err is a failed system call (its error number's
// text, without the operation and path os puts before it); else
// Unknown. The caller logs err itself when the cause matters.
func Reason(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return ""
	case Is(err):
		return Message(err, Unknown)
	case errors.As(err, &errno):
		return errno.Error()
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT.Error()
	case errors.Is(err, fs.ErrPermission):
		return syscall.EACCES.Error()
	case errors.Is(err, fs.ErrExist):
		return syscall.EEXIST.Error()
	}
	return Unknown
}

// Is reports whether err carries a public sentence.
func Is(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// Internal is err's whole text, for the log only: err.Error() with the
// internal cause of its outermost public error after that error's
// sentence, in brackets, and so on down the chain. err.Error() alone
// stops at a public sentence, so logging err itself would lose the cause.
func Internal(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	var e *Error
	if !errors.As(err, &e) || e.cause == nil {
		return s
	}
	withCause := e.msg + " [cause: " + Internal(e.cause) + "]"
	if i := strings.Index(s, e.msg); i >= 0 {
		return s[:i] + withCause + s[i+len(e.msg):]
	}
	return s + " [cause: " + Internal(e.cause) + "]"
}
