package agentinstall

import (
	"encoding/json"
	"errors"
	"strings"
)

// doc is an agent's file being edited, whatever its format: the values
// are texts in the file's own syntax.
type doc interface {
	// get is the value at path; found says whether it is set.
	get(path []string) (raw string, found bool, err error)
	// set sets the value at path; made gets each container it created.
	set(path []string, raw string, made *[][]string) error
	// del removes the value at path.
	del(path []string) error
	// elems are the elements of the array at path (none when absent).
	elems(path []string) ([]string, error)
	// setElems makes the array at path hold elems.
	setElems(path []string, elems []string, made *[][]string) error
	// delIfEmpty removes the container at path when it holds nothing.
	delIfEmpty(path []string) error
	// same says whether two values' texts are the same value.
	same(a, b string) bool
	empty() bool
	bytes() []byte
	// name is path as the person would write it in this format.
	name(path []string) string
}

type jsonFile struct{ d *jsonDoc }

func (f jsonFile) get(path []string) (string, bool, error) {
	v, ok, err := f.d.get(path)
	return string(v), ok, err
}

func (f jsonFile) set(path []string, raw string, made *[][]string) error {
	return f.d.put(path, json.RawMessage(raw), made)
}

func (f jsonFile) del(path []string) error { return f.d.remove(path) }

func (f jsonFile) elems(path []string) ([]string, error) {
	a, err := f.d.array(path)
	out := make([]string, len(a))
	for i, e := range a {
		out[i] = string(e)
	}
	return out, err
}

func (f jsonFile) setElems(path []string, elems []string, made *[][]string) error {
	if _, ok, err := f.d.get(path); err != nil {
		return err
	} else if !ok {
		*made = append(*made, path)
	}
	a := make([]json.RawMessage, len(elems))
	for i, e := range elems {
		a[i] = json.RawMessage(e)
	}
	return f.d.put(path, marshalArray(a), made)
}

func (f jsonFile) delIfEmpty(path []string) error {
	if f.d.isEmptyContainer(path) {
		return f.d.remove(path)
	}
	return nil
}

func (f jsonFile) same(a, b string) bool     { return sameJSON([]byte(a), []byte(b)) }
func (f jsonFile) empty() bool               { return f.d.empty() }
func (f jsonFile) bytes() []byte             { return f.d.text() }
func (f jsonFile) name(path []string) string { return strings.Join(path, ".") }

type tomlFile struct{ d *tomlDoc }

func (f tomlFile) get(path []string) (string, bool, error) { return f.d.get(path) }

func (f tomlFile) set(path []string, raw string, made *[][]string) error {
	return f.d.set(path, raw, made)
}

func (f tomlFile) del(path []string) error { return f.d.del(path) }

// The installer adds no array elements to a TOML file.
var errNoArrays = errors.New("the installer edits no TOML arrays")

func (f tomlFile) elems([]string) ([]string, error)               { return nil, errNoArrays }
func (f tomlFile) setElems([]string, []string, *[][]string) error { return errNoArrays }
func (f tomlFile) delIfEmpty(path []string) error                 { return f.d.delEmptyTable(path) }

func (f tomlFile) same(a, b string) bool {
	v, err := tomlValue(b)
	return err == nil && sameTOML(a, v)
}

func (f tomlFile) empty() bool               { return f.d.empty() }
func (f tomlFile) bytes() []byte             { return f.d.text }
func (f tomlFile) name(path []string) string { return tomlDotted(path) }
