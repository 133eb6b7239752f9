package daemon

import (
	"errors"
	"net"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/daemon/client"
	"github.com/sandboxd/sandboxd/publicerr"
	"golang.org/x/sys/unix"
)

// Listen is the daemon's socket: it makes the socket's directory (root's,
// 0755) when it is missing and refuses one that is there but not only
// root's to write, replaces a socket left by an earlier daemon, starts
// the callers' tokens beside it, listens, and opens every user to
// connect (0666): the peer's credentials and token decide, not the
// mode. euid is the user the daemon runs as, which must be root.
func Listen(socket string, euid int) (*net.UnixListener, *Tokens, error) {
	if err := checkSocketPath(socket, euid); err != nil {
		return nil, nil, err
	}
	dir := filepath.Dir(socket)
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, publicerr.Wrap(err, "the socket's directory "+dir+" cannot be made")
		}
	}
	if err := checkSocketDir(dir); err != nil {
		return nil, nil, err
	}
	if st, err := os.Lstat(socket); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, nil, publicerr.New(socket + " exists and is not a socket")
		}
		os.Remove(socket)
	}
	tokens, err := NewTokens(filepath.Join(dir, client.TokenDir))
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

// Inherited is the daemon's socket when the service manager made it
// (systemd's socket activation): f is the listening socket it passed.
// It must be a unix stream socket, listening, bound to socket, a socket
// of root's in a directory that passes Listen's checks: a socket passed
// for another path, or one in a directory another user may write, is
// refused rather than served. The callers' tokens start beside it, as
// Listen's do. The socket's file and mode are the service manager's
// (its socket unit's SocketMode): the daemon neither changes nor removes
// them, so the socket outlives a restart. f is the caller's to close.
func Inherited(f *os.File, socket string, euid int) (*net.UnixListener, *Tokens, error) {
	if err := checkSocketPath(socket, euid); err != nil {
		return nil, nil, err
	}
	if err := checkInherited(int(f.Fd()), socket); err != nil {
		return nil, nil, err
	}
	socket = filepath.Clean(socket)
	dir := filepath.Dir(socket)
	if err := checkSocketDir(dir); err != nil {
		return nil, nil, err
	}
	if st, err := os.Lstat(socket); err != nil || st.Mode()&os.ModeSocket == 0 || owner(st) != 0 {
		return nil, nil, publicerr.New("the socket passed by the service manager is not at " + socket + " as a socket of root's")
	}
	tokens, err := NewTokens(filepath.Join(dir, client.TokenDir))
	if err != nil {
		return nil, nil, publicerr.Wrap(err, "the token directory cannot be made")
	}
	l, err := net.FileListener(f) // a duplicate, close-on-exec
	if err != nil {
		return nil, nil, publicerr.Wrap(err, "the socket passed by the service manager cannot be served")
	}
	ln, ok := l.(*net.UnixListener)
	if !ok {
		l.Close()
		return nil, nil, publicerr.New("the socket passed by the service manager is not a unix socket")
	}
	ln.SetUnlinkOnClose(false)
	return ln, tokens, nil
}

// checkInherited checks that fd is a listening unix stream socket bound
// to socket.
func checkInherited(fd int, socket string) error {
	domain, derr := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	typ, terr := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	listening, lerr := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if err := errors.Join(derr, terr, lerr); err != nil {
		return publicerr.Wrap(err, "the service manager passed no socket (ListenStream= of a .socket unit)")
	}
	if domain != unix.AF_UNIX || typ != unix.SOCK_STREAM || listening != 1 {
		return publicerr.New("the socket passed by the service manager must be a listening unix stream socket (ListenStream=" + socket + ")")
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return publicerr.Wrap(err, "the socket passed by the service manager has no name")
	}
	if u, ok := sa.(*unix.SockaddrUnix); !ok || filepath.Clean(u.Name) != filepath.Clean(socket) {
		return publicerr.New("the socket passed by the service manager is not the daemon's socket " + socket + " (ListenStream= and --socket must name the same path)")
	}
	return nil
}

// checkSocketPath checks what Listen and Inherited both ask of the
// daemon and its socket's path.
func checkSocketPath(socket string, euid int) error {
	if euid != 0 {
		return publicerr.New("sandboxd serve runs as root: it acts for every user of the machine, each with that user's rights")
	}
	if !filepath.IsAbs(socket) {
		return publicerr.New("--socket must be an absolute path")
	}
	return nil
}

// checkSocketDir refuses a socket directory that is not root's alone to
// write. A directory that was there is never taken over: it must
// already be one only root may write, as every client checks.
func checkSocketDir(dir string) error {
	if st, err := os.Lstat(dir); err != nil || !st.IsDir() || owner(st) != 0 || st.Mode().Perm()&0o022 != 0 {
		return publicerr.New("the socket's directory " + dir + " must be a directory of root's that nobody else may write")
	}
	// And every directory above it, as a client checks them: one that
	// another user may write lets that user swap the socket's directory,
	// and the tokens root writes there, for one of theirs.
	for d := filepath.Dir(filepath.Clean(dir)); ; d = filepath.Dir(d) {
		if st, err := os.Stat(d); err != nil || owner(st) != 0 || st.Mode().Perm()&0o022 != 0 {
			return publicerr.New("the socket's directory " + dir + " is under " + d + ", which a user other than root may write")
		}
		if d == "/" {
			return nil
		}
	}
}
