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

// Policy copies the policy file src into the workspace ws as its
// .sandboxd.toml; nothing when src is "".
func Policy(ws, src string) error {
	if src == "" {
		return nil
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(ws, ".sandboxd.toml"), b, 0o644)
}
