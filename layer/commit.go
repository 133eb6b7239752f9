package layer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/persist"
	"github.com/sandboxd/sandboxd/publicerr"
	"golang.org/x/sys/unix"
)

// Source is one attempt's layer.
type Source struct {
	// Upper is the overlay's upper directory.
	Upper *os.File
	// Started is the wall-clock time the attempt began; a workspace entry
	// whose change time is later was changed from outside during the
	// attempt (the sandbox starts the command only once the coarse clock
	// that stamps changes has passed it).
	Started time.Time
	// Files owned by HostUID/HostGID in the layer belong to UID/GID in the
	// workspace.
	HostUID, HostGID, UID, GID int
}

// Options say where and how to commit.
type Options struct {
	// Workspace is the directory the layer covered.
	Workspace string
	// StateDir holds journals and, when it shares the workspace's mount,
	// staged files (StateDir/txn).
	StateDir string
	// RunID names this commit (journal, staging and conflict copies).
	RunID string
	// Protected are persistence name patterns (persist.Names: they apply
	// at every depth; git directories are found by git's own rules).
	Protected []string
	// Unguarded are roots outside the workspace the command wrote
	// straight through (private caches, extra writable roots).
	Unguarded []string
	// Home and GitConfigs are the caller's home and own git config files.
	Home       string
	GitConfigs []string
	// Caller is who the commit is for: it reads the layer, stages and
	// writes into the workspace with the caller's file-system identity
	// (package fsid), so the kernel decides what it may change and what
	// it makes is the caller's; new files get no mode bits its umask
	// masks. A root caller's files take the owners the layer recorded.
	Caller fsid.ID
	Log    *slog.Logger
	// CrashAt makes the process kill itself with SIGKILL at a named point
	// ("stage:N", "staged", "apply:N"): a failpoint for crash tests.
	CrashAt string
}

// Outcome is what a commit did.
type Outcome struct {
	Files     int        `json:"files"`
	Dirs      int        `json:"dirs"`
	Symlinks  int        `json:"symlinks"`
	Removed   int        `json:"removed"`
	Bytes     int64      `json:"bytes"`
	Conflicts []Conflict `json:"conflicts,omitempty"`
	Refused   []Refused  `json:"refused,omitempty"`
	Skipped   []Refused  `json:"skipped,omitempty"`
	// Listed are committed but shown to the person: agent instructions,
	// and protected names in a package tree or a repository the command
	// created.
	Listed []Refused `json:"listed,omitempty"`
	// Modes lists files and directories committed with narrower modes
	// than the command gave them (or, in a shared repository, kept).
	Modes []Refused `json:"modes,omitempty"`
	// Shared are git directories that were shared before (group-writable,
	// core.sharedRepository): their group write was kept as it was.
	Shared []string `json:"shared_repositories,omitempty"`
	// Stripped lists files committed without the setuid/setgid bits the
	// command gave them.
	Stripped []string `json:"stripped,omitempty"`
}

// Conflict is a path the attempt changed that was also changed in the
// workspace while it ran. The workspace's version stays; the attempt's,
// if it had one, is saved as SavedAs.
type Conflict struct {
	Path    string `json:"path"`
	SavedAs string `json:"saved_as,omitempty"`
	Why     string `json:"why"`
}

// Refused is a change that was not committed, and why.
type Refused struct {
	Path string `json:"path"`
	Why  string `json:"why"`
}

// op is one step of applying a commit; ops are journaled and each is
// idempotent, so a replay after a crash finishes the commit.
type op struct {
	Kind   string `json:"k"`           // remove, place, placedir, symlink, meta (mkdir: version 1 journals)
	Path   string `json:"p"`           // workspace-relative
	Stage  string `json:"s,omitempty"` // staged file or directory name (place, placedir)
	Target string `json:"t,omitempty"` // symlink target
	Mode   uint32 `json:"m,omitempty"`
	UID    int    `json:"u"`
	GID    int    `json:"g"`
	Atime  int64  `json:"a,omitempty"`
	Mtime  int64  `json:"mt,omitempty"`
	// Expect is what the workspace entry must still be when the op runs
	// (checked on the first run, not on replay).
	Expect *expect `json:"e,omitempty"`
}

