package client

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/sandboxd/sandboxd/publicerr"
)

// TrustedSocket checks that path is a socket a client may send its
// environment and tokens to: owned by root, reached only through
// directories (and symlinks) that root owns and nobody else may write.
// SANDBOXD_SOCKET may name anything, another user's socket included.
func TrustedSocket(path string) error {
	return trusted(path, "the daemon's socket", os.ModeSocket)
}

// TrustedFile checks that path is a regular file of root's that only
// root may change, reached as TrustedSocket's socket is: the daemon's
// word that a file is its own (the audit log's public key) is not
// taken for it.
func TrustedFile(path string) error {
	if err := trusted(path, "the daemon's file", 0); err != nil {
		return err
	}
	real, _ := filepath.EvalSymlinks(path)
	if st, err := os.Lstat(real); err != nil || st.Mode().Perm()&0o022 != 0 {
		return publicerr.New(fmt.Sprintf("the daemon's file %s is not trusted: others may write it", path))
	}
	return nil
}

// TrustedDir checks that path is a directory of root's that only root
// may change, reached as TrustedSocket's socket is: the daemon keeps its
// audit log only in such a one, where nobody else can plant a link or
// remove a file.
func TrustedDir(path string) error {
	if err := trusted(path, "the directory", os.ModeDir); err != nil {
		return err
	}
	real, _ := filepath.EvalSymlinks(path)
	if st, err := os.Lstat(real); err != nil || st.Mode().Perm()&0o022 != 0 {
		return publicerr.New(fmt.Sprintf("the directory %s is not trusted: others may write it", path))
	}
	return nil
}

// trusted checks that path is of type kind (0: a regular file), root's,
// reached only through directories and symlinks of root's that nobody
// else may write.
func trusted(path, what string, kind os.FileMode) error {
	if !filepath.IsAbs(path) {
		return publicerr.New(fmt.Sprintf("%s %s is not an absolute path", what, path))
	}
	path = filepath.Clean(path)
	unreachable := func(err error) error {
		return publicerr.Wrap(err, fmt.Sprintf("%s %s cannot be reached", what, path))
	}
	// Each prefix as given: a symlink on the way must be root's, in a
	// directory that is (checked at the step before).
	for p := path; ; p = filepath.Dir(p) {
		st, err := os.Lstat(p)
		if err != nil {
			return unreachable(err)
		}
		if st.Mode()&os.ModeSymlink != 0 && owner(st) != 0 {
			return untrusted(what, path, p+" is a symlink that is not root's")
		}
		if p == "/" {
			break
		}
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return unreachable(err)
	}
	st, err := os.Lstat(real)
	if err != nil {
		return unreachable(err)
	}
	if st.Mode().Type() != kind || owner(st) != 0 {
		noun := map[os.FileMode]string{0: "file", os.ModeSocket: "socket", os.ModeDir: "directory"}[kind]
		return untrusted(what, path, real+" is not a "+noun+" of root's")
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		st, err := os.Lstat(d)
		if err != nil {
			return unreachable(err)
		}
		if owner(st) != 0 || st.Mode().Perm()&0o022 != 0 {
			return untrusted(what, path, d+" is not a directory only root may write")
		}
		if d == "/" {
			break
		}
	}
	return nil
}

func owner(st os.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}

func untrusted(what, path, why string) error {
	return publicerr.New(fmt.Sprintf("%s %s is not trusted: %s (another user could have put it there)", what, path, why))
}
