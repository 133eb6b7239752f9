package persist

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/pathtree"
	"golang.org/x/sys/unix"
)

// The sweep's verdicts on what it found (sweep_find.go), by the rules a
// layer's commit applies, and the modes and ACLs it narrows.

// judgeTree checks rel and, when it is a directory, everything below it.
func judgeTree(c *Checker, ws, rel string) Verdict {
	var v Verdict
	filepath.WalkDir(filepath.Join(ws, rel), func(path string, d fs.DirEntry, err error) error {
		r, _ := filepath.Rel(ws, path)
		if errors.Is(err, fs.ErrPermission) {
			// Locked by the command (chmod 0): what cannot be checked is
			// not kept.
			v = Verdict{Action: Refuse, Why: "sandboxd cannot read " + r + " to check it, so it is not kept"}
			return filepath.SkipAll
		}
		if err != nil {
			return nil
		}
		k := File
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			k = Symlink
		case d.IsDir():
			k = Dir
		}
		if x := c.Check(r, k); x.Action > v.Action {
			v = x
		}
		if v.Action == Refuse {
			return filepath.SkipAll
		}
		return nil
	})
	return v
}

// judgeRepo decides a git directory the command made (or made out of a
// directory that was there): kept when it carries nothing that runs code
// (the rules of package persist for each of its files, and a config with
// only what git init and clone write). Otherwise the whole of it goes
// when it is new; when the directory was there before, only what made it
// a repository in this run goes (a HEAD, objects, refs or commondir that
// is new or changed; HEAD when none is), and what it held stays. The
// targets to quarantine are NUL-separated.
func (p *Sweep) judgeRepo(c *Checker, rel string, start *Scan) (Verdict, string) {
	gd := filepath.Join(p.ws, rel)
	v := judgeTree(c, p.ws, rel)
	// The rule for a repository the run made, which a layer's commit
	// applies too (newRepo: a new one reaches it through judgeTree, one
	// that replaced another only here).
	if v.Action != Refuse {
		if why := c.newRepo(rel); why != "" {
			v = Verdict{Action: Refuse, Why: "a new git repository " + why}
		}
	}
	if v.Action != Refuse {
		return v, ""
	}
	if _, existed := start.Dirs[rel]; !existed || filepath.Base(rel) == ".git" {
		return v, rel
	}
	var markers []string
	for _, mk := range repoMarkers() {
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(gd, mk), &st) != nil {
			continue
		}
		if was, ok := p.markers[filepath.Join(rel, mk)]; !ok || was != (markID{st.Ino, st.Ctim.Nano()}) {
			markers = append(markers, filepath.Join(rel, mk))
		}
	}
	if len(markers) == 0 {
		// Something they point at changed: without HEAD it is no
		// repository.
		markers = []string{filepath.Join(rel, "HEAD")}
	}
	v.Why = "this made " + rel + " a git repository, and " + strings.TrimPrefix(v.Why, "a new git repository ")
	return v, strings.Join(markers, "\x00")
}

// narrow takes group and other write away from git directories, hooks and
// configs that gained it (unless sharing allows it), and from any
// directory of the workspace that gained it.
func (p *Sweep) narrow(after *Scan, gone []string) []Persisted {
	var out []Persisted
	fix := func(rel string, startMode uint32, hadStart bool, allowed uint32, why string) {
		path := filepath.Join(p.ws, rel) // rel "" is the workspace itself
		st, err := os.Lstat(path)
		if err != nil || st.Mode()&fs.ModeSymlink != 0 {
			return
		}
		mode := uint32(st.Mode().Perm())
		keep := allowed
		if hadStart {
			keep |= startMode & 0o022
		}
		strip := mode & 0o022 &^ keep
		if strip == 0 {
			return
		}
		if err := os.Chmod(path, os.FileMode(mode&^strip)|st.Mode()&(fs.ModeSticky)); err != nil {
			return
		}
		out = append(out, Persisted{Path: rel, Action: "narrowed", Why: why})
	}
	for _, r := range after.Repos(p.ws, Host{}) {
		rel, ok := within(p.ws, r.GitDir)
		if !ok || pathtree.WithinAny(rel, gone) {
			continue
		}
		allowed := p.shared[rel]
		// Everything in it but the objects themselves (named by their
		// content): sequencer state, refs, hooks, config, info.
		var items []string
		walkGitDir(r.GitDir, p.since, func(path string, d fs.DirEntry) {
			if d.Type()&fs.ModeSymlink != 0 {
				return
			}
			// A mode or an ACL set moves the change time: what did not
			// change since the run began gained nothing.
			var st unix.Stat_t
			if unix.Lstat(path, &st) != nil || st.Ctim.Nano() < p.since {
				return
			}
			it, _ := filepath.Rel(p.ws, path)
			items = append(items, it)
		})
		for _, it := range items {
			m, had := p.modes[it]
			fix(it, m, had, allowed, "other accounts could write what git reads there; group/other write removed")
			if st, err := os.Lstat(filepath.Join(p.ws, it)); err == nil && st.IsDir() {
				if added := dirACL(filepath.Join(p.ws, it)) &^ p.acls[it]; added != 0 {
					p.dropACL(it, added)
					out = append(out, Persisted{Path: it, Action: "narrowed", Why: "the command gave git's directory an ACL; removed"})
				}
			}
		}
	}
	for rel, d := range after.Dirs {
		if rel != "" && pathtree.WithinAny(rel, gone) {
			continue
		}
		s, existed := p.scan.Dirs[rel]
		existed = existed && s.Ino == d.Ino
		added := d.ACL
		if existed {
			added &^= s.ACL
		}
		if added != 0 {
			// An ACL can grant other accounts write, and a default ACL
			// overrides the umask of every file made there later.
			p.dropACL(rel, added)
			out = append(out, Persisted{Path: rel, Action: "narrowed", Why: "the command gave the directory an ACL; removed"})
		}
		if existed {
			fix(rel, s.Mode, true, 0, "the directory gained group/other write during the run; removed")
		} else if d.Mode&p.umask&0o022 != 0 {
			fix(rel, 0, true, 0o022&^p.umask, "a new directory gets no more than your umask allows; group/other write removed")
		}
	}
	return out
}

// dropACL removes the ACLs (ACLNames bits) from the directory rel.
func (p *Sweep) dropACL(rel string, bits uint8) {
	for i, name := range ACLNames() {
		if bits&(1<<i) != 0 {
			unix.Lremovexattr(filepath.Join(p.ws, rel), name)
		}
	}
}