// expect names a workspace entry as planned: absent, or this inode with
// this change time.
type expect struct {
	Absent bool   `json:"absent,omitempty"`
	Ino    uint64 `json:"ino,omitempty"`
	Ctime  int64  `json:"ctime,omitempty"`
}

// opaqueXattr marks an upper directory that hides everything below it
// (overlayfs with userxattr).
const opaqueXattr = "user.overlay.opaque"

// committer carries one commit.
type committer struct {
	src     Source
	opt     Options
	ws      int // workspace root, O_PATH
	since   int64
	out     Outcome
	ops     []op
	metas   []op // directory metadata, applied last, deepest first
	guard   *guard
	stage   *stager
	chown   bool
	pdir    *openDir // current's workspace directory
	started time.Time
}

// Commit applies src to the workspace. An error means the commit could
// not be made; the journal then says whether anything was applied, and
// recovery finishes or discards it.
func Commit(ctx context.Context, src Source, opt Options) (out Outcome, err error) {
	aerr := fsid.Do(opt.Caller, func() error {
		out, err = commit(ctx, src, opt)
		return nil
	})
	if aerr != nil {
		return Outcome{}, fmt.Errorf("layer: %w", aerr)
	}
	return out, err
}

// commit is Commit on a thread with the caller's identity.
func commit(ctx context.Context, src Source, opt Options) (Outcome, error) {
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	ws, err := unix.Open(opt.Workspace, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return Outcome{}, fmt.Errorf("layer: workspace: %w", err)
	}
	defer unix.Close(ws)
	if empty, err := isEmptyDir(int(src.Upper.Fd())); err != nil {
		return Outcome{}, fmt.Errorf("layer: %w", err)
	} else if empty {
		return Outcome{}, nil // the attempt changed nothing
	}
	c := &committer{src: src, opt: opt, ws: ws, since: src.Started.UnixNano(), chown: opt.Caller.UID == 0, started: time.Now()}
	c.guard, err = newGuard(ws, int(src.Upper.Fd()), src, opt, c.chown)
	if err != nil {
		return Outcome{}, fmt.Errorf("layer: %w", err)
	}
	j, err := newJournal(opt.StateDir, opt.RunID, opt.Workspace)
	if err != nil {
		return Outcome{}, err
	}
	defer j.close()
	c.stage, err = newStager(j, ws, opt)
	if err != nil {
		j.discard()
		return Outcome{}, err
	}
	ops, err := c.plan(ctx)
	if err != nil || len(ops) == 0 {
		c.stage.discard()
		j.discard()
		return c.out, err
	}
	if err := j.markStaged(ops); err != nil {
		c.stage.discard()
		j.discard()
		return c.out, err
	}
	c.crash("staged")
	planned := time.Now()
	a := &applier{ws: ws, s: c.stage, j: j, out: &c.out, runID: opt.RunID}
	for i := range ops {
		if err := a.apply(i, &ops[i], true); err != nil {
			return c.out, fmt.Errorf("layer: apply %s %s: %w", ops[i].Kind, ops[i].Path, err)
		}
		if c.opt.CrashAt != "" {
			c.crash(fmt.Sprintf("apply:%d", i+1))
		}
	}
	c.stage.discard()
	j.finish()
	c.out.Shared = c.guard.c.SharedKept()
	opt.Log.Debug("layer committed", "ops", len(ops), "bytes", c.out.Bytes, "plan_and_stage", planned.Sub(c.started),
		"apply", time.Since(planned), "took", time.Since(c.started))
	return c.out, nil
}

// plan walks the layer, staging its files, and returns the ops that
// apply it once every file is staged.
func (c *committer) plan(ctx context.Context) ([]op, error) {
	if c.opt.CrashAt != "" {
		c.stage.onStage = func(n int64) { c.crash(fmt.Sprintf("stage:%d", n)) }
	}
	err := c.walk(ctx, int(c.src.Upper.Fd()), "", nil)
	c.dropParent()
	if _, serr := c.stage.wait(); err == nil {
		err = serr
	}
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	sort.SliceStable(c.metas, func(a, b int) bool {
		return strings.Count(c.metas[a].Path, "/") > strings.Count(c.metas[b].Path, "/")
	})
	return append(c.ops, c.metas...), nil
}

