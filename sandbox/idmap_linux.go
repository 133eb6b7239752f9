package sandbox

import (
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/envlist"
)

// maxID is the highest id a user namespace can map: (uid_t)-1 is never
// an id.
const maxID = 1<<32 - 2

// overflowUIDFile holds the id the kernel shows for a host id that the
// viewer's user namespace does not map.
const overflowUIDFile = "/proc/sys/kernel/overflowuid"

// truthfulUIDMap is the uid map of a root caller's command that runs as
// inside uid 0 (host hostUID): ownership shown inside is the host's, so
// that git's ownership check (safe.directory) answers inside as root's
// git answers on the host.
//
//   - inside 0 is host hostUID, the command itself, as with a single
//     line (the id-mapped trees show root's files there as its own);
//   - every other host id is itself, except host 0, which stays unmapped
//     (the command never acts as host root), and the overflow id;
//   - host overflow (a file owned by nobody) is inside hostUID, a slot
//     identity leaves free. Outside the id-mapped trees, the overflow id
//     then means exactly "host root", and SUDO_UID=overflow makes git
//     trust root's repositories and no one else's (see gitEnv).
//
// The ids are only names for kuids: permission checks compare kuids,
// and the command can take none of the mapped ones (every capability is
// dropped before exec, no_new_privs, nosuid mounts, seccomp refuses
// setuid bits and new namespaces). Outside the id-mapped trees nothing
// but the names shown changes.
//
// The id-mapped trees (the workspace, the caches, the read-only home,
// granted files) use this namespace's map, so there a file of another
// user is no longer unmapped: it shows its real owner, and git refuses
// it as root's git does on the host (with a single line it showed as
// overflow, which SUDO_UID would make git trust). Reads are unchanged
// (an unmapped owner never mattered to them), but the kernel no longer
// refuses every write to such a file (HAS_UNMAPPED_ID): its mode bits
// decide, as for a capability-less uid 0 with gid 0, so a file or
// directory of another user whose group is root's and that is
// group-writable becomes writable. The gid map stays one line (git
// ignores groups), so a file of any other group stays unmapped and
// unwritable as before, and the helper's namespace capabilities (which
// need both ids mapped) never cover it. Two owners there cannot be
// shown truthfully while the command and the trees share a namespace
// (there the kernel shows on-disk id N as N, mapped or not): a file
// owned on disk by overflow (nobody) shows as overflow, so git trusts
// it as root's; one owned on disk by hostUID is host overflow to the
// kernel, and a layer commit of a write to it gives it that owner. (Any
// map without host 0 leaves one owner unmapped: a second namespace for
// the trees would only move the first to another id, for a process
// start per run.)
//
// ok is false when hostUID or overflow leave no such map (an id out of
// range, 0, or both the same): the caller keeps the single line.
func truthfulUIDMap(hostUID, overflow int) ([]syscall.SysProcIDMap, bool) {
	if hostUID <= 0 || overflow <= 0 || hostUID > maxID || overflow > maxID || hostUID == overflow {
		return nil, false
	}
	m := []syscall.SysProcIDMap{
		{ContainerID: 0, HostID: hostUID, Size: 1},
		{ContainerID: hostUID, HostID: overflow, Size: 1},
	}
	skip := []int{0, hostUID, overflow}
	sort.Ints(skip)
	skip = append(skip, maxID+1)
	for i := 0; i+1 < len(skip); i++ {
		if lo, hi := skip[i]+1, skip[i+1]; lo < hi {
			m = append(m, syscall.SysProcIDMap{ContainerID: lo, HostID: lo, Size: hi - lo})
		}
	}
	return m, true
}

// overflowUID is the kernel's overflow uid, or -1 if it cannot be read.
func overflowUID() int {
	b, err := os.ReadFile(overflowUIDFile)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return -1
	}
	return n
}

// rootUIDMap returns the command's uid map for a root caller: the
// truthful map when the command is inside uid 0, otherwise (or when the
// overflow uid cannot be read) the single line inUID → hostUID. sudo is
// the SUDO_UID the command gets with the truthful map, else -1.
func rootUIDMap(inUID, hostUID int) (m []syscall.SysProcIDMap, sudo int) {
	single := []syscall.SysProcIDMap{{ContainerID: inUID, HostID: hostUID, Size: 1}}
	if inUID != 0 {
		return single, -1
	}
	o := overflowUID()
	full, ok := truthfulUIDMap(hostUID, o)
	if !ok {
		return single, -1
	}
	return full, o
}

// gitEnv finishes the command's environment for git outside the
// workspace, which the sandbox shows read-only.
//
// With the truthful uid map it sets SUDO_UID: git run as uid 0 trusts a
// repository owned by uid 0 or by $SUDO_UID (is_path_owned_by_current_uid);
// inside, host root's files show as the overflow uid, and nothing else
// outside the id-mapped trees does, so SUDO_UID=overflow makes git trust
// what root's git trusts on the host. It overrides a SUDO_UID from the
// caller's environment (a root shell reached through sudo): inside,
// that user's repositories are refused, stricter than the host, and no
// other user's repository is ever trusted on the caller's word.
//
// Unless the caller chose otherwise, GIT_OPTIONAL_LOCKS=0: git skips the
// writes it makes only opportunistically (git status refreshing the
// index), which in a read-only repository are denied boundaries and in
// the workspace are rewrites of .git/index the command never asked for.
func (h *helper) gitEnv(env []string) []string {
	if h != nil && h.sudoUID >= 0 {
		env = envlist.Set(env, "SUDO_UID", strconv.Itoa(h.sudoUID))
	}
	if _, ok := envlist.Lookup(env, "GIT_OPTIONAL_LOCKS"); ok {
		return env
	}
	return envlist.Set(env, "GIT_OPTIONAL_LOCKS", "0")
}
