package confine

import (
	"github.com/sandboxd/sandboxd/landlock"
	"github.com/sandboxd/sandboxd/sandbox/internal/wire"
	"golang.org/x/sys/unix"
)

// addHelperRules grants what only the helper can name: the mounts it
// created and the standard streams it passes on.
func addHelperRules(rs *landlock.Ruleset, s *wire.SetupMsg) error {
	all := landlock.Access(s.LandlockFS)
	dev := landlock.ReadAccess | landlock.AccessWriteFile | landlock.AccessIoctlDev
	if s.Namespaces {
		roots := wire.OwnRoots()
		if s.Layer > 0 {
			// The overlay's inodes are not the workspace's.
			roots = append(roots, s.Workspace)
		}
		for _, p := range roots {
			if err := rs.AddPath(p, all); err != nil {
				return err
			}
		}
		if err := addCacheRules(rs, s, all); err != nil {
			return err
		}
		// The shown files are inodes of their own tmpfs: no read root
		// holds them.
		for _, f := range s.Shown {
			if err := rs.AddPath(f.Path, landlock.AccessReadFile); err != nil {
				return err
			}
		}
		for _, name := range wire.DevNodes() {
			if err := rs.AddPath("/dev/"+name, dev); err != nil {
				return err
			}
		}
		for _, p := range wire.OwnReadable() {
			if err := rs.AddPath(p, landlock.ReadAccess); err != nil {
				return err
			}
		}
	} else {
		if s.TmpDir != "" {
			if err := rs.AddPath(s.TmpDir, all); err != nil {
				return err
			}
		}
		for _, name := range wire.HostDevNodes() {
			if err := rs.AddPath("/dev/"+name, dev); err != nil {
				return err
			}
		}
	}
	// Reopening a standard stream through /dev/stdout or /proc/self/fd
	// keeps the access it was opened with, no more.
	for fd := 0; fd <= 2; fd++ {
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil {
			continue
		}
		t := st.Mode & unix.S_IFMT
		if t != unix.S_IFREG && t != unix.S_IFCHR {
			continue
		}
		acc := landlock.Access(0)
		switch fl & unix.O_ACCMODE {
		case unix.O_RDONLY:
			acc = landlock.AccessReadFile
		case unix.O_WRONLY:
			acc = landlock.AccessWriteFile | landlock.AccessTruncate
		case unix.O_RDWR:
			acc = landlock.AccessReadFile | landlock.AccessWriteFile | landlock.AccessTruncate
		}
		if t == unix.S_IFCHR {
			acc |= landlock.AccessIoctlDev
		}
		if err := rs.AddFD(fd, acc); err != nil {
			return err
		}
	}
	return nil
}