func (c *committer) crash(at string) {
	if c.opt.CrashAt != "" && c.opt.CrashAt == at {
		unix.Kill(os.Getpid(), unix.SIGKILL)
		select {}
	}
}

// walk plans the commit of the layer directory dir (an open descriptor)
// at workspace path rel. into is where rel is staged when the workspace
// has no directory there (nil: it has).
func (c *committer) walk(ctx context.Context, dir int, rel string, into *stageDir) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	names, err := readDirNames(dir)
	if err != nil {
		return fmt.Errorf("read layer %s: %w", rel, err)
	}
	sort.Strings(names)
	for _, name := range names {
		if c.stage.failed.Load() {
			return nil // the stager's error ends the commit
		}
		p := relJoin(rel, name)
		st, err := lstatAt(dir, name)
		if err != nil {
			return fmt.Errorf("layer %s: %w", p, err)
		}
		switch fileType(&st) {
		case unix.S_IFCHR:
			if st.Rdev_major == 0 && st.Rdev_minor == 0 {
				c.whiteout(p)
				continue
			}
			c.out.Skipped = append(c.out.Skipped, Refused{p, "a device node is never committed"})
		case unix.S_IFBLK:
			c.out.Skipped = append(c.out.Skipped, Refused{p, "a device node is never committed"})
		case unix.S_IFIFO:
			c.out.Skipped = append(c.out.Skipped, Refused{p, "a named pipe is never committed"})
		case unix.S_IFSOCK:
			c.out.Skipped = append(c.out.Skipped, Refused{p, "a socket is never committed"})
		case unix.S_IFDIR:
			if err := c.dir(ctx, dir, name, p, &st, into); err != nil {
				return err
			}
		case unix.S_IFLNK:
			if err := c.symlink(dir, name, p, &st, into); err != nil {
				return err
			}
		case unix.S_IFREG:
			if err := c.file(dir, name, p, &st, into); err != nil {
				return err
			}
		}
	}
	return nil
}

// refuse records a persistence refusal for p when the guard says so, and
// a listing when it commits p but the person should see it.
func (c *committer) refuse(p string, k kind) bool {
	v := c.guard.check(p, k)
	switch v.Action {
	case persist.Refuse:
		c.out.Refused = append(c.out.Refused, Refused{p, v.Why})
		return true
	case persist.List:
		c.out.Listed = append(c.out.Listed, Refused{p, v.Why})
	}
	return false
}

// below lists what the layer holds under the directory name in parent (at
// workspace path p): files, symlinks and removals, not directories. Capped:
// it only names refusals.
func (c *committer) below(parent int, name, p string) []string {
	const most = 100
	var out []string
	var walk func(dir int, rel string)
	walk = func(dir int, rel string) {
		names, err := readDirNames(dir)
		if err != nil {
			return
		}
		sort.Strings(names)
		for _, n := range names {
			if len(out) >= most {
				return
			}
			q := relJoin(rel, n)
			st, err := lstatAt(dir, n)
			if err != nil {
				continue
			}
			if fileType(&st) != unix.S_IFDIR {
				out = append(out, q)
				continue
			}
			if fd, err := unix.Openat(dir, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
				walk(fd, q)
				unix.Close(fd)
			}
		}
	}
	if fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err == nil {
		walk(fd, p)
		unix.Close(fd)
	}
	return out
}

// current is what the workspace holds at p now.
func (c *committer) current(p string) (*expect, *unix.Statx_t, error) {
	var st unix.Statx_t
	var err error
	if p == "" || p == "." {
		st, err = lstatAt(c.ws, ".")
	} else {
		var pfd int
		if pfd, err = c.parent(filepath.Dir(p)); err == nil {
			st, err = lstatAt(pfd, filepath.Base(p))
		}
	}
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return &expect{Absent: true}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return &expect{Ino: st.Ino, Ctime: nanos(st.Ctime)}, &st, nil
}

// reachable returns into, where p is staged below a new directory, unless
// the workspace could not be asked about p (a path too long, say): then
// nil, and p is planned as any other path is, which records why.
func (c *committer) reachable(p string, into *stageDir) *stageDir {
	if into == nil {
		return nil
	}
	if _, _, err := c.current(p); err != nil {
		return nil
	}
	return into
}

