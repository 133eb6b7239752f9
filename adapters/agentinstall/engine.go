package agentinstall

import (
	"bytes"
	"cmp"
	"errors"
	"slices"

	"github.com/sandboxd/sandboxd/publicerr"
)

// piece is one value the installer wants in an agent's file.
type piece struct {
	op    string   // opSet or opAdd
	path  []string // the key (opSet) or the array (opAdd)
	slot  string   // what it is for (entry.Slot)
	value string   // its text in the file's syntax
	what  string   // what it is, for the person
	why   string   // why install puts it there, said when it does
	label string   // opSet: what the key is, when not its name
	// refuse: another value of the user's at path is an error (opSet);
	// otherwise it is replaced and kept in the record for uninstall.
	refuse bool
	// refusal is the sentence that error ends with.
	refusal string
}

// editor applies pieces to one file, and reverts entries.
type editor struct {
	f       *agentFile
	old     []entry // the earlier install's entries for this file
	claimed []bool  // old entries a piece took over
	made    [][]string
	did     []string
}

func newEditor(f *agentFile, old []entry) *editor {
	return &editor{f: f, old: old, claimed: make([]bool, len(old))}
}

// install puts every piece in the file, taking over the earlier
// install's entries where they are still there, and reverts the earlier
// entries no piece wants any more. It returns the new entries.
func (ed *editor) install(pieces []piece) ([]entry, error) {
	var entries []entry
	for _, p := range pieces {
		var e *entry
		var err error
		if p.op == opSet {
			e, err = ed.installSet(p)
		} else {
			e, err = ed.installAdd(p)
		}
		if err != nil {
			return nil, err
		}
		if e != nil {
			entries = append(entries, *e)
		}
	}
	for i := len(ed.old) - 1; i >= 0; i-- {
		if !ed.claimed[i] {
			if err := ed.revert(ed.old[i], true); err != nil {
				return nil, err
			}
		}
	}
	return entries, nil
}

// findOld is the first unclaimed earlier entry of op at path that ok
// accepts, or -1.
func (ed *editor) findOld(op string, path []string, ok func(entry) bool) int {
	for i, e := range ed.old {
		if !ed.claimed[i] && e.Op == op && slices.Equal(e.Path, path) && ok(e) {
			return i
		}
	}
	return -1
}

func (ed *editor) installSet(p piece) (*entry, error) {
	d := ed.f.doc
	cur, found, err := d.get(p.path)
	if err != nil {
		return nil, ed.shapeError(p.path, err)
	}
	oi := ed.findOld(opSet, p.path, func(entry) bool { return true })
	mine := entry{Op: opSet, Path: p.path, Slot: p.slot, Value: p.value, What: p.what, Label: p.label}
	switch {
	case found && d.same(cur, p.value):
		if oi < 0 {
			return nil, nil // the user's own, and already right
		}
		ed.claimed[oi] = true
		if !d.same(ed.old[oi].Value, p.value) {
			return nil, nil // the user set it to ours since
		}
		mine.Previous = ed.old[oi].Previous
		return &mine, nil
	case found && oi >= 0 && d.same(cur, ed.old[oi].Value):
		ed.claimed[oi] = true
		mine.Previous = ed.old[oi].Previous
		ed.did = append(ed.did, "updated "+p.what+p.because())
	case found && p.refuse:
		return nil, publicerr.Errorf(nil, "%s already sets %s to %s; %s (nothing was changed)", ed.f.shown, d.name(p.path), cur, p.refusal)
	case found:
		mine.Previous = &cur
		ed.did = append(ed.did, "set "+p.what+" (it was "+cur+")"+p.because())
	default:
		ed.did = append(ed.did, "set "+p.what+p.because())
	}
	if err := d.set(p.path, p.value, &ed.made); err != nil {
		return nil, ed.shapeError(p.path, err)
	}
	return &mine, nil
}

func (ed *editor) installAdd(p piece) (*entry, error) {
	d := ed.f.doc
	elems, err := d.elems(p.path)
	if err != nil {
		return nil, ed.shapeError(p.path, err)
	}
	mine := &entry{Op: opAdd, Path: p.path, Slot: p.slot, Value: p.value, What: p.what}
	if indexOf(d, elems, p.value) >= 0 {
		oi := ed.findOld(opAdd, p.path, func(e entry) bool { return e.Slot == p.slot && d.same(e.Value, p.value) })
		if oi < 0 {
			return nil, nil // the user's own
		}
		ed.claimed[oi] = true
		return mine, nil
	}
	oi := ed.findOld(opAdd, p.path, func(e entry) bool { return e.Slot == p.slot && indexOf(d, elems, e.Value) >= 0 })
	if oi >= 0 {
		// The earlier install's entry for the same slot: replaced where
		// it is, so that nothing after it moves.
		ed.claimed[oi] = true
		elems[indexOf(d, elems, ed.old[oi].Value)] = p.value
		ed.did = append(ed.did, "updated "+p.what+p.because())
	} else {
		elems = append(elems, p.value)
		ed.did = append(ed.did, "added "+p.what+p.because())
	}
	if err := d.setElems(p.path, elems, &ed.made); err != nil {
		return nil, ed.shapeError(p.path, err)
	}
	return mine, nil
}

