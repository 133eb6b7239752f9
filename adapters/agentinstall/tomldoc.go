package agentinstall

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
	"github.com/sandboxd/sandboxd/ruletext"
)

// tomlDoc is one TOML file edited as text: only the bytes of what the
// installer sets change, so the user's comments, order and spelling stay.
// go-toml reads values and finds where they are; it never writes the
// file.
type tomlDoc struct {
	text []byte
}

// tomlKV is one key = value of the document, by its full key.
type tomlKV struct {
	key        []string
	start, end int // the expression
	valStart   int // the value, for a string or a boolean
	valEnd     int
	scalar     bool
}

// tomlHeader is one [table] header.
type tomlHeader struct {
	key        []string
	start, end int // the header's line, end past its newline
	array      bool
}

func parseTOMLDoc(b []byte) (*tomlDoc, error) {
	d := &tomlDoc{text: slices.Clone(b)}
	if _, err := d.decode(); err != nil {
		return nil, err
	}
	if _, _, err := d.scan(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *tomlDoc) decode() (map[string]any, error) {
	m := map[string]any{}
	if err := toml.Unmarshal(d.text, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// scan lists every key = value and table header of the document.
func (d *tomlDoc) scan() ([]tomlKV, []tomlHeader, error) {
	var kvs []tomlKV
	var headers []tomlHeader
	var table []string
	p := unstable.Parser{}
	p.Reset(d.text)
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = keyParts(e.Key())
			first := e.Key()
			first.Next()
			off := int(first.Node().Raw.Offset)
			headers = append(headers, tomlHeader{key: table, start: lineStart(d.text, off), end: lineEnd(d.text, off), array: e.Kind == unstable.ArrayTable})
		case unstable.KeyValue:
			kv := tomlKV{key: append(slices.Clone(table), keyParts(e.Key())...), start: int(e.Raw.Offset), end: int(e.Raw.Offset + e.Raw.Length)}
			if v := e.Value(); v.Kind == unstable.String || v.Kind == unstable.Bool {
				kv.scalar, kv.valStart, kv.valEnd = true, int(v.Raw.Offset), int(v.Raw.Offset+v.Raw.Length)
			}
			kvs = append(kvs, kv)
		}
	}
	return kvs, headers, p.Error()
}

func keyParts(it unstable.Iterator) []string {
	var parts []string
	for it.Next() {
		parts = append(parts, string(it.Node().Data))
	}
	return parts
}

// lineStart is the offset of the line holding off.
func lineStart(b []byte, off int) int { return bytes.LastIndexByte(b[:off], '\n') + 1 }

// lineEnd is the offset past the newline ending the line holding off,
// or the end of b.
func lineEnd(b []byte, off int) int {
	if i := bytes.IndexByte(b[off:], '\n'); i >= 0 {
		return off + i + 1
	}
	return len(b)
}

// lookup is the decoded value at path. A value on the way that is not a
// table is errShape.
func lookup(m map[string]any, path []string) (any, bool, error) {
	var cur any = m
	for _, k := range path {
		t, ok := cur.(map[string]any)
		if !ok {
			return nil, false, errShape
		}
		if cur, ok = t[k]; !ok {
			return nil, false, nil
		}
	}
	return cur, true, nil
}

// tomlValue decodes the text of one value.
func tomlValue(raw string) (any, error) {
	var m map[string]any
	if err := toml.Unmarshal([]byte("v = "+raw), &m); err != nil {
		return nil, err
	}
	return m["v"], nil
}

func sameTOML(raw string, v any) bool {
	w, err := tomlValue(raw)
	return err == nil && reflect.DeepEqual(w, v)
}

// errForm is a key the user set in a form the installer does not edit as
// text (an inline table, say).
var errForm = errors.New("set in a form the installer does not edit")

// get is the text of the value at path, when it is a string or a boolean
// set by a key = value line; found says whether path is set at all.
func (d *tomlDoc) get(path []string) (raw string, found bool, err error) {
	m, err := d.decode()
	if err != nil {
		return "", false, err
	}
	if _, found, err = lookup(m, path); err != nil || !found {
		return "", found, err
	}
	kvs, _, err := d.scan()
	if err != nil {
		return "", true, err
	}
	for _, kv := range kvs {
		if slices.Equal(kv.key, path) {
			if !kv.scalar {
				return "", true, errShape
			}
			return string(d.text[kv.valStart:kv.valEnd]), true, nil
		}
	}
	return "", true, errForm
}

// set makes path's value raw: in place when the key is there; else a new
// line at the end of its table (top-level keys after the last top-level
// one, so before the first table); else a new table at the end of the
// file, whose path goes to made.
func (d *tomlDoc) set(path []string, raw string, made *[][]string) error {
	before := d.text
	if err := d.setText(path, raw, made); err != nil {
		return err
	}
	// A key the user set some other way (an inline table) would make
	// the text invalid, or read as another value.
	m, err := d.decode()
	if err == nil {
		var v any
		var ok bool
		if v, ok, err = lookup(m, path); err == nil && (!ok || !sameTOML(raw, v)) {
			err = errForm
		}
	}
	if err != nil {
		d.text = before
		return errForm
	}
	return nil
}

func (d *tomlDoc) setText(path []string, raw string, made *[][]string) error {
	kvs, headers, err := d.scan()
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		if slices.Equal(kv.key, path) {
			if !kv.scalar {
				return errShape
			}
			d.splice(kv.valStart, kv.valEnd, raw)
			return nil
		}
	}
	line := tomlKey(path[len(path)-1]) + " = " + raw
	table := path[:len(path)-1]
	if at, ok := d.tableEnd(table, kvs, headers); ok {
		d.insertLine(at, line)
		return nil
	}
	sep := "\n"
	switch {
	case len(d.text) == 0:
		sep = ""
	case d.text[len(d.text)-1] != '\n':
		sep = "\n\n"
	}
	d.text = append(d.text, sep+"["+tomlDotted(table)+"]\n"+line+"\n"...)
	*made = append(*made, slices.Clone(table))
	return nil
}

