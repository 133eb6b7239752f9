package machine

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/policy"
)

// maxFile bounds the configuration and each key file.
const maxFile = 1 << 20

// Load reads the machine configuration at path, as root, at the
// daemon's start: nil (no configuration) when path is the default and
// absent; an error when an explicit path is. The file, and each
// reviewer's key file, must be root's in directories that are root's
// and that no one else may write, from / down (it decides what every
// user may do, and who may spend the machine's model keys); a key file
// may be read by root only (mode 0600 or stricter). Errors are
// *policy.Error.
func Load(path string, explicit bool, ids IDs) (*Config, error) {
	data, err := readRoots(path, false)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		return nil, nil
	case err != nil:
		return nil, &policy.Error{File: path, Msg: "the machine configuration cannot be used" + why(err)}
	}
	c, err := Parse(path, data, ids)
	if err != nil {
		return nil, err
	}
	// Each key file is read once, whichever reviewers name it.
	keys := map[string]string{}
	readKey := func(r *Reviewer) error {
		if r.KeyFile == "" {
			return nil
		}
		k, ok := keys[r.KeyFile]
		if !ok {
			if k, err = readKey(r.KeyFile); err != nil {
				return &policy.Error{File: path, Line: r.line, Key: r.at, Msg: "the key file " + r.KeyFile + " cannot be used" + why(err)}
			}
			keys[r.KeyFile] = k
		}
		r.Key = k
		return nil
	}
	if c.Reviewer != nil {
		if err := readKey(c.Reviewer); err != nil {
			return nil, err
		}
	}
	for uid, r := range c.Users {
		if err := readKey(&r); err != nil {
			return nil, err
		}
		c.Users[uid] = r
	}
	return c, nil
}

// readKey reads a model key: root's alone, one line of printable text.
func readKey(path string) (string, error) {
	data, err := readRoots(path, true)
	if err != nil {
		return "", err
	}
	k := strings.TrimSpace(string(data))
	if k == "" {
		return "", errors.New("it is empty")
	}
	for _, c := range k {
		if c < 0x21 || c == 0x7f {
			return "", errors.New("it holds more than one word (a key is one line of printable text)")
		}
	}
	return k, nil
}

// why ends a sentence about a file that cannot be used: the system's
// reason in parentheses, as sandboxd gives a kernel's, or its own.
func why(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return " (" + pe.Err.Error() + ")"
	}
	return ": " + err.Error()
}

// readRoots reads a file only root can have written: a regular file of
// root's, writable by no one else (secret: and readable by no one
// else), reached through directories of root's that no one else may
// write, both as path names them and as its links resolve.
func readRoots(path string, secret bool) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, errors.New("it is not an absolute path")
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	for _, dir := range []string{filepath.Dir(filepath.Clean(path)), filepath.Dir(real)} {
		if err := rootsChain(dir); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.Mode().IsRegular() || sys == nil:
		return nil, errors.New("it is not a regular file")
	case sys.Uid != 0:
		return nil, fmt.Errorf("it is owned by uid %d, not root", sys.Uid)
	case st.Mode().Perm()&0o022 != 0:
		return nil, fmt.Errorf("it may be written by others than root (mode %04o)", st.Mode().Perm())
	case secret && st.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("it may be read by others than root (mode %04o; want 0600 or stricter)", st.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFile {
		return nil, fmt.Errorf("it is larger than %d bytes", maxFile)
	}
	return data, nil
}

// rootsChain checks dir and each directory above it: root's, and
// writable by no one else (a sticky /tmp is not root's alone either:
// sshd's rule for its keys). A symbolic link on the way must be root's.
func rootsChain(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Lstat(d)
		if err != nil {
			return err
		}
		sys, _ := st.Sys().(*syscall.Stat_t)
		switch {
		case sys == nil:
			return fmt.Errorf("its directory %s cannot be checked", d)
		case sys.Uid != 0:
			return fmt.Errorf("its directory %s is owned by uid %d, not root", d, sys.Uid)
		case st.Mode()&fs.ModeSymlink == 0 && st.Mode().Perm()&0o022 != 0:
			return fmt.Errorf("its directory %s may be written by others than root (mode %04o)", d, st.Mode().Perm())
		}
		if d == "/" {
			return nil
		}
	}
}

// SystemIDs resolves names with the system's user and group databases.
type SystemIDs struct{}

// UserID is the uid of user name.
func (SystemIDs) UserID(name string) (int, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(u.Uid)
}

// GroupID is the gid of group name.
func (SystemIDs) GroupID(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
}
