package evidence

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ReaderArg is the argument that makes sandboxd the reader: cmd/sandboxd
// checks IsReader first thing, as it does for the sandbox helper.
const ReaderArg = "__evidence-reader"

// IsReader reports whether args (os.Args) ask for the reader.
func IsReader(args []string) bool { return len(args) > 1 && args[1] == ReaderArg }

// Reader is the reader process: it serves in and out until in ends, and
// returns its exit status (0, or 2 when the requests broke the
// protocol).
func Reader(in io.Reader, out io.Writer) int {
	if err := Serve(in, out); err != nil {
		return 2
	}
	return 0
}

// Serve answers requests from in on out until in ends. It runs inside
// the sandbox, as the command would: every open is the command's.
func Serve(in io.Reader, out io.Writer) error {
	r := bufio.NewReader(in)
	w := bufio.NewWriter(out)
	for {
		kind, payload, err := readFrame(r, requestMax)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch kind {
		case reqResolve:
			err = serveResolve(w, string(payload))
		case reqRead:
			if len(payload) < 4 {
				return fmt.Errorf("%w: a read without a limit", ErrProtocol)
			}
			err = serveRead(w, string(payload[4:]), int(binary.BigEndian.Uint32(payload)))
		}
		if err == nil {
			err = w.Flush()
		}
		if err != nil {
			return err
		}
	}
}

func serveResolve(w io.Writer, p string) error {
	if !validPath(p) {
		return writeFrame(w, repErr, []byte{codeOf(ErrInvalid)})
	}
	real, err := filepath.EvalSymlinks(p)
	if err == nil && !validPath(real) {
		err = ErrInvalid
	}
	if err != nil {
		return writeFrame(w, repErr, []byte{codeOf(errnoError(err))})
	}
	return writeFrame(w, repPath, []byte(real))
}

func serveRead(w io.Writer, p string, limit int) error {
	if !validPath(p) || limit < 0 || limit > MaxRead {
		return writeFrame(w, repErr, []byte{codeOf(ErrInvalid)})
	}
	b, err := readNoLinks(p, limit)
	if err != nil {
		return writeFrame(w, repErr, []byte{codeOf(err)})
	}
	return writeFrame(w, repData, b)
}

// readNoLinks reads at most limit+1 bytes of the regular file at p, an
// absolute, clean path, following no link on the way (openat2 is not in
// the sandbox's seccomp allow list: each directory is opened O_PATH
// without following one).
func readNoLinks(p string, limit int) ([]byte, error) {
	dir, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errnoError(err)
	}
	names := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for _, name := range names[:len(names)-1] {
		next, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(dir)
		if err != nil {
			return nil, errnoError(err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil {
			unix.Close(next)
			return nil, errnoError(err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
		case unix.S_IFLNK:
			unix.Close(next)
			return nil, ErrChanged
		default:
			unix.Close(next)
			return nil, ErrNotFound
		}
		dir = next
	}
	fd, err := unix.Openat(dir, names[len(names)-1], unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	unix.Close(dir)
	if err != nil {
		return nil, errnoError(err)
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, errnoError(err)
	}
	if !st.Mode().IsRegular() {
		return nil, ErrNotRegular
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, errnoError(err)
	}
	return b, nil
}

// errnoError names an open's failure with one of the package's errors.
func errnoError(err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return ErrNotFound
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return ErrDenied
	case errors.Is(err, unix.ELOOP):
		// O_NOFOLLOW met a link: the path changed since it was resolved
		// (a resolve meets ELOOP only for a loop, which is unreadable).
		return ErrChanged
	case errors.Is(err, ErrInvalid):
		return ErrInvalid
	}
	return ErrUnreadable
}
