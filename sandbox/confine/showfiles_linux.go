package confine

import (
	"fmt"
	"strconv"

	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// showFiles shows each file's data in place of the file at its path (a
// resolved path, no symlink followed): it writes them into a small tmpfs
// reachable only through its descriptor and binds each, read-only, onto
// its target. The command cannot change them, and they need no file on
// the host (a state directory under a private /tmp, or on a mount the
// run does not see, is no obstacle).
func showFiles(files []wire.ShownFile) error {
	if len(files) == 0 {
		return nil
	}
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return fmt.Errorf("shown files: %w", err)
	}
	defer unix.Close(fs)
	size := 4096
	for _, f := range files {
		size += len(f.Data) + 4096
	}
	for _, kv := range [][2]string{{"size", strconv.Itoa(size)}, {"mode", "0755"}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return fmt.Errorf("shown files: %w", err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return fmt.Errorf("shown files: %w", err)
	}
	mfd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return fmt.Errorf("shown files: %w", err)
	}
	defer unix.Close(mfd)
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	for i, f := range files {
		name := strconv.Itoa(i)
		fd, err := unix.Openat(mfd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o444)
		if err != nil {
			return fmt.Errorf("shown file for %s: %w", f.Path, err)
		}
		_, err = unix.Write(fd, f.Data)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("shown file for %s: %w", f.Path, err)
		}
		target, err := unix.Openat2(unix.AT_FDCWD, f.Path, &how)
		if err != nil {
			return fmt.Errorf("shown file for %s: %w", f.Path, err)
		}
		err = bindReadOnly(mfd, name, target)
		unix.Close(target)
		if err != nil {
			return fmt.Errorf("shown file for %s: %w", f.Path, err)
		}
	}
	return nil
}

// bindReadOnly binds name under dirFD, read-only (and nosuid, nodev,
// noexec), onto target.
func bindReadOnly(dirFD int, name string, target int) error {
	tree, err := unix.OpenTree(dirFD, name, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(tree)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return err
	}
	return unix.MoveMount(tree, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}
