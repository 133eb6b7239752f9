package policy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// maxFileSize bounds the size of a policy file.
const maxFileSize = 1 << 20

// Load reads the user policy then the workspace policy and merges them.
//
// userPath is the user policy file. When userExplicit is false (the default
// location) and the file does not exist, the built-in defaults are used
// silently; when userExplicit is true, a missing file is an error. wsPaths are
// the workspace policy (<workspace>/.sandboxd.toml), then those of the
// directories between the workspace and the command's working directory,
// each applied in turn; any may be missing or empty (no workspace
// policy). Unreadable files are errors. A workspace
// policy may only tighten what it is applied to (see Tighten). To keep a
// sandboxed command from turning it into a reader of other files, the
// workspace policy must be a regular file that is not a symbolic link and
// has a single hard link.
//
// All errors are *Error.
func Load(userPath string, userExplicit bool, wsPaths ...string) (Policy, error) {
	return LoadUnder(nil, userPath, userExplicit, wsPaths...)
}

// LoadUnder is Load under the machine policy m (nil: none, as Load): the
// user policy is merged under it (UnderMachine) before the workspace
// policies tighten the result.
func LoadUnder(m *Machine, userPath string, userExplicit bool, wsPaths ...string) (Policy, error) {
	user, userSet := Default(), KeySet{}
	data, err := readUserFile(userPath)
	switch {
	case err == nil:
		if user, userSet, err = ParseWithKeys(userPath, data, user); err != nil {
			return Policy{}, err
		}
	case errors.Is(err, fs.ErrNotExist) && !userExplicit:
		// No user policy: defaults.
	default:
		return Policy{}, fileError(userPath, err)
	}
	if m != nil {
		if user, err = UnderMachine(*m, user, userPath, userSet); err != nil {
			return Policy{}, err
		}
	}

	for _, wsPath := range wsPaths {
		if wsPath == "" {
			continue
		}
		if user, err = tightenWith(user, wsPath); err != nil {
			return Policy{}, err
		}
	}
	return user, nil
}

// tightenWith tightens p with the workspace policy at wsPath, if any.
func tightenWith(p Policy, wsPath string) (Policy, error) {
	data, err := readWorkspaceFile(wsPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return p, nil
	case err != nil:
		return Policy{}, fileError(wsPath, err)
	}
	ws, keys, err := ParseWithKeys(wsPath, data, p)
	if err != nil {
		return Policy{}, err
	}
	return Tighten(p, ws, wsPath, keys)
}

// fileError wraps an error reading a whole file.
func fileError(name string, err error) *Error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		// The syscall's reason, as sandboxd gives a kernel's: in
		// parentheses after its own words.
		return &Error{File: name, Msg: "cannot read policy file (" + sanitize(pe.Err.Error()) + ")", cause: err}
	}
	return &Error{File: name, Msg: "cannot read policy file: " + sanitize(err.Error()), cause: err}
}

// readUserFile reads the user policy (symbolic links are followed).
func readUserFile(name string) ([]byte, error) {
	if name == "" {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readRegular(f)
}

// readWorkspaceFile reads the workspace policy without following a symbolic
// link in the last component and refuses files with several hard links, so
// that the file cannot stand in for another file of the user's.
func readWorkspaceFile(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, errors.New("is a symbolic link; a workspace policy must be a regular file")
		}
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && st.Mode().IsRegular() && sys.Nlink > 1 {
		return nil, fmt.Errorf("has %d hard links; a workspace policy must have exactly one", sys.Nlink)
	}
	return readRegular(f)
}

// readRegular reads an open regular file of at most maxFileSize bytes.
func readRegular(f *os.File) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("larger than %d bytes", maxFileSize)
	}
	return data, nil
}
