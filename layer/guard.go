package layer

import (
	"github.com/sandboxd/sandboxd/persist"
	"golang.org/x/sys/unix"
)

// The persistence check at commit. Whatever the command did inside its
// layer, what counts is the final tree: a change is refused when it would
// leave something in the workspace that a tool outside the sandbox runs
// or loads later. The rules are package persist's, the same ones a run
// without a layer applies after the command; this file only feeds them
// the layer's changes and the tree the commit would leave (finalFS).
// Through finalFS (persist.Layered: what the layer holds) the rules also
// decide a repository's metadata as a whole (persist/rollback.go): a new
// worktree or submodule is committed with all its files or none of them,
// whatever order the walk meets them in.

type kind int

const (
	kindFile kind = iota
	kindDir
	kindSymlink
	kindRemove
)

func (k kind) change() persist.Change {
	switch k {
	case kindDir:
		return persist.Dir
	case kindSymlink:
		return persist.Symlink
	case kindRemove:
		return persist.Remove
	}
	return persist.File
}

// guard decides each change of one commit.
type guard struct {
	c *persist.Checker
}

// newGuard checks changes between the workspace (ws, at opt.Workspace) and
// the layer (upper). The repositories the workspace held are found by a
// scan (remembered in the state directory, like a run without a layer).
func newGuard(ws, upper int, src Source, opt Options, chown bool) (*guard, error) {
	m := persist.NewMatcher(persist.Names(opt.Protected))
	scanFile := persist.ScanFile(opt.StateDir, opt.Workspace)
	scan, err := persist.ScanWorkspace(opt.Workspace, m, persist.LoadScan(scanFile))
	if err != nil {
		return nil, err
	}
	if err := persist.SaveScan(scanFile, scan); err != nil {
		opt.Log.Warn("could not remember the workspace scan", "err", err)
	}
	repos := scan.Repos(opt.Workspace, persist.Host{})
	final := newFinalFS(opt.Workspace, ws, upper, src, chown)
	return &guard{c: persist.NewChecker(persist.Config{
		Workspace: opt.Workspace, Final: final, Before: persist.Host{}, Names: m,
		Unguarded: opt.Unguarded, StartRepos: repos, StartNamed: scan.Named(opt.Workspace, m), Home: opt.Home, GlobalConfigs: opt.GitConfigs,
		Umask: opt.Caller.Umask,
	})}, nil
}

// check decides whether the change at p (of kind k) may be committed.
func (g *guard) check(p string, k kind) persist.Verdict {
	return g.c.Check(p, k.change())
}

// mode is the mode to commit at p for the layer's st, given what the
// workspace holds there (nil: nothing).
func (g *guard) mode(p string, m uint32, before *unix.Statx_t) (uint32, string) {
	var b *persist.Info
	if before != nil {
		b = &persist.Info{Mode: uint32(before.Mode)}
	}
	return g.c.Mode(p, m, b)
}
