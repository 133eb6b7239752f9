package persist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Moving what the sweep refuses out of the workspace, into sandboxd's
// quarantine, without following a link the command left.

// openSearching opens rel below the directory root with how, giving a
// directory on the way that the command made unsearchable for its owner
// (chmod 0) search back, as unlock does for the scan: the sweep must
// reach whatever the command left.
func openSearching(root int, rel string, how *unix.OpenHow) (int, error) {
	fd, err := unix.Openat2(root, rel, how)
	if !errors.Is(err, unix.EACCES) {
		return fd, err
	}
	cur, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	for _, part := range strings.Split(rel, "/") {
		next, err := unix.Openat2(cur, part, how)
		if errors.Is(err, unix.EACCES) {
			restore, cerr := ownerMay(cur, unix.S_IXUSR)
			if cerr == nil {
				next, err = unix.Openat2(cur, part, how)
				restore()
			}
		}
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

// ownerMay adds the owner permission bits to the directory fd (an O_PATH
// descriptor, changed through /proc/self/fd, which names that very
// directory) and returns what puts its mode back.
func ownerMay(fd int, bits uint32) (func(), error) {
	p := fmt.Sprintf("/proc/self/fd/%d", fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if err := unix.Chmod(p, st.Mode&0o7777|bits); err != nil {
		return nil, err
	}
	return func() { unix.Chmod(p, st.Mode&0o7777) }, nil
}

func quarantineEntry(ws, rel, quarantine string) (string, error) {
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	root, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("quarantine %s: %w", rel, err)
	}
	defer unix.Close(root)
	parent := filepath.Dir(rel)
	pfd := root
	if parent != "." {
		pfd, err = openSearching(root, parent, &how)
		if err != nil {
			return "", fmt.Errorf("quarantine %s: %w", rel, err)
		}
		defer unix.Close(pfd)
	}
	dest := filepath.Join(quarantine, rel)
	if err := os.MkdirAll(filepath.Dir(dest), 0o700); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", rel, err)
	}
	dfd, err := unix.Open(filepath.Dir(dest), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("quarantine %s: %w", rel, err)
	}
	defer unix.Close(dfd)
	err = unix.Renameat2(pfd, filepath.Base(rel), dfd, filepath.Base(dest), unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EACCES) {
		// The command took write away from its own directory (chmod
		// 555): the caller, who owns it, gives it back for the move.
		restore, cerr := ownerMay(pfd, unix.S_IWUSR|unix.S_IXUSR)
		if cerr == nil {
			err = unix.Renameat2(pfd, filepath.Base(rel), dfd, filepath.Base(dest), unix.RENAME_NOREPLACE)
			restore()
		}
	}
	if err == nil {
		return dest, nil
	}
	if !errors.Is(err, unix.EXDEV) {
		return "", fmt.Errorf("quarantine %s: %w", rel, err)
	}
	// Another file system: remove it in place (RemoveAll does not follow
	// symlinks).
	if err := os.RemoveAll(filepath.Join(ws, rel)); err != nil {
		return "", fmt.Errorf("remove %s: %w", rel, err)
	}
	return "", nil
}
