package agentinstall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// object is a JSON object kept as written: its members in the user's
// order, each value the user's own text (an unknown key, a string's
// escapes and a number's spelling come back as they were).
type object struct {
	members []member
}

type member struct {
	key   string
	value json.RawMessage
}

// errShape is a value of another type than the one the installer must
// edit there: it never guesses what the user meant.
var errShape = errors.New("not the type expected")

// parseObject reads one JSON object. Duplicate keys are refused: the
// agents keep the last, and editing either would mislead.
func parseObject(raw []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errShape
	}
	o := &object{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, ok := tok.(string)
		if !ok {
			return nil, errShape
		}
		if _, dup := o.get(k); dup {
			return nil, &duplicateError{k}
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o.members = append(o.members, member{k, compact(v)})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return o, nil
}

// duplicateError is a key an object of the file has twice.
type duplicateError struct{ key string }

func (e *duplicateError) Error() string { return fmt.Sprintf("duplicate key %q", e.key) }

// checkDuplicates finds a key twice in one object anywhere in b (valid
// JSON).
func checkDuplicates(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	// Each open object's keys; an array is a nil entry.
	var stack []map[string]bool
	expectKey := func() bool { return len(stack) > 0 && stack[len(stack)-1] != nil }
	var afterKey bool
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end (b is valid)
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, map[string]bool{})
			case '[':
				stack = append(stack, nil)
			default:
				stack = stack[:len(stack)-1]
			}
			afterKey = false
		case string:
			if expectKey() && !afterKey {
				if stack[len(stack)-1][t] {
					return &duplicateError{t}
				}
				stack[len(stack)-1][t] = true
				afterKey = true
				continue
			}
			afterKey = false
		default:
			afterKey = false
		}
	}
}

// parseArray reads one JSON array into its elements' texts.
func parseArray(raw []byte) ([]json.RawMessage, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '[' {
		return nil, errShape
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, err
	}
	for i := range elems {
		elems[i] = compact(elems[i])
	}
	return elems, nil
}

func (o *object) get(k string) (json.RawMessage, bool) {
	for _, m := range o.members {
		if m.key == k {
			return m.value, true
		}
	}
	return nil, false
}

// set replaces k's value where it is, or adds k at the end.
func (o *object) set(k string, v json.RawMessage) {
	for i := range o.members {
		if o.members[i].key == k {
			o.members[i].value = v
			return
		}
	}
	o.members = append(o.members, member{k, v})
}

func (o *object) del(k string) {
	o.members = slices.DeleteFunc(o.members, func(m member) bool { return m.key == k })
}

// marshal is o's compact text, each value as the user wrote it.
func (o *object) marshal() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o.members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonString(m.key))
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func marshalArray(elems []json.RawMessage) json.RawMessage {
	b := []byte{'['}
	for i, e := range elems {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return append(b, ']')
}

// jsonString is s as a JSON string, with <, > and & as they are (the
// agents' own files hold shell commands).
func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}

// jsonValue is v's compact text, HTML characters unescaped.
func jsonValue(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err) // only the installer's own values come here
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}

func compact(raw []byte) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return append(json.RawMessage(nil), raw...)
	}
	return b.Bytes()
}

// sameJSON says whether a and b are the same JSON value, whatever their
// spacing or key order.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// jsonDoc is one JSON file whose top level is an object.
type jsonDoc struct {
	root *object
}

// parseJSONDoc reads a file's text; an empty (or blank) file is an empty
// object, as both agents take it.
func parseJSONDoc(b []byte) (*jsonDoc, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return &jsonDoc{root: &object{}}, nil
	}
	if !json.Valid(b) {
		return nil, errors.New("not valid JSON")
	}
	if err := checkDuplicates(b); err != nil {
		return nil, err
	}
	o, err := parseObject(b)
	if err != nil {
		return nil, err
	}
	return &jsonDoc{root: o}, nil
}

// text is the file's new text: two-space indentation and a final newline,
// as the agents write their own.
func (d *jsonDoc) text() []byte {
	var b bytes.Buffer
	json.Indent(&b, d.root.marshal(), "", "  ")
	b.WriteByte('\n')
	return b.Bytes()
}

func (d *jsonDoc) empty() bool { return len(d.root.members) == 0 }

// objectAt is the object at path, nil when a key on the way is missing.
// A value on the way that is not an object is an error.
func (d *jsonDoc) objectAt(path []string) (*object, error) {
	o := d.root
	for _, k := range path {
		v, ok := o.get(k)
		if !ok {
			return nil, nil
		}
		next, err := parseObject(v)
		if err != nil {
			return nil, errShape
		}
		o = next
	}
	return o, nil
}

// get is the value at path.
func (d *jsonDoc) get(path []string) (json.RawMessage, bool, error) {
	o, err := d.objectAt(path[:len(path)-1])
	if err != nil || o == nil {
		return nil, false, err
	}
	v, ok := o.get(path[len(path)-1])
	return v, ok, nil
}

// put sets the value at path, making the objects on the way that are
// missing; made gets the path of each one it made.
func (d *jsonDoc) put(path []string, v json.RawMessage, made *[][]string) error {
	return putIn(d.root, path, v, nil, made)
}

func putIn(o *object, path []string, v json.RawMessage, at []string, made *[][]string) error {
	k := path[0]
	if len(path) == 1 {
		o.set(k, v)
		return nil
	}
	here := append(slices.Clone(at), k)
	child := &object{}
	if raw, ok := o.get(k); ok {
		c, err := parseObject(raw)
		if err != nil {
			return errShape
		}
		child = c
	} else if made != nil {
		*made = append(*made, here)
	}
	if err := putIn(child, path[1:], v, here, made); err != nil {
		return err
	}
	o.set(k, child.marshal())
	return nil
}

// remove deletes the member at path, if there.
func (d *jsonDoc) remove(path []string) error {
	return removeIn(d.root, path)
}

func removeIn(o *object, path []string) error {
	k := path[0]
	if len(path) == 1 {
		o.del(k)
		return nil
	}
	raw, ok := o.get(k)
	if !ok {
		return nil
	}
	child, err := parseObject(raw)
	if err != nil {
		return errShape
	}
	if err := removeIn(child, path[1:]); err != nil {
		return err
	}
	o.set(k, child.marshal())
	return nil
}

// array is the array at path (nil when absent).
func (d *jsonDoc) array(path []string) ([]json.RawMessage, error) {
	v, ok, err := d.get(path)
	if err != nil || !ok {
		return nil, err
	}
	a, err := parseArray(v)
	if err != nil {
		return nil, errShape
	}
	return a, nil
}

// isEmptyContainer says whether the value at path is {} or [].
func (d *jsonDoc) isEmptyContainer(path []string) bool {
	v, ok, err := d.get(path)
	if err != nil || !ok {
		return false
	}
	s := string(compact(v))
	return s == "{}" || s == "[]"
}
