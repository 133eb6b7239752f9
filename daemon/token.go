package daemon

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Tokens are the second factor of a caller: a file per uid, readable by
// that uid only, in a directory no sandboxed command can see. A process
// of the caller's uid that is inside a sandbox can reach neither the
// file nor (a nested pid namespace, see Peer) the daemon: both factors
// must hold. Tokens live as long as the daemon: a restart writes new
// ones, so nothing issued before it is honoured.
type Tokens struct {
	dir string
	mu  sync.Mutex
	by  map[int]string // uid -> token
}

// NewTokens makes dir (root's, 0711: callers reach their own file by
// name and list nothing) and removes tokens of an earlier daemon.
func NewTokens(dir string) (*Tokens, error) {
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("daemon: tokens: %w", err)
	}
	if err := ownedByRoot(dir, 0o711); err != nil {
		return nil, err
	}
	old, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("daemon: tokens: %w", err)
	}
	for _, e := range old {
		os.Remove(filepath.Join(dir, e.Name()))
	}
	return &Tokens{dir: dir, by: map[int]string{}}, nil
}

// ownedByRoot makes dir root's with exactly mode perm, refusing a
// symlink in its place.
func ownedByRoot(dir string, perm os.FileMode) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("daemon: %s is not a directory", dir)
	}
	if err := os.Chown(dir, 0, 0); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	return os.Chmod(dir, perm)
}

// Path is where uid's token is.
func (t *Tokens) Path(uid int) string { return filepath.Join(t.dir, strconv.Itoa(uid)) }

// Ensure writes uid's token file if the daemon has none for uid yet,
// owned by uid and gid, mode 0400, and returns its path.
func (t *Tokens) Ensure(uid, gid int) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.Path(uid)
	if _, ok := t.by[uid]; ok {
		if st, err := os.Lstat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	var b [32]byte
	rand.Read(b[:])
	tok := hex.EncodeToString(b[:])
	tmp := p + ".new"
	os.Remove(tmp)
	fd, err := unix.Open(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o400)
	if err != nil {
		return "", fmt.Errorf("daemon: token: %w", err)
	}
	_, werr := unix.Write(fd, []byte(tok+"\n"))
	cerr := unix.Fchown(fd, uid, gid)
	unix.Close(fd)
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("daemon: token: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("daemon: token: %w", err)
	}
	t.by[uid] = tok
	return p, nil
}

// Check reports whether tok is uid's token, in constant time.
func (t *Tokens) Check(uid int, tok string) bool {
	t.mu.Lock()
	want, ok := t.by[uid]
	t.mu.Unlock()
	return ok && len(tok) == len(want) && subtle.ConstantTimeCompare([]byte(tok), []byte(want)) == 1
}
