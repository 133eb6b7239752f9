package persist

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// What the sweep looks at after the run: what is new or replaced since
// the plan, and may matter to the rules.

// candidate is something new in the workspace after the run.
type candidate struct {
	rel  string
	repo bool   // a git directory that is new (or was replaced)
	why  string // refused for this reason without a look
}

// candidates lists what is new in the workspace since the start and may
// matter, and the instruction files to list.
func (p *Sweep) candidates(after *Scan, c *Checker) ([]candidate, []Persisted) {
	ws := p.ws
	var cands []candidate
	add := func(c candidate) { cands = append(cands, c) }
	// changed adds rel when what is there is not what was watched there.
	changed := func(rel string) {
		if id, _, err := lstatID(filepath.Join(ws, rel)); err == nil && p.watch[rel] != id {
			add(candidate{rel: rel})
		}
	}
	for rel, before := range p.watch {
		now, _, err := lstatID(filepath.Join(ws, rel))
		if err != nil {
			continue
		}
		if now != before && !(rel == ".git" && p.repos[".git"] == now) {
			cands = append(cands, candidate{rel: rel})
		}
	}
	for _, rel := range after.WithMark(".git") {
		dotgit := filepath.Join(rel, ".git")
		id, st, err := lstatID(filepath.Join(ws, dotgit))
		if err == nil && !st.IsDir() && p.watch[dotgit] != id {
			// A new gitfile or symlink: git would take a repository from
			// wherever it points.
			cands = append(cands, candidate{rel: dotgit})
		}
	}
	p.repoCandidates(after, c, add, changed)
	// A directory replaced by a symlink: judged as the link it is now
	// (one into a tree the rules do not check is refused).
	for rel := range p.scan.Dirs {
		if _, still := after.Dirs[rel]; still || rel == "" {
			continue
		}
		if st, err := os.Lstat(filepath.Join(ws, rel)); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			add(candidate{rel: rel})
		}
	}
	notes := p.namedCandidates(after, add, changed)
	for _, rel := range after.Redirects(ws, p.m) {
		changed(rel)
	}
	p.uncheckable(after, add)
	sort.Slice(cands, func(a, b int) bool { return cands[a].rel < cands[b].rel })
	return cands, notes
}

// repoCandidates are the repositories that are new or replaced, the
// caller's own relative hooks in each work tree, and symlinks the run
// made inside a repository that was there (refs/, logs/, info/ pointing
// elsewhere: a change the watched paths do not see). add and changed
// add to what candidates returns.
func (p *Sweep) repoCandidates(after *Scan, c *Checker, add func(candidate), changed func(string)) {
	ws := p.ws
	for _, r := range after.Repos(ws, Host{}) {
		if r.Dotgit {
			// Your own relative core.hooksPath, in every work tree.
			for _, h := range c.GlobalHooks() {
				changed(filepath.Join(r.At, h))
			}
		}
		if r.Gitfile {
			continue // the .git file itself is watched above
		}
		rel, ok := within(ws, r.GitDir)
		if !ok {
			continue
		}
		if id, _, err := lstatID(r.GitDir); err == nil && p.repos[rel] != id {
			add(candidate{rel: rel, repo: true})
			continue
		}
		walkGitDir(r.GitDir, p.since, func(path string, d fs.DirEntry) {
			if d.Type()&fs.ModeSymlink != 0 {
				var st unix.Stat_t
				if unix.Lstat(path, &st) == nil && st.Ctim.Nano() >= p.since {
					lrel, _ := filepath.Rel(ws, path)
					add(candidate{rel: lrel})
				}
			}
		})
	}
}

// namedCandidates are protected names that are new or replaced, and the
// instruction files that changed, to list.
func (p *Sweep) namedCandidates(after *Scan, add func(candidate), changed func(string)) []Persisted {
	ws := p.ws
	var notes []Persisted
	for _, rel := range after.Named(ws, p.m) {
		// A name reached through a new symlink: the symlink is the change.
		if link := firstLink(ws, rel); link != "" {
			changed(link)
			continue
		}
		id, st, err := lstatID(filepath.Join(ws, rel))
		if errors.Is(err, fs.ErrPermission) {
			// Behind a directory the command locked: what cannot be
			// checked is not kept.
			add(candidate{rel: rel, why: "sandboxd cannot read " + rel + " to check it, so it is not kept"})
			continue
		}
		if err != nil {
			continue
		}
		n, _, _ := p.m.Match(rel)
		if n.Kind == Instruction {
			if ct := st.Sys().(*syscall.Stat_t).Ctim.Nano(); p.named[rel] != id || p.ctimes[rel] != ct {
				notes = append(notes, Persisted{Path: rel, Action: "listed", Why: n.Pattern + ": " + n.Why()})
			}
			continue
		}
		if listedOnChange(n) {
			// Judged by the rules: listed, or refused where a hook now
			// runs it.
			if ct, ok := p.ctimes[rel]; !ok || p.named[rel] != id || ct != st.Sys().(*syscall.Stat_t).Ctim.Nano() {
				add(candidate{rel: rel})
			}
			continue
		}
		if p.named[rel] != id {
			add(candidate{rel: rel})
		}
	}
	return notes
}

// uncheckable: what the scan could not follow, it cannot clear: the
// highest new directory on the way goes.
func (p *Sweep) uncheckable(after *Scan, add func(candidate)) {
	start := p.scan
	for _, rel := range append(append([]string(nil), after.TooDeep...), after.Unread...) {
		if slices.Contains(start.TooDeep, rel) || slices.Contains(start.Unread, rel) {
			continue
		}
		top := ""
		for q := rel; q != "." && q != ""; q = filepath.Dir(q) {
			if _, existed := start.Dirs[q]; existed {
				break
			}
			top = q
		}
		why := "sandboxd cannot check " + rel + " (too deep, or unreadable), so it is not kept"
		if top == "" {
			top = rel
		}
		add(candidate{rel: top, why: why})
	}
}

// firstLink returns the first element of rel (relative to the directory
// ws: the workspace, or a git directory) that is a symlink, before its
// last element; "" when there is none.
func firstLink(ws, rel string) string {
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		q := strings.Join(parts[:i], "/")
		if st, err := os.Lstat(filepath.Join(ws, q)); err == nil && st.Mode()&fs.ModeSymlink != 0 {
			return q
		}
	}
	return ""
}

// walkGitDir calls fn for gd and everything in it but the objects
// themselves (named by their content, of no use to anyone who cannot
// find a hash's preimage): objects/ and objects/info are visited, the
// directories of loose objects and packs only when objects/ changed since
// the run began (an entry made or replaced there moves its change time).
func walkGitDir(gd string, since int64, fn func(path string, d fs.DirEntry)) {
	filepath.WalkDir(gd, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		sub, _ := filepath.Rel(gd, path)
		if sub == "objects" {
			fn(path, d)
			var st unix.Stat_t
			if unix.Lstat(path, &st) != nil || st.Ctim.Nano() < since {
				// Unchanged: its info/ only.
				walkGitDir(path+"/info", 0, fn)
				return filepath.SkipDir
			}
			return nil
		}
		fn(path, d)
		if d.IsDir() && strings.HasPrefix(sub, "objects/") && sub != "objects/info" {
			return filepath.SkipDir
		}
		return nil
	})
}
