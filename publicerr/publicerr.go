package publicerr

import "errors"

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

// Message returns the public sentence of the outermost public error in
// err's chain, or fallback when there is none.
func Message(err error, fallback string) string {
	var e *Error
	if errors.As(err, &e) {
		return e.msg
	}
	return fallback
}

// Is reports whether err carries a public sentence.
func Is(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
