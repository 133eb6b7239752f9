//go:build !linux || !cgo

package seccomp

import (
	"errors"

	"github.com/sandboxd/sandboxd/publicerr"
)

// Compile fails closed where libseccomp is not linked in: sandboxd never
// runs a command without its system call filter.
func Compile(r Rules) ([]byte, error) {
	return nil, publicerr.Wrap(errors.New("seccomp: built without libseccomp (cgo); cannot build the system call filter"),
		"sandboxd was built without libseccomp (cgo)")
}