// parent opens the workspace directory rel (as parentOf would, O_PATH)
// for current, or returns it open from the last call: the walk looks up
// every entry of a directory in a row. Planning only reads through it;
// applying opens every op's directory anew.
func (c *committer) parent(rel string) (int, error) {
	if c.pdir != nil && c.pdir.rel == rel {
		return c.pdir.fd, c.pdir.err
	}
	c.dropParent()
	fd, err := openBeneath(c.ws, rel, unix.O_PATH|unix.O_DIRECTORY)
	c.pdir = &openDir{rel: rel, fd: fd, err: err}
	return fd, err
}

func (c *committer) dropParent() {
	if c.pdir != nil && c.pdir.err == nil {
		unix.Close(c.pdir.fd)
	}
	c.pdir = nil
}

// openDir is a directory parent keeps open (or could not open: err).
type openDir struct {
	rel string
	fd  int
	err error
}

func (c *committer) whiteout(p string) {
	if c.refuse(p, kindRemove) {
		return
	}
	exp, _, err := c.current(p)
	if err != nil {
		c.out.Refused = append(c.out.Refused, Refused{p, "cannot be reached in the workspace (" + publicerr.Reason(err) + ")"})
		return
	}
	if exp.Absent {
		return
	}
	if changedSince(c.ws, p, c.since) {
		c.out.Conflicts = append(c.out.Conflicts, Conflict{Path: p, Why: "removed by the command but changed in the workspace while it ran; the workspace's version stays"})
		return
	}
	c.ops = append(c.ops, op{Kind: "remove", Path: p, Expect: exp})
	c.out.Removed++
}

func (c *committer) dir(ctx context.Context, parent int, name, p string, st *unix.Statx_t, into *stageDir) error {
	if c.refuse(p, kindDir) {
		c.refuseBelow(parent, name, p)
		return nil
	}
	if !c.chown && st.Mode&0o700 != 0o700 {
		// The command locked its own directory; the layer is ours to
		// read and search (the committed directory gets the mode it was
		// left with, st's).
		unix.Fchmodat(parent, name, uint32(st.Mode)&0o7777|0o700, 0)
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("layer %s: %w", p, err)
	}
	defer unix.Close(fd)
	var wst *unix.Statx_t // the workspace's directory at p (nil: none)
	opaque := false
	if into = c.reachable(p, into); into == nil { // below a new directory, everything is new
		opaque = isOpaque(fd)
		var exp *expect
		exp, wst, err = c.current(p)
		if err != nil {
			c.out.Refused = append(c.out.Refused, Refused{p, "cannot be reached in the workspace (" + publicerr.Reason(err) + ")"})
			return nil
		}
		if wst != nil && fileType(wst) != unix.S_IFDIR {
			// A file (or symlink) replaced by a directory.
			if changedSince(c.ws, p, c.since) {
				c.out.Conflicts = append(c.out.Conflicts, Conflict{Path: p, Why: "replaced by a directory by the command but changed in the workspace while it ran; the workspace's version stays"})
				return nil
			}
			c.ops = append(c.ops, op{Kind: "remove", Path: p, Expect: exp})
			wst = nil
		}
	}
	meta := op{Kind: "meta", Path: p, Mode: c.mode(p, uint32(st.Mode), wst), UID: c.uid(int(st.Uid)), GID: c.gid(int(st.Gid))}
	if wst == nil {
		c.out.Dirs++
		meta.Atime, meta.Mtime = nanos(st.Atime), nanos(st.Mtime)
		c.metas = append(c.metas, meta)
		return c.newDir(ctx, fd, name, p, into)
	}
	if opaque {
		if err := c.removeHidden(fd, p); err != nil {
			return err
		}
	}
	c.dirMeta(&meta, wst)
	if meta.Kind != "" {
		c.metas = append(c.metas, meta)
	}
	return c.walk(ctx, fd, p, nil)
}

