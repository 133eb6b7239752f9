package daemon

import (
	"errors"
	"net"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/publicerr"
)

// Listen is the daemon's socket: it makes the socket's directory (root's,
// 0755) when it is missing and refuses one that is there but not only
// root's to write, replaces a socket left by an earlier daemon, starts
// the callers' tokens beside it, listens, and opens every user to
// connect (0666): the peer's credentials and token decide, not the
// mode. euid is the user the daemon runs as, which must be root.
func Listen(socket string, euid int) (*net.UnixListener, *Tokens, error) {
	if euid != 0 {
		return nil, nil, publicerr.New("sandboxd serve runs as root: it acts for every user of the machine, each with that user's rights")
	}
	if !filepath.IsAbs(socket) {
		return nil, nil, publicerr.New("--socket must be an absolute path")
	}
	dir := filepath.Dir(socket)
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, publicerr.Wrap(err, "the socket's directory "+dir+" cannot be made")
		}
	}
	// A directory that was there is never taken over: it must already be
	// one only root may write, as every client checks.
	if st, err := os.Lstat(dir); err != nil || !st.IsDir() || owner(st) != 0 || st.Mode().Perm()&0o022 != 0 {
		return nil, nil, publicerr.New("the socket's directory " + dir + " must be a directory of root's that nobody else may write")
	}
	if st, err := os.Lstat(socket); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, nil, publicerr.New(socket + " exists and is not a socket")
		}
		os.Remove(socket)
	}
	tokens, err := NewTokens(filepath.Join(dir, "tokens"))
	if err != nil {
		return nil, nil, publicerr.Wrap(err, "the token directory cannot be made")
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return nil, nil, publicerr.Wrap(err, "cannot listen on "+socket)
	}
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(socket, 0o666); err != nil {
		ln.Close()
		return nil, nil, publicerr.Wrap(err, "cannot open "+socket+" to callers")
	}
	return ln, tokens, nil
}
