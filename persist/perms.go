package persist

import (
	"sort"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/gitconfig"
	"golang.org/x/sys/unix"
)

// The commit never widens permissions. Other accounts on the machine must
// not be able to plant what the caller's (or root's) tools run later:
//
//   - a new file or directory gets at most what the caller's umask allows;
//   - an existing one never gains group or other write;
//   - in a git directory (and its hooks and config, wherever they are),
//     nothing is left group- or other-writable, unless the repository was
//     shared before the run (core.sharedRepository, or its git directory
//     was already group- or other-writable): then what sharing allows is
//     kept, and the report says so.

// writeBits are group and other write.
const writeBits = 0o022

// Mode returns the mode to commit at rel for the mode the command left
// (st_mode: the type and permission bits; setuid and setgid are the
// caller's to strip), given what the workspace had there before (nil: nothing).
// note says what was changed or kept, for the report; "" when nothing.
func (c *Checker) Mode(rel string, mode uint32, before *Info) (uint32, string) {
	m := mode & 0o1777
	gd, inGit := c.gitOwner(rel, mode&unix.S_IFMT == unix.S_IFDIR)
	var allowed uint32 // what a shared repository's sharing allows
	if inGit {
		allowed = c.sharedBits(gd)
	}
	var notes []string
	if before == nil {
		if lost := m & c.cfg.Umask &^ allowed; lost != 0 {
			m &^= lost
			notes = append(notes, "without the mode bits your umask ("+octal(c.cfg.Umask)+") masks")
		}
	} else if gained := (m &^ before.Mode) & writeBits &^ allowed; gained != 0 {
		m &^= gained
		notes = append(notes, "without the group/other write it gained")
	}
	if inGit {
		if strip := m & writeBits &^ allowed; strip != 0 {
			m &^= strip
			notes = append(notes, "without group/other write: it belongs to the git directory "+orWorkspace(gd))
		} else if m&writeBits != 0 {
			c.kept[gd] = true
		}
	}
	return m, strings.Join(notes, "; ")
}

func orWorkspace(rel string) string {
	if rel == "" {
		return "the workspace"
	}
	return rel
}

func octal(m uint32) string { return "0" + strconv.FormatUint(uint64(m), 8) }

// gitOwner returns the git directory rel belongs to: one it lies in (or
// is), or one whose config makes it a hook or config file.
func (c *Checker) gitOwner(rel string, dir bool) (string, bool) {
	parts := strings.Split(rel, "/")
	top := len(parts)
	if !dir {
		top-- // only a directory can be a git directory itself
	}
	for i := top; i >= 0; i-- {
		dir := strings.Join(parts[:i], "/")
		if c.isOrNamed(dir) {
			return dir, true
		}
	}
	c.loadRoles()
	p := c.abs(rel)
	for q := p; ; {
		if r, ok := c.roles[q]; ok {
			return strings.TrimPrefix(strings.TrimPrefix(r.owner, c.cfg.Workspace), "/"), true
		}
		if q == c.cfg.Workspace || q == "/" {
			break
		}
		q = q[:strings.LastIndexByte(q, '/')]
		if q == "" {
			q = "/"
		}
	}
	return "", false
}

// sharedBits are the write bits the git directory gd (workspace-relative)
// may keep: those core.sharedRepository asks for (git's
// git_config_perm), and those its git directory already had.
func (c *Checker) sharedBits(gd string) uint32 {
	if v, ok := c.shared[gd]; ok {
		return v
	}
	var bits uint32
	dir := c.abs(gd)
	if st, err := c.cfg.Before.Lstat(dir); err == nil && st.IsDir() {
		bits |= st.Mode & writeBits
	}
	common, v := CommonDir(c.cfg.Before, dir)
	if v != GitDir {
		common = dir
	}
	if b, err := readFollow(c.cfg.Before, common+"/config", gitconfig.MaxSize); err == nil {
		if ents, err := gitconfig.Parse(b); err == nil {
			for _, e := range ents {
				if e.Section == "core" && e.Key == "sharedrepository" {
					bits = bits&^writeBits | sharedPerm(e)
				}
			}
		}
	}
	c.shared[gd] = bits
	return bits
}

// sharedPerm is git_config_perm's write bits: "group"/"true"/"1" and
// "all"/"world"/"everybody"/"2" allow group write; an octal mode its own.
func sharedPerm(e gitconfig.Entry) uint32 {
	v := strings.ToLower(strings.TrimSpace(e.Value))
	if e.NoValue {
		v = "true"
	}
	switch v {
	case "", "umask", "false", "no", "off", "0":
		return 0
	case "group", "true", "yes", "on", "1", "all", "world", "everybody", "2":
		return 0o020
	}
	if n, err := strconv.ParseUint(v, 8, 32); err == nil {
		return uint32(n) & writeBits
	}
	return 0
}

// SharedKept lists the git directories (workspace-relative) in which Mode
// kept group or other write because the repository was shared before.
func (c *Checker) SharedKept() []string {
	var out []string
	for gd := range c.kept {
		out = append(out, orWorkspace(gd))
	}
	sort.Strings(out)
	return out
}
