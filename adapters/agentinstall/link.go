package agentinstall

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/publicerr"
)

// linkRecord is a symbolic link install made: Claude Code's shell
// prefix must be one program, so it is a link to sandboxd under a name
// sandboxd answers to (agenthook.ClaudeShellName).
type linkRecord struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

// linkState is what is at a link's path now.
func linkState(path string) (target string, isLink bool, err error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", false, err
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return "", false, nil
	}
	target, err = os.Readlink(path)
	return target, true, err
}

// planLink says what install does to make path a link to target: "" when
// it already is one. Anything else at path is an error: the directory is
// sandboxd's own, and something else there is not for install to remove.
func planLink(path, target, shown string) (string, error) {
	cur, isLink, err := linkState(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "made " + shown + " to " + target, nil
	case err != nil:
		return "", publicerr.Errorf(err, "%s cannot be read; nothing was changed", shown)
	case !isLink:
		return "", publicerr.Errorf(nil, "%s is there and is not a link; remove it and run install again (nothing was changed)", shown)
	case cur == target:
		return "", nil
	}
	return "pointed " + shown + " at " + target + " (it pointed at " + cur + ")", nil
}

// makeLink makes path a link to target, replacing a link there in one
// step, in a directory only the caller can enter.
func makeLink(path, target string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return publicerr.Wrap(err, "sandboxd could not make the directory of its shell prefix link")
	}
	tmp := path + ".new"
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return publicerr.Wrap(err, "sandboxd could not make its shell prefix link")
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return publicerr.Wrap(err, "sandboxd could not make its shell prefix link")
	}
	return nil
}

// planUnlink says what uninstall does with a link install made: it goes
// when it still points where install pointed it.
func planUnlink(l linkRecord, shown string) (remove bool, did string) {
	cur, isLink, err := linkState(l.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, shown + " was already removed"
	case err != nil || !isLink || cur != l.Target:
		return false, "left " + shown + " as it is: it was changed since install"
	}
	return true, "removed " + shown
}

func removeLink(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return publicerr.Wrap(err, "sandboxd could not remove its shell prefix link")
	}
	return nil
}
