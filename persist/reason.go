package persist

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/pelletier/go-toml/v2"
	"github.com/sandboxd/sandboxd/publicerr"
)

// reason says why err happened, in words a verdict may carry: verdicts
// are shown to the person and the agent. A failed system call is its
// error number's text, without the operation and path os puts before it
// (a path in the copy-on-write layer is sandboxd's state); an error that
// carries a public sentence is that sentence; persist's own errors (a
// parser's "line 3 is not one hg reads", an index that "is cut short")
// are worded for the verdict and kept as they are. The libraries persist
// reads with are wrapped where they are called (syntaxError,
// inflateError), so their prefixes never reach a verdict.
func reason(err error) string {
	var errno syscall.Errno
	switch {
	case publicerr.Is(err):
		return publicerr.Message(err, publicerr.Unknown)
	case errors.As(err, &errno):
		return errno.Error()
	}
	return err.Error()
}

// syntaxError is a settings file the format's parser refused: where, and
// what it found, without the library's prefix ("toml: ", "yaml: ").
func syntaxError(format string, err error) error {
	msg := err.Error()
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, _ := de.Position()
		msg = fmt.Sprintf("line %d: %s", row, strings.TrimPrefix(msg, "toml: "))
	}
	msg = strings.TrimPrefix(msg, strings.ToLower(format)+": ")
	return publicerr.Errorf(err, "not %s sandboxd can read (%s)", format, msg)
}

// inflateError is an object's compressed data that could not be read:
// the OS's error as it is (reason gives its errno), zlib's in words of
// sandboxd's.
func inflateError(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return err
	}
	return publicerr.Wrap(err, "its compressed data is corrupt")
}