// tableEnd is where a new key of table goes: after the table's last key
// = value, or its header; ok is false when table has no header (the top
// level always has a place).
func (d *tomlDoc) tableEnd(table []string, kvs []tomlKV, headers []tomlHeader) (int, bool) {
	first := len(d.text)
	if len(headers) > 0 {
		first = headers[0].start
	}
	if len(table) == 0 {
		at := 0
		for _, kv := range kvs {
			if kv.start < first {
				at = lineEnd(d.text, kv.end)
			}
		}
		return at, true
	}
	for i, h := range headers {
		if h.array || !slices.Equal(h.key, table) {
			continue
		}
		next := len(d.text)
		if i+1 < len(headers) {
			next = headers[i+1].start
		}
		at := h.end
		for _, kv := range kvs {
			if kv.start > h.start && kv.start < next {
				at = lineEnd(d.text, kv.end)
			}
		}
		return at, true
	}
	return 0, false
}

// insertLine puts line at offset at, the start of a line or the end of
// the text. At the end of a text without a final newline the line goes
// after a newline and gets none, so that removeLine gives back the same
// bytes.
func (d *tomlDoc) insertLine(at int, line string) {
	if at == len(d.text) && at > 0 && d.text[at-1] != '\n' {
		d.splice(at, at, "\n"+line)
		return
	}
	d.splice(at, at, line+"\n")
}

// del removes path's key = value line, if there.
func (d *tomlDoc) del(path []string) error {
	kvs, _, err := d.scan()
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		if slices.Equal(kv.key, path) {
			d.removeLines(lineStart(d.text, kv.start), lineEnd(d.text, kv.end))
			return nil
		}
	}
	return nil
}

// removeLines removes the lines [start, end); the last line of a text
// without a final newline goes with the newline before it.
func (d *tomlDoc) removeLines(start, end int) {
	if end == len(d.text) && (end == 0 || d.text[end-1] != '\n') && start > 0 {
		start--
	}
	d.splice(start, end, "")
}

// delEmptyTable removes table's header when nothing but blank lines
// follows it up to the next header, with the blank line before it.
func (d *tomlDoc) delEmptyTable(table []string) error {
	_, headers, err := d.scan()
	if err != nil {
		return err
	}
	for i, h := range headers {
		if h.array || !slices.Equal(h.key, table) {
			continue
		}
		next := len(d.text)
		if i+1 < len(headers) {
			next = headers[i+1].start
		}
		if len(bytes.TrimSpace(d.text[h.end:next])) > 0 {
			return nil
		}
		start := h.start
		// The blank line set's appending put before it.
		if start >= 1 && d.text[start-1] == '\n' && (start == 1 || d.text[start-2] == '\n') {
			start--
		}
		d.splice(start, h.end, "")
		return nil
	}
	return nil
}

func (d *tomlDoc) splice(start, end int, s string) {
	d.text = slices.Concat(d.text[:start], []byte(s), d.text[end:])
}

// empty says whether the document holds nothing but blank space.
func (d *tomlDoc) empty() bool { return len(bytes.TrimSpace(d.text)) == 0 }

// tomlKey is k as a TOML key: bare when it can be.
func tomlKey(k string) string {
	if k != "" && strings.Trim(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == "" {
		return k
	}
	return ruletext.TOMLString(k)
}

func tomlDotted(path []string) string {
	parts := make([]string, len(path))
	for i, k := range path {
		parts[i] = tomlKey(k)
	}
	return strings.Join(parts, ".")
}

func tomlBool(b bool) string { return strconv.FormatBool(b) }