func (p piece) because() string {
	if p.why == "" {
		return ""
	}
	return ": " + p.why
}

func indexOf(d doc, elems []string, v string) int {
	return slices.IndexFunc(elems, func(e string) bool { return d.same(e, v) })
}

// revert takes e out of the file when it is still what install put
// there: an added element goes, a set value gets back the one it
// replaced. What the user changed since stays, and is named (quiet: an
// earlier install's entry a new install drops, said only when done).
func (ed *editor) revert(e entry, quiet bool) error {
	switch e.Op {
	case opSet:
		return ed.revertSet(e, quiet)
	case opAdd:
		return ed.revertAdd(e, quiet)
	}
	return publicerr.Errorf(nil, "sandboxd's record of what install changed in %s is damaged (an entry of unknown kind); nothing was changed", ed.f.shown)
}

func (ed *editor) revertSet(e entry, quiet bool) error {
	d := ed.f.doc
	cur, found, err := d.get(e.Path)
	if err != nil {
		return ed.shapeError(e.Path, err)
	}
	label := e.Label
	if label == "" {
		label = d.name(e.Path)
	}
	switch {
	case !found:
		ed.note(quiet, label+" was already removed")
		return nil
	case !d.same(cur, e.Value):
		ed.note(quiet, "left "+label+" as it is ("+cur+"): it was changed since install")
		return nil
	case e.Previous != nil:
		ed.did = append(ed.did, "restored "+label+" to "+*e.Previous)
		return ed.wrap(e.Path, d.set(e.Path, *e.Previous, &ed.made))
	}
	ed.did = append(ed.did, "removed "+e.What)
	return ed.wrap(e.Path, d.del(e.Path))
}

func (ed *editor) revertAdd(e entry, quiet bool) error {
	d := ed.f.doc
	elems, err := d.elems(e.Path)
	if err != nil {
		return ed.shapeError(e.Path, err)
	}
	i := indexOf(d, elems, e.Value)
	if i < 0 {
		ed.note(quiet, "left "+e.What+" to you: it is no longer as install wrote it (changed or removed since)")
		return nil
	}
	ed.did = append(ed.did, "removed "+e.What)
	var made [][]string
	return ed.wrap(e.Path, d.setElems(e.Path, slices.Delete(elems, i, i+1), &made))
}

func (ed *editor) note(quiet bool, s string) {
	if !quiet {
		ed.did = append(ed.did, s)
	}
}

// removeMade removes the containers install made that are empty again,
// the deepest first.
func (ed *editor) removeMade(made [][]string) error {
	made = slices.Clone(made)
	slices.SortStableFunc(made, func(a, b []string) int { return cmp.Compare(len(b), len(a)) })
	for _, m := range made {
		if err := ed.f.doc.delIfEmpty(m); err != nil {
			return ed.shapeError(m, err)
		}
	}
	return nil
}

func (ed *editor) wrap(path []string, err error) error {
	if err != nil {
		return ed.shapeError(path, err)
	}
	return nil
}

// shapeError is the public error for a file the installer will not edit
// at path.
func (ed *editor) shapeError(path []string, err error) error {
	name := ed.f.doc.name(path)
	switch {
	case errors.Is(err, errShape):
		return publicerr.Errorf(err, "%s has a value of another type than expected at %s (or on the way to it); fix it and run this again (nothing was changed)", ed.f.shown, name)
	case errors.Is(err, errForm):
		return publicerr.Errorf(err, "%s sets %s in a form the installer does not edit (an inline table, say); write it as a [table] and run this again (nothing was changed)", ed.f.shown, name)
	}
	return publicerr.Errorf(err, "%s could not be edited at %s; nothing was changed", ed.f.shown, name)
}

// mergeMade adds b's paths to a's, once each.
func mergeMade(a, b [][]string) [][]string {
	out := slices.Clone(a)
	for _, p := range b {
		if !slices.ContainsFunc(out, func(q []string) bool { return slices.Equal(p, q) }) {
			out = append(out, p)
		}
	}
	return out
}

// finishUninstall is the file's text once every entry is reverted: nil
// when the file should go (install created it and nothing is left).
func finishUninstall(f *agentFile, fr fileRecord) []byte {
	_, isJSON := f.doc.(jsonFile)
	switch {
	case f.doc.empty() && fr.Before == beforeAbsent:
		return nil
	case f.doc.empty() && fr.Before == beforeEmpty && isJSON:
		return []byte{} // JSON's text of nothing would be {}
	}
	b := append([]byte{}, f.doc.bytes()...) // never nil: nil removes the file
	if fr.NoFinalNewline {
		b = bytes.TrimSuffix(b, []byte{'\n'})
	}
	return b
}
