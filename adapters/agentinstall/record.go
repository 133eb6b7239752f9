package agentinstall

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sandboxd/sandboxd/atomicfile"
	"github.com/sandboxd/sandboxd/publicerr"
)

// record is what install changed for one agent: uninstall reverts
// exactly this, and a later install replaces its entries instead of
// adding them twice.
type record struct {
	Agent string `json:"agent"`
	// Sandboxd is the binary the agent's files name.
	Sandboxd string       `json:"sandboxd"`
	Files    []fileRecord `json:"files"`
	Links    []linkRecord `json:"links,omitempty"`
}

// fileRecord is what install changed in one file.
type fileRecord struct {
	// Path is the file as the agent names it (a symbolic link is kept,
	// its target written).
	Path string `json:"path"`
	// Before is what was there: "absent", "empty" or "content".
	Before string `json:"before"`
	// NoFinalNewline: the file did not end with a newline (TOML, whose
	// text install keeps).
	NoFinalNewline bool `json:"no_final_newline,omitempty"`
	// Made are the objects or tables install created to hold its
	// entries, removed by uninstall when they are empty again.
	Made    [][]string `json:"made,omitempty"`
	Entries []entry    `json:"entries"`
}

const (
	beforeAbsent  = "absent"
	beforeEmpty   = "empty"
	beforeContent = "content"
)

// entry is one value install put in a file.
type entry struct {
	// Op is opSet (a key's value) or opAdd (an element of an array).
	Op string `json:"op"`
	// Path is the key (opSet) or the array (opAdd).
	Path []string `json:"path"`
	// Slot names what the entry is for, so that a later install
	// replaces it rather than adding another (a moved binary changes the
	// hook's command, not its slot).
	Slot string `json:"slot"`
	// Value is the value's text in the file's own syntax.
	Value string `json:"value"`
	// Previous is the text of the value it replaced (opSet), nil when
	// the key was not set.
	Previous *string `json:"previous,omitempty"`
	// What says what it is, for the person; Label names its key
	// (opSet) when the key's own name would not.
	What  string `json:"what"`
	Label string `json:"label,omitempty"`
}

const (
	opSet = "set"
	opAdd = "add"
)

// loadRecord reads the record at path; ok is false when there is none.
func loadRecord(path string) (r record, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, publicerr.Wrap(err, "sandboxd could not read its record of what install changed")
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, false, publicerr.Wrap(err, "sandboxd's record of what install changed is damaged; remove it by hand from the installs directory of sandboxd's state, then check the agent's files")
	}
	return r, true, nil
}

// saveRecord writes r, readable by the caller only.
func saveRecord(path string, r record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return publicerr.Wrap(err, "sandboxd could not make the directory of its record of what install changed")
	}
	if err := atomicfile.WriteFileSync(path, append(b, '\n'), 0o600); err != nil {
		return publicerr.Wrap(err, "sandboxd could not write its record of what install changed")
	}
	return nil
}

func removeRecord(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return publicerr.Wrap(err, "sandboxd could not remove its record of what install changed")
	}
	return nil
}

func (r record) file(path string) (fileRecord, bool) {
	for _, f := range r.Files {
		if f.Path == path {
			return f, true
		}
	}
	return fileRecord{}, false
}
