package session

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/layer"
	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox"
	"golang.org/x/sys/unix"
)

// commit commits the pending layer, if any, into the workspace: the
// final attempt's. What the commit refused are boundaries of the final
// attempt (persist, hard-deny).
func (st *run) commit() error {
	if st.pending == nil {
		return nil
	}
	l := st.pending
	st.pending = nil
	out, err := st.commitLayer(l)
	st.rep.Transaction.Committed = &out
	for _, li := range out.Listed {
		st.rep.Persistence = append(st.rep.Persistence, sandbox.Persisted{Path: li.Path, Action: "committed", Why: li.Why})
	}
	st.mu.Lock()
	for _, r := range out.Refused {
		st.rep.Boundaries = append(st.rep.Boundaries, Boundary{Attempt: st.rep.Attempts, Surface: boundary.Filesystem,
			Operation: boundary.OpPersist, Path: filepath.Join(st.plan.ws, r.Path), Decision: broker.Deny,
			Source: broker.SourceHardDeny, Rationale: r.Why})
	}
	st.mu.Unlock()
	ev := Event{Kind: KindCommitted, Attempt: st.rep.Attempts, Workspace: st.plan.ws, Commit: &out}
	changed := out.Files+out.Dirs+out.Symlinks+out.Removed > 0
	for _, lim := range st.rep.Limits {
		if !changed {
			break
		}
		// The final attempt ended at a limit: what it was writing may be
		// cut short, and is committed as it is.
		ev.EndedAtLimit = append(ev.EndedAtLimit, lim.Limit)
		for _, p := range lim.Writing {
			if rel, below := pathtree.Below(st.plan.ws, filepath.Clean(p)); below {
				ev.Writing = append(ev.Writing, rel)
			}
		}
	}
	st.ev.Event(ev)
	if err != nil {
		st.r.log.Debug("commit", "err", err)
		return publicerr.Wrap(err, "the command's changes could not be committed; the workspace is untouched or, after `sandboxd recover`, fully committed (run with -v to log why)")
	}
	return nil
}

// commitLayer runs layer.Commit on l's upper directory, recorded in
// flight with the Runner's Commits, if any, from before it starts until
// it has ended well.
func (st *run) commitLayer(l *sandbox.Layer) (layer.Outcome, error) {
	defer l.Close()
	upper, err := openUpper(l)
	if err != nil {
		return layer.Outcome{}, fmt.Errorf("open the layer: %w", err)
	}
	defer upper.Close()
	if empty, err := dirEmpty(upper); err == nil && empty {
		// The attempt changed nothing: no commit to record in flight
		// or to make (layer.Commit would find the same and do nothing).
		return layer.Outcome{}, nil
	}
	spec := &st.plan.spec
	runID := newID()
	if st.r.commits != nil {
		id := st.caller.ID()
		end, berr := st.r.commits.Begin(InFlight{UID: id.UID, GID: id.GID, Groups: id.Groups, Umask: id.Umask,
			StateDir: spec.StateDir, Workspace: spec.Workspace, RunID: runID})
		if berr != nil {
			// A commit nobody could recover after a crash does not start.
			return layer.Outcome{}, fmt.Errorf("record the commit in flight: %w", berr)
		}
		defer func() {
			if err == nil {
				end()
			}
		}()
	}
	var out layer.Outcome
	out, err = layer.Commit(st.ctx, layer.Source{Upper: upper, Started: l.Started,
		HostUID: l.HostUID, HostGID: l.HostGID, UID: l.UID, GID: l.GID},
		layer.Options{Workspace: spec.Workspace, StateDir: spec.StateDir, RunID: runID,
			Protected: spec.Protected, Unguarded: append(append([]string(nil), spec.Writable...), spec.Caches...),
			Home: spec.Home, GitConfigs: spec.GitConfigs, Caller: st.caller.ID(),
			Log: st.r.log, CrashAt: st.r.crashAt})
	return out, err
}

// InFlight is one commit in progress, as a process that commits for
// many callers (the daemon) records it: whose it is, and where package
// layer journals it. It is all Recover needs.
type InFlight struct {
	// UID, GID, Groups and Umask are the caller's file-system identity:
	// a recovery acts with it, never with the process's own.
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
	Groups []int  `json:"groups"`
	Umask  uint32 `json:"umask"`
	// StateDir is the caller's state directory (Caller.Layout().State),
	// where the commit's journal is.
	StateDir string `json:"state_dir"`
	// Workspace and RunID name the commit, for the log.
	Workspace string `json:"workspace"`
	RunID     string `json:"run_id"`
}

// ID is the file-system identity a recovery of c acts with.
func (c InFlight) ID() fsid.ID {
	return fsid.ID{UID: c.UID, GID: c.GID, Groups: c.Groups, Umask: c.Umask}
}

// Commits records the commits in flight of a long-lived process, so
// that after it was killed the next one can finish or roll back, for
// their callers, the commits it interrupted (Recover) without waiting
// for each caller's next run, which recovers them too.
type Commits interface {
	// Begin records c before its commit starts; when it fails the
	// commit does not start. end removes the record once the commit has
	// ended well; a commit that failed keeps it (its journal may be left
	// for recovery).
	Begin(c InFlight) (end func(), err error)
}

// Recover finishes or rolls back the commits a crash interrupted in c's
// state directory, as c's caller (package fsid): a recovery done with
// the process's rights could be made to write where the caller may not.
func Recover(c InFlight, log *slog.Logger) ([]layer.Recovered, error) {
	if !filepath.IsAbs(c.StateDir) || c.UID < 0 || c.GID < 0 {
		return nil, errors.New("session: recover: not a commit's record")
	}
	return layer.Recover(c.StateDir, c.ID(), log)
}

// openUpper opens the layer's upper directory, which the command may have
// locked (the root's own mode is never committed; the layer is ours).
func openUpper(l *sandbox.Layer) (*os.File, error) {
	root := int(l.Root.Fd())
	flags := unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(root, "upper", flags, 0)
	if errors.Is(err, unix.EACCES) {
		var st unix.Stat_t
		if unix.Fstatat(root, "upper", &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
			unix.Fchmodat(root, "upper", st.Mode&0o7777|0o700, 0)
		}
		fd, err = unix.Openat(root, "upper", flags, 0)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "upper"), nil
}

// dirEmpty reports whether the directory d has no entry, read through a
// descriptor of its own (d's offset stays where it is).
func dirEmpty(d *os.File) (bool, error) {
	fd, err := unix.Openat(int(d.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	f := os.NewFile(uintptr(fd), "upper")
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return len(names) == 0 && err == nil, err
}

// recover finishes or rolls back commits a crash interrupted.
func (st *run) recover() []layer.Recovered {
	rec, err := layer.Recover(st.caller.Layout().State, st.caller.ID(), st.r.log)
	for i := range rec {
		st.ev.Event(Event{Kind: KindRecovered, Recovered: &rec[i]})
	}
	if err != nil {
		st.r.log.Debug("recovery", "err", err)
		st.warn("sandboxd could not check its commit journal for an interrupted commit; `sandboxd recover` says why")
	}
	return rec
}
