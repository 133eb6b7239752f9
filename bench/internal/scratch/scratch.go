package scratch

import (
	"os"
	"path/filepath"
)

// Workspace creates an empty workspace beside the checkout (not under
// /tmp: the sandbox has a private /tmp) and returns its absolute path and
// a function that removes it.
func Workspace() (string, func(), error) {
	dir, err := os.MkdirTemp(".", ".bench-ws-")
	if err != nil {
		return "", nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return abs, func() { os.RemoveAll(abs) }, nil
}