// newDir stages the layer's directory fd (name in its parent, at
// workspace path p, which the workspace does not have) with everything
// below it, in into (nil: at the top of the staging directory, to be
// renamed into place as a whole by one op). Its metadata is set once in
// place, by its meta op.
func (c *committer) newDir(ctx context.Context, fd int, name, p string, into *stageDir) error {
	d, err := c.stage.mkdir(into, name)
	if err != nil {
		return fmt.Errorf("stage %s: %w", p, err)
	}
	defer d.release()
	if into == nil {
		c.ops = append(c.ops, op{Kind: "placedir", Path: p, Stage: d.name, Expect: &expect{Absent: true}})
	}
	return c.walk(ctx, fd, p, d)
}

// refuseBelow replaces the refusal just recorded for the directory name
// in parent (at workspace path p) with one for each thing the command
// wrote below it, when there is any: name what was refused, not only the
// directory.
func (c *committer) refuseBelow(parent int, name, p string) {
	last := len(c.out.Refused) - 1
	if below := c.below(parent, name, p); len(below) > 0 {
		why := c.out.Refused[last].Why
		c.out.Refused = c.out.Refused[:last]
		for _, b := range below {
			c.out.Refused = append(c.out.Refused, Refused{b, why})
		}
	}
}

// isOpaque reports whether the layer directory fd hides everything below
// it.
func isOpaque(fd int) bool {
	var buf [4]byte
	n, err := unix.Fgetxattr(fd, opaqueXattr, buf[:])
	return err == nil && n == 1 && buf[0] == 'y'
}

// removeHidden plans, for an opaque layer directory fd at workspace path
// p: everything that was below and is not in the layer goes.
func (c *committer) removeHidden(fd int, p string) error {
	wfd, err := openBeneath(c.ws, p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return fmt.Errorf("workspace %s: %w", p, err)
	}
	below, err := readDirNames(wfd)
	unix.Close(wfd)
	if err != nil {
		return fmt.Errorf("workspace %s: %w", p, err)
	}
	sort.Strings(below)
	for _, n := range below {
		if _, err := lstatAt(fd, n); err == nil {
			continue // replaced by the layer's entry
		}
		c.whiteout(relJoin(p, n))
	}
	return nil
}

// dirMeta settles meta, the metadata op planned for a directory the
// workspace already holds as wst.
func (c *committer) dirMeta(meta *op, wst *unix.Statx_t) {
	if wst.Mode&0o7777 == uint16(meta.Mode) && int(wst.Uid) == meta.UID && int(wst.Gid) == meta.GID {
		meta.Kind = "" // nothing to change
	}
	if !c.chown && wst.Mode&0o300 != 0o300 {
		// The command opened up a directory it may not write to as it
		// is now, wrote in it, and maybe locked it again: an unprivileged
		// commit needs it open too until its final mode is set, last.
		c.ops = append(c.ops, op{Kind: "meta", Path: meta.Path, Mode: uint32(wst.Mode)&0o1777 | 0o700, UID: int(wst.Uid), GID: int(wst.Gid)})
		meta.Kind = "meta"
	}
}

func (c *committer) symlink(parent int, name, p string, st *unix.Statx_t, into *stageDir) error {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(parent, name, buf)
	if err != nil {
		return fmt.Errorf("layer %s: %w", p, err)
	}
	target := string(buf[:n])
	if c.refuse(p, kindSymlink) {
		return nil
	}
	if into = c.reachable(p, into); into != nil {
		if err := c.stage.symlink(into, name, target, c.uid(int(st.Uid)), c.gid(int(st.Gid)), st); err != nil {
			return fmt.Errorf("stage %s: %w", p, err)
		}
		c.out.Symlinks++
		return nil
	}
	exp, _, ok := c.replaceable(p)
	if !ok {
		// Conflict: the link is saved beside the workspace's version.
		saved := c.conflictName(p)
		c.ops = append(c.ops, op{Kind: "symlink", Path: saved, Target: target, UID: c.uid(int(st.Uid)), GID: c.gid(int(st.Gid)), Expect: &expect{Absent: true}})
		c.out.Conflicts[len(c.out.Conflicts)-1].SavedAs = saved
		return nil
	}
	c.ops = append(c.ops, op{Kind: "symlink", Path: p, Target: target, UID: c.uid(int(st.Uid)), GID: c.gid(int(st.Gid)),
		Atime: nanos(st.Atime), Mtime: nanos(st.Mtime), Expect: exp})
	c.out.Symlinks++
	return nil
}

