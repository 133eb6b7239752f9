package policy

import (
	"encoding"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// leaf is one key of the policy schema that holds a value (as opposed to a
// table).
type leaf struct {
	path  string // dotted TOML key, e.g. "limits.pids"
	index []int  // field index path, usable with FieldByIndex on Policy
	field reflect.StructField
}

// policyType returns the reflect.Type of Policy.
func policyType() reflect.Type { return reflect.TypeFor[Policy]() }

// isText reports whether t decodes from text (implements
// encoding.TextUnmarshaler through a pointer).
func isText(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(reflect.TypeFor[encoding.TextUnmarshaler]())
}

// isTable reports whether t is a nested table of the schema.
func isTable(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && !isText(t)
}

// tomlName returns the key name of a struct field and whether the field takes
// part in decoding at all.
func tomlName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if name == "-" {
		return "", false
	}
	if name == "" {
		name = f.Name
	}
	return name, true
}

// leaves lists the value-holding keys of struct type t, depth first in field
// order.
func leaves(t reflect.Type) []leaf {
	var out []leaf
	var walk func(t reflect.Type, prefix []string, index []int)
	walk = func(t reflect.Type, prefix []string, index []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, ok := tomlName(f)
			if !ok {
				continue
			}
			path := append(append([]string(nil), prefix...), name)
			idx := append(append([]int(nil), index...), i)
			if isTable(f.Type) {
				walk(f.Type, path, idx)
				continue
			}
			out = append(out, leaf{path: joinKey(path), index: idx, field: f})
		}
	}
	walk(t, nil, nil)
	return out
}

// schemaLookup follows key parts through struct type t. It returns the
// number of parts consumed and the type reached. It stops at the first leaf,
// so for ["profile", "x"] it returns 1 and string.
func schemaLookup(t reflect.Type, parts []string) (int, reflect.Type) {
	for n, p := range parts {
		if t.Kind() == reflect.Map {
			t = t.Elem() // p is the map's key
			continue
		}
		if !isTable(t) {
			return n, t
		}
		found := false
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if name, ok := tomlName(f); ok && name == p {
				t = f.Type
				found = true
				break
			}
		}
		if !found {
			return n, nil
		}
	}
	return len(parts), t
}

// tableKeys lists the key names of table type t, in field order.
func tableKeys(t reflect.Type) []string {
	var names []string
	for i := 0; i < t.NumField(); i++ {
		if name, ok := tomlName(t.Field(i)); ok {
			names = append(names, name)
		}
	}
	return names
}

// isBareKey reports whether s can be written as a TOML bare key.
func isBareKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// joinKey renders key parts as a dotted TOML key, quoting the parts that are
// not bare keys (which also escapes control characters from untrusted
// files).
func joinKey(parts []string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('.')
		}
		if isBareKey(p) {
			b.WriteString(p)
		} else {
			b.WriteString(strconv.Quote(p))
		}
	}
	return b.String()
}

// describeType says in words what a policy file must contain for type t.
func describeType(t reflect.Type) string {
	if t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem() // an optional value (another file's schema)
	}
	switch {
	case t == nil:
		return "a value"
	case isText(t):
		if t == reflect.TypeFor[Size]() {
			return `a size string such as "8GiB"`
		}
		return "a string"
	case isTable(t):
		return "a table"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		switch t.Elem().Kind() {
		case reflect.String:
			return "an array of strings"
		case reflect.Int, reflect.Int32, reflect.Int64:
			return "an array of integers"
		}
		return "an array"
	}
	return t.String()
}

// cloneValue returns a deep copy of v as far as slices and structs go (the
// only containers the policy types use).
func cloneValue(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Struct:
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for i := 0; i < v.NumField(); i++ {
			if out.Field(i).CanSet() {
				out.Field(i).Set(cloneValue(v.Field(i)))
			}
		}
		return out
	case reflect.Slice:
		if v.IsNil() {
			return reflect.Zero(v.Type())
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := 0; i < v.Len(); i++ {
			out.Index(i).Set(cloneValue(v.Index(i)))
		}
		return out
	}
	return v
}

// clone returns a deep copy of p, so that the result shares no slice with p.
func (p Policy) clone() Policy {
	return cloneValue(reflect.ValueOf(p)).Interface().(Policy)
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
