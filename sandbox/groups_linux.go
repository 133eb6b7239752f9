package sandbox

import (
	"fmt"
	"os/user"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/sandbox/detect"
	"golang.org/x/sys/unix"
)

// Foreign groups. The command's user namespace maps one group: an
// unprivileged caller's own, or for a root caller the workspace's group.
// A workspace file of any other group shows as the overflow group inside:
//
//   - behind an unprivileged caller's layer, overlayfs keeps a file's
//     group when it copies the file (and every directory above it) into
//     the layer, and the layer's tmpfs cannot store that group: the write
//     fails with EOVERFLOW. No mapping can hold it (only the caller's
//     effective group may be mapped without privilege), and no file
//     system a user namespace mounts can store it. Without the layer the
//     write is the caller's own and works.
//   - in a root caller's id-mapped workspace, the kernel refuses every
//     write to a file whose group the mount does not map (EACCES). A
//     truthful group map would fix it, and make another user's
//     world-writable file in root's workspace writable too, which the
//     single line keeps unwritable (see truthfulUIDMap).
//
// So the run says so, naming the group and what works, when the command
// wrote to or below such a file.

// foreignGroupNote names the groups that made writes the command tried
// in the workspace fail behind the layer ("" when none did).
func (r *run) foreignGroupNote(in []detect.Intent) string {
	if !r.wantNS || (!r.root && !r.txn) {
		return ""
	}
	ws := r.spec.Workspace
	own := uint32(r.spec.GID)
	if r.root {
		_, g := ownerOf(ws)
		own = uint32(g)
	}
	groups := map[uint32]bool{}
	seen := map[string]bool{}
	for _, i := range in {
		if i.Op.Reads() || i.Op == "connect" || i.Op == "resolve_unix" || !pathtree.Within(ws, i.Path) {
			continue
		}
		// The object itself (when it exists) and every directory between
		// it and the workspace are copied into the layer; the workspace
		// itself is the layer's root, never copied.
		for p := i.Path; p != ws && !seen[p]; p = filepath.Dir(p) {
			seen[p] = true
			var st unix.Stat_t
			if unix.Lstat(p, &st) == nil && st.Gid != own {
				groups[st.Gid] = true
			}
		}
	}
	if len(groups) == 0 {
		return ""
	}
	var names []string
	for g := range groups {
		name := fmt.Sprint(g)
		if gr, err := user.LookupGroupId(name); err == nil {
			name = gr.Name + " (gid " + name + ")"
		}
		names = append(names, name)
	}
	sort.Strings(names)
	sg := "GROUP"
	if len(groups) == 1 {
		for g := range groups {
			if gr, err := user.LookupGroupId(fmt.Sprint(g)); err == nil {
				sg = gr.Name
			}
		}
	}
	if r.root {
		return "the workspace has files of group " + strings.Join(names, ", ") + ", which the sandbox does not map (it maps the workspace's own group only): " +
			"writes to them, or below their directories, were refused (EACCES). Make the workspace's group theirs (chgrp " + sg + " on the workspace) to work on them"
	}
	return "the workspace has files of group " + strings.Join(names, ", ") + ", which an unprivileged caller's copy-on-write layer cannot hold " +
		"(its user namespace maps your own group only): writes to them, or below their directories, failed with EOVERFLOW " +
		"(\"Value too large for defined data type\"). Run with --no-transaction, or, when the workspace is in that group and you are a member, " +
		"run sandboxd with it as your group: sg " + sg + " -c 'sandboxd run ...'"
}