func (c *committer) file(parent int, name, p string, st *unix.Statx_t, into *stageDir) error {
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) && !c.chown {
		// The command made its own file unreadable; the layer is ours.
		unix.Fchmodat(parent, name, uint32(st.Mode)&0o7777|0o400, 0)
		fd, err = unix.Openat(parent, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return fmt.Errorf("layer %s: %w", p, err)
	}
	if c.refuse(p, kindFile) {
		unix.Close(fd)
		return nil
	}
	if into = c.reachable(p, into); into != nil {
		// Below a new directory: staged under its own name, in place.
		c.stage.file(into, name, fd, p, c.mode(p, uint32(st.Mode), nil), c.uid(int(st.Uid)), c.gid(int(st.Gid)), st)
		c.out.Files++
		c.out.Bytes += int64(st.Size)
		return nil
	}
	target := p
	exp, wst, ok := c.replaceable(p)
	if !ok {
		target = c.conflictName(p)
		c.out.Conflicts[len(c.out.Conflicts)-1].SavedAs = target
		exp = &expect{Absent: true}
	}
	if wst != nil && fileType(wst) != unix.S_IFREG {
		wst = nil // a symlink's or directory's mode says nothing of a file's: it is new
	}
	mode := c.mode(p, uint32(st.Mode), wst)
	// Staged by the stager's workers (which close fd); Commit waits for
	// them before the journal says staged.
	stage := c.stage.file(nil, "", fd, p, mode, c.uid(int(st.Uid)), c.gid(int(st.Gid)), st)
	c.ops = append(c.ops, op{Kind: "place", Path: target, Stage: stage, Expect: exp})
	if ok {
		c.out.Files++
		c.out.Bytes += int64(st.Size)
	}
	return nil
}

// replaceable decides whether the attempt's version of p may replace what
// the workspace holds. It records a conflict when not. A path missing
// from the workspace takes the attempt's version: that a file the
// attempt changed was deleted from outside meanwhile cannot be told from
// a rename inside the attempt (the layer records neither).
func (c *committer) replaceable(p string) (*expect, *unix.Statx_t, bool) {
	exp, wst, err := c.current(p)
	if err != nil {
		c.out.Conflicts = append(c.out.Conflicts, Conflict{Path: p, Why: "cannot be reached in the workspace (" + publicerr.Reason(err) + ")"})
		return nil, nil, false
	}
	if wst == nil {
		return exp, nil, true
	}
	if changed := nanos(wst.Ctime) > c.since; changed || (fileType(wst) == unix.S_IFDIR && changedSince(c.ws, p, c.since)) {
		c.out.Conflicts = append(c.out.Conflicts, Conflict{Path: p, Why: "changed both by the command and in the workspace while it ran; the workspace's version stays"})
		return nil, wst, false
	}
	return exp, wst, true
}

// conflictName is where the attempt's version of a conflicting p is kept.
func (c *committer) conflictName(p string) string {
	id := c.opt.RunID
	if len(id) > 8 {
		id = id[:8]
	}
	return p + conflictSuffix + id
}

// conflictSuffix, plus the first 8 characters of the commit's run id, names
// the attempt's version of a conflicting path, beside it.
const conflictSuffix = ".sandboxd-conflict-"

// mode keeps permission and sticky bits, never setuid or setgid, and never
// widens what the workspace allows (persist's permission rule); before is
// what the workspace has at p (nil: nothing).
func (c *committer) mode(p string, m uint32, before *unix.Statx_t) uint32 {
	if m&(unix.S_ISUID|unix.S_ISGID) != 0 && m&unix.S_IFMT != unix.S_IFDIR {
		c.out.Stripped = append(c.out.Stripped, p)
	}
	mode, note := c.guard.mode(p, m, before)
	if note != "" {
		c.out.Modes = append(c.out.Modes, Refused{p, note})
	}
	return mode
}

func (c *committer) uid(u int) int {
	if u == c.src.HostUID {
		return c.src.UID
	}
	return u
}

func (c *committer) gid(g int) int {
	if g == c.src.HostGID {
		return c.src.GID
	}
	return g
}

// Where lists where a commit stages and journals (for messages).
func Where(stateDir string) string { return filepath.Join(stateDir, "txn") }
