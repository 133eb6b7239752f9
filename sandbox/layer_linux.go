package sandbox

import "golang.org/x/sys/unix"

// Used is how many bytes the layer's file system holds now (its own
// tmpfs: what keeping it costs the host's memory).
func (l *Layer) Used() (int64, error) {
	if l == nil || l.Root == nil {
		return 0, nil
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(l.Root.Fd()), &st); err != nil {
		return 0, err
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, nil
}
