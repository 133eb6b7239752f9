package agentinstall

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
)

// txn is one install or uninstall of one agent: every file is read,
// parsed and edited in memory first, so that a file the installer
// refuses leaves every file as it was.
type txn struct {
	e       Env
	agent   string
	o       Options
	rec     record // the earlier install's, if any
	hadRec  bool
	files   []*agentFile
	out     [][]byte // each file's new text; nil: remove it
	frs     []fileRecord
	links   []linkRecord // the links this install keeps
	mkLinks []linkRecord // links to make before the files are written
	rmLinks []string     // links to remove after
	changes []Change
}

func newTxn(agent string, e Env, o Options) (*txn, error) {
	rec, had, err := loadRecord(e.Layout.Install(agent))
	if err != nil {
		return nil, err
	}
	return &txn{e: e, agent: agent, o: o, rec: rec, hadRec: had}, nil
}

func formatOf(path string) string {
	if filepath.Ext(path) == ".toml" {
		return formatTOML
	}
	return formatJSON
}

func (t *txn) open(path string) (*agentFile, error) {
	return readAgentFile(path, t.e.shown(path), formatOf(path))
}

// did records what was done to path, a phrase said many times (one
// for each of a class's rules) once, with its count.
func (t *txn) did(path string, phrases []string) {
	n := map[string]int{}
	for _, d := range phrases {
		n[d]++
	}
	for _, d := range phrases {
		switch c := n[d]; {
		case c == 1:
			t.changes = append(t.changes, Change{File: path, Did: d})
		case c > 1:
			t.changes = append(t.changes, Change{File: path, Did: fmt.Sprintf("%s (%d rules)", d, c)})
			n[d] = 0
		}
	}
}

// install puts pieces in f, over the earlier install's entries there.
func (t *txn) install(f *agentFile, pieces []piece) error {
	old, had := t.rec.file(f.path)
	ed := newEditor(f, old.Entries)
	entries, err := ed.install(pieces)
	if err != nil {
		return err
	}
	fr := fileRecord{Path: f.path, Before: f.before(), Made: mergeMade(old.Made, ed.made), Entries: entries}
	fr.NoFinalNewline = formatOf(f.path) == formatTOML && len(f.orig) > 0 && f.orig[len(f.orig)-1] != '\n'
	if had {
		fr.Before, fr.NoFinalNewline = old.Before, old.NoFinalNewline
	}
	t.did(f.path, ed.did)
	t.files, t.out, t.frs = append(t.files, f), append(t.out, f.doc.bytes()), append(t.frs, fr)
	return nil
}

// revertFile reverts every entry of fr, the last first, and says what
// the file becomes.
func (t *txn) revertFile(fr fileRecord) (*editor, error) {
	f, err := t.open(fr.Path)
	if err != nil {
		return nil, err
	}
	ed := newEditor(f, nil)
	for i := len(fr.Entries) - 1; i >= 0; i-- {
		if err := ed.revert(fr.Entries[i], false); err != nil {
			return nil, err
		}
	}
	if err := ed.removeMade(fr.Made); err != nil {
		return nil, err
	}
	t.files, t.out = append(t.files, f), append(t.out, finishUninstall(f, fr))
	return ed, nil
}

// link makes path a link to target (recorded either way).
func (t *txn) link(path, target, shown string) error {
	did, err := planLink(path, target, shown)
	if err != nil {
		return err
	}
	if did != "" {
		t.changes = append(t.changes, Change{Did: did})
		t.mkLinks = append(t.mkLinks, linkRecord{path, target})
	}
	t.links = append(t.links, linkRecord{path, target})
	return nil
}

// unlink removes the link l when it is still install's.
func (t *txn) unlink(l linkRecord, shown string) {
	remove, did := planUnlink(l, shown)
	t.changes = append(t.changes, Change{Did: did})
	if remove {
		t.rmLinks = append(t.rmLinks, l.Path)
	}
}

// dropStale reverts the earlier install's files and links this install
// does not touch (the agent's directory moved, say).
func (t *txn) dropStale() error {
	for _, l := range t.rec.Links {
		if !slices.ContainsFunc(t.links, func(n linkRecord) bool { return n.Path == l.Path }) {
			t.unlink(l, linkShown)
		}
	}
	for _, fr := range t.rec.Files {
		if slices.ContainsFunc(t.files, func(f *agentFile) bool { return f.path == fr.Path }) {
			continue
		}
		ed, err := t.revertFile(fr)
		if err != nil {
			return err
		}
		t.did(fr.Path, ed.did)
	}
	return nil
}

// commit writes the record, then the files; a dry run writes nothing.
func (t *txn) commit(r *record) ([]Change, error) {
	if t.o.DryRun {
		return t.changes, nil
	}
	if r != nil {
		if err := saveRecord(t.e.Layout.Install(t.agent), *r); err != nil {
			return nil, err
		}
	}
	for _, l := range t.mkLinks {
		if err := makeLink(l.Path, l.Target); err != nil {
			return t.changes, err
		}
	}
	for i, f := range t.files {
		note, err := writeOut(f, t.out[i])
		if err != nil {
			return t.changes, err
		}
		if note != "" {
			t.changes = append(t.changes, Change{File: f.path, Did: note})
		}
	}
	for _, l := range t.rmLinks {
		if err := removeLink(l); err != nil {
			return t.changes, err
		}
	}
	if r == nil {
		if err := removeRecord(t.e.Layout.Install(t.agent)); err != nil {
			return t.changes, err
		}
	}
	return t.changes, nil
}

// writeOut gives f the text b: nil removes a file install created.
func writeOut(f *agentFile, b []byte) (note string, err error) {
	switch {
	case b == nil:
		if f.exists {
			return "", f.remove()
		}
		return "", nil
	case f.exists && bytes.Equal(b, f.orig):
		return "", nil
	}
	return f.write(b)
}

// finishInstall records the install and writes it.
func (t *txn) finishInstall() ([]Change, error) {
	if err := t.dropStale(); err != nil {
		return nil, err
	}
	if len(t.changes) == 0 {
		t.changes = append(t.changes, Change{Did: "already installed; nothing changed"})
	}
	return t.commit(&record{Agent: t.agent, Sandboxd: t.e.Sandboxd, Files: t.frs, Links: t.links})
}

// uninstall reverts the record of agent's install.
func uninstall(agent string, e Env, o Options) ([]Change, error) {
	t, err := newTxn(agent, e, o)
	if err != nil {
		return nil, err
	}
	if !t.hadRec {
		return []Change{{Did: "sandboxd has no record of an install into " + agent + "; nothing changed"}}, nil
	}
	for _, fr := range t.rec.Files {
		var shifted []string
		if agent == codexAgent && filepath.Base(fr.Path) == "hooks.json" {
			if shifted, err = codexShifted(t, fr); err != nil {
				return nil, err
			}
		}
		ed, err := t.revertFile(fr)
		if err != nil {
			return nil, err
		}
		t.did(fr.Path, append(ed.did, shifted...))
	}
	for _, l := range t.rec.Links {
		t.unlink(l, linkShown)
	}
	if len(t.changes) == 0 {
		t.changes = append(t.changes, Change{Did: "nothing left to take out"})
	}
	return t.commit(nil)
}
