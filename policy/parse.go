package policy

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// Parse decodes one policy file's bytes on top of base: keys absent from the
// file keep base's values. name is used in error messages. Unknown keys,
// values of the wrong type and invalid values are reported as *Error with
// the file, line and key. Values coming from base are not validated.
func Parse(name string, data []byte, base Policy) (Policy, error) {
	p, _, err := ParseWithKeys(name, data, base)
	return p, err
}

// ParseWithKeys is Parse that also returns the set of keys the file sets
// (with their lines), as needed by Tighten.
func ParseWithKeys(name string, data []byte, base Policy) (Policy, KeySet, error) {
	return parseDoc(name, data, base, "")
}

// ParseTable parses the policy held in the top-level table named table
// of a larger document (the machine configuration's [policy]) on top of
// Default(). The document's other top-level keys are its caller's to
// check (see Decode). Errors name keys as the document spells them
// ("policy.limits.pids"); the KeySet holds the policy's own
// ("limits.pids"), as Tighten and UnderMachine take them.
func ParseTable(name string, data []byte, table string) (Policy, KeySet, error) {
	return parseDoc(name, data, Default(), table)
}

// parseDoc is ParseWithKeys of a document that is a policy (table "")
// or holds one in its top-level table named table.
func parseDoc(name string, data []byte, base Policy, table string) (Policy, KeySet, error) {
	f, err := decodeDoc(newSchema(), name, data, table)
	if err != nil {
		return Policy{}, KeySet{}, err
	}
	return f.apply(base), f.keys, nil
}

// schema is what parsing a policy file takes from Policy's type alone:
// the same for every file, so a Cache makes it once.
type schema struct {
	pt, mirror reflect.Type
	leaves     []leaf
	rules      map[string]validator
	// tagErr is checkTightenTags's answer about pt.
	tagErr error
}

// newSchema makes the schema of Policy.
func newSchema() *schema {
	s := ruleSchema()
	s.mirror = mirrorType(s.pt)
	return s
}

// ruleSchema is the schema of Policy without its mirror type: enough
// to validate, tighten and merge, not to parse.
func ruleSchema() *schema {
	pt := policyType()
	return &schema{pt: pt, leaves: leaves(pt), rules: validators(), tagErr: checkTightenTags(pt)}
}

// parsedFile is what a policy file sets, decoded and validated: a pure
// function of the file's name and bytes, applied on top of a base
// policy by apply. It is read only once made (a Cache shares it).
type parsedFile struct {
	// vals holds, at each index of set, the file's value (validated and
	// normalized); its other fields are zero.
	vals Policy
	set  [][]int
	keys KeySet
}

// apply returns base with the keys f sets taken from f; the result
// shares no slice with base or f.
func (f *parsedFile) apply(base Policy) Policy {
	out := base.clone()
	outV, valsV := reflect.ValueOf(&out).Elem(), reflect.ValueOf(&f.vals).Elem()
	for _, index := range f.set {
		outV.FieldByIndex(index).Set(cloneValue(valsV.FieldByIndex(index)))
	}
	return out
}

// decodeDoc decodes and validates a document that is a policy (table
// "") or holds one in its top-level table named table.
func decodeDoc(s *schema, name string, data []byte, table string) (*parsedFile, error) {
	root, mroot := s.pt, s.mirror
	if table != "" {
		root, mroot = embedded(data, table, root), embedded(data, table, mroot)
	}
	mirror := reflect.New(mroot)
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(mirror.Interface()); err != nil {
		return nil, decodeError(name, data, err, root)
	}
	idx := buildIndex(data)
	if e := checkKeyCase(name, idx, root); e != nil {
		return nil, e
	}
	src := mirror.Elem()
	if table != "" {
		src = src.Field(0)
	}
	f := &parsedFile{keys: KeySet{m: map[string]keyPos{}}}
	valsV := reflect.ValueOf(&f.vals).Elem()
	var errs []*Error
	for _, lf := range s.leaves {
		leafSrc := src.FieldByIndex(lf.index)
		if leafSrc.IsNil() {
			continue // absent from the file
		}
		full := lf.path
		if table != "" {
			full = joinKey([]string{table}) + "." + lf.path
		}
		pos := idx.lookup(full)
		f.keys.m[lf.path] = pos
		dst := valsV.FieldByIndex(lf.index)
		if msg := assignLeaf(dst, leafSrc.Elem()); msg != "" {
			errs = append(errs, &Error{File: name, Line: pos.line, Key: full, Msg: msg})
			continue
		}
		if elem, msg := validateLeaf(s.rules, lf.path, dst); msg != "" {
			errs = append(errs, &Error{File: name, Line: pos.elemLine(elem), Key: full, Msg: msg})
			continue
		}
		f.set = append(f.set, lf.index)
	}
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
		return nil, errs[0]
	}
	return f, nil
}

// embedded is the type of a document whose top-level table named table
// has type t and whose every other top-level key (those data sets) holds
// any value: the policy of a larger document, whose other keys its
// caller checks.
func embedded(data []byte, table string, t reflect.Type) reflect.Type {
	fields := []reflect.StructField{{Name: "Table", Type: t, Tag: reflect.StructTag("toml:" + strconv.Quote(table))}}
	seen := map[string]bool{table: true}
	idx := buildIndex(data)
	for _, k := range sortedKeys(idx) {
		top := idx[k].parts[0]
		if seen[top] {
			continue
		}
		seen[top] = true
		fields = append(fields, reflect.StructField{Name: "Other" + strconv.Itoa(len(fields)), Type: reflect.TypeFor[any](),
			Tag: reflect.StructTag("toml:" + strconv.Quote(top))})
	}
	return reflect.StructOf(fields)
}

// Decode decodes the TOML document data into v, a pointer to a struct
// whose fields name their keys with toml tags (maps of such structs and
// fields of type any included), as another sandboxd configuration file
// that speaks the policy's error form does (the machine configuration).
// Unknown keys and keys spelled in another case are refused; values are
// decoded as go-toml does, without the policy's validation. It returns
// the lines of every key the document sets, tables included. Errors are
// *Error naming name, the line and the key.
func Decode(name string, data []byte, v any) (KeySet, error) {
	root := reflect.TypeOf(v).Elem()
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return KeySet{}, decodeError(name, data, err, root)
	}
	idx := buildIndex(data)
	if e := checkKeyCase(name, idx, root); e != nil {
		return KeySet{}, e
	}
	return KeySet{m: idx}, nil
}

// checkKeyCase rejects keys that go-toml matched to the schema
// case-insensitively: keys are case-sensitive in TOML and in this format.
func checkKeyCase(name string, idx keyIndex, root reflect.Type) *Error {
	var first *Error
	for _, k := range sortedKeys(idx) {
		pos := idx[k]
		t := root
		for i, part := range pos.parts {
			if t.Kind() == reflect.Map {
				t = t.Elem() // part is the map's key: any spelling is one
				continue
			}
			if !isTable(t) {
				break
			}
			var next reflect.Type
			for j := 0; j < t.NumField(); j++ {
				if n, ok := tomlName(t.Field(j)); ok && n == part {
					next = t.Field(j).Type
					break
				}
			}
			if next == nil {
				msg := "unknown key"
				for _, n := range tableKeys(t) {
					if strings.EqualFold(n, part) {
						msg = fmt.Sprintf("unknown key (keys are case-sensitive; did you mean %q?)", n)
					}
				}
				if first == nil || pos.line < first.Line {
					first = &Error{File: name, Line: pos.line, Key: joinKey(pos.parts[:i+1]), Msg: msg}
				}
				break
			}
			t = next
		}
	}
	return first
}

// mirrorType builds, from a schema struct type, a struct type with the same
// keys whose leaves are pointers, so that the decoder itself records which
// keys are present. Leaves decoded from text (such as Size) become *any so
// that type errors on them are reported by us with a position. Skipped
// fields are kept as placeholders so that field indexes line up.
func mirrorType(t reflect.Type) reflect.Type {
	fields := make([]reflect.StructField, t.NumField())
	for i := range fields {
		f := t.Field(i)
		name, ok := tomlName(f)
		if !ok {
			fields[i] = reflect.StructField{
				Name: "Skipped_" + strconv.Itoa(i),
				Type: reflect.TypeFor[struct{}](),
				Tag:  `toml:"-"`,
			}
			continue
		}
		var ft reflect.Type
		switch {
		case isTable(f.Type):
			ft = mirrorType(f.Type)
		case isText(f.Type):
			ft = reflect.TypeFor[*any]()
		default:
			ft = reflect.PointerTo(f.Type)
		}
		fields[i] = reflect.StructField{
			Name: f.Name,
			Type: ft,
			Tag:  reflect.StructTag(`toml:` + strconv.Quote(name)),
		}
	}
	return reflect.StructOf(fields)
}

// assignLeaf stores the decoded value src into dst. It returns a message when
// the value has the wrong type or cannot be parsed.
func assignLeaf(dst, src reflect.Value) string {
	if !isText(dst.Type()) {
		dst.Set(src)
		return ""
	}
	tu := dst.Addr().Interface().(encoding.TextUnmarshaler)
	var err error
	switch v := src.Interface().(type) {
	case string:
		err = tu.UnmarshalText([]byte(v))
	case int64:
		if v < 0 {
			return fmt.Sprintf("must not be negative (got %d)", v)
		}
		err = tu.UnmarshalText([]byte(strconv.FormatInt(v, 10)))
	default:
		return fmt.Sprintf("expected %s, got a TOML %s", describeType(dst.Type()), tomlKind(v))
	}
	if err != nil {
		return sanitize(err.Error())
	}
	return ""
}

// tomlKind names the TOML type of a value decoded into an interface.
func tomlKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case int64:
		return "integer"
	case float64:
		return "float"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "table"
	case time.Time, toml.LocalDate, toml.LocalTime, toml.LocalDateTime:
		return "date-time"
	}
	return "value"
}

// mismatchRE matches go-toml's type mismatch messages.
func mismatchRE() *regexp.Regexp {
	return regexp.MustCompile(`^cannot decode TOML ([a-z-]+) into `)
}

// decodeError converts an error from go-toml into an *Error; root is
// the document's schema type.
func decodeError(name string, data []byte, err error, root reflect.Type) *Error {
	var sme *toml.StrictMissingError
	if errors.As(err, &sme) && len(sme.Errors) > 0 {
		e := &sme.Errors[0]
		line, _ := e.Position()
		parts := []string(e.Key())
		what := "key"
		if strings.Contains(e.Error(), "table") {
			what = "table"
		}
		msg := "unknown " + what
		if len(parts) > 0 {
			n, t := schemaLookup(root, parts[:len(parts)-1])
			if n == len(parts)-1 && t != nil && isTable(t) {
				where := "top-level keys"
				if n > 0 {
					where = "keys in [" + joinKey(parts[:n]) + "]"
				}
				msg += fmt.Sprintf(" (valid %s: %s)", where, strings.Join(tableKeys(t), ", "))
			}
		}
		return &Error{File: name, Line: line, Key: joinKey(parts), Msg: msg, cause: err}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		parts := []string(de.Key())
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if m := mismatchRE().FindStringSubmatch(msg); m != nil {
			if n, t := schemaLookup(root, parts); n > 0 && t != nil {
				parts = parts[:n]
				got := m[1]
				msg = fmt.Sprintf("expected %s, got a TOML %s", describeType(t), got)
				if t.Kind() == reflect.Slice && strings.HasSuffix(de.Error(), " of type "+t.Elem().String()) {
					msg = fmt.Sprintf("expected %s, got an array containing a TOML %s", describeType(t), got)
				}
			}
		}
		if strings.Contains(msg, "cannot store an array table") {
			msg = "expected a table, got an array of tables"
		}
		if len(parts) == 0 {
			msg = "syntax error: " + msg
		} else {
			parts = qualifyKey(data, line, parts)
		}
		return &Error{File: name, Line: line, Key: joinKey(parts), Msg: sanitize(msg), cause: err}
	}
	return &Error{File: name, Msg: sanitize(err.Error()), cause: err}
}

// qualifyKey returns the full key of an error key that go-toml reports
// relative to the current table (it does so for errors about a whole
// key-value expression, such as a duplicate key). data is the document and
// line the error's line; parts is returned unchanged when it is already
// complete or the document cannot be parsed.
func qualifyKey(data []byte, line int, parts []string) []string {
	full := parts
	walkExpressions(data, func(table []string, e *unstable.Node, lineOf func(unstable.Range) int) bool {
		if e.Kind != unstable.KeyValue {
			return true
		}
		it := e.Key()
		var rel []string
		first := 0
		for it.Next() {
			if first == 0 {
				first = lineOf(it.Node().Raw)
			}
			rel = append(rel, string(it.Node().Data))
		}
		if first < line {
			return true
		}
		if first == line && len(table) > 0 && slices.Equal(rel, parts) {
			full = append(append([]string(nil), table...), parts...)
		}
		return false
	})
	return full
}

// sanitize escapes non-printable characters so that messages derived from
// untrusted files cannot inject terminal control sequences.
func sanitize(s string) string {
	clean := true
	for _, r := range s {
		if !unicode.IsPrint(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsPrint(r) {
			b.WriteRune(r)
		} else {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}

// keyPos is where a key is set in a file: the line of the key and, for
// arrays, the line of each element.
type keyPos struct {
	line  int
	elems []int
	parts []string // the key's parts as written in the file
}

// elemLine returns the line of array element i, or the key's line when i is
// negative or unknown.
func (p keyPos) elemLine(i int) int {
	if i >= 0 && i < len(p.elems) && p.elems[i] > 0 {
		return p.elems[i]
	}
	return p.line
}

// keyIndex maps dotted keys (tables and key-values) to their position.
type keyIndex map[string]keyPos

// lookup returns the position of key, falling back to its closest indexed
// parent (e.g. the table header) when the key itself is not indexed.
func (x keyIndex) lookup(key string) keyPos {
	for k := key; ; {
		if p, ok := x[k]; ok {
			if k != key {
				return keyPos{line: p.line}
			}
			return p
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			return keyPos{}
		}
		k = k[:i]
	}
}

// buildIndex records the line of every key of a syntactically valid
// document, using go-toml's unstable parser.
func buildIndex(data []byte) keyIndex {
	lineOf := lineCounter(data)
	idx := keyIndex{}
	record := func(parts []string, pos keyPos) {
		k := joinKey(parts)
		if _, ok := idx[k]; !ok {
			pos.parts = append([]string(nil), parts...)
			idx[k] = pos
		}
	}
	var keyval func(prefix []string, kv *unstable.Node)
	keyval = func(prefix []string, kv *unstable.Node) {
		parts := append([]string(nil), prefix...)
		line := 0
		it := kv.Key()
		for it.Next() {
			n := it.Node()
			if line == 0 {
				line = lineOf(n.Raw)
			}
			parts = append(parts, string(n.Data))
			if !it.IsLast() {
				record(parts, keyPos{line: line})
			}
		}
		pos := keyPos{line: line}
		v := kv.Value()
		switch v.Kind {
		case unstable.Array:
			c := v.Children()
			for c.Next() {
				el := line
				if r := c.Node().Raw; r.Length > 0 {
					el = lineOf(r)
				}
				pos.elems = append(pos.elems, el)
			}
		case unstable.InlineTable:
			c := v.Children()
			for c.Next() {
				if c.Node().Kind == unstable.KeyValue {
					keyval(parts, c.Node())
				}
			}
		}
		record(parts, pos)
	}

	walkExpressions(data, func(table []string, e *unstable.Node, _ func(unstable.Range) int) bool {
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			it := e.Key()
			it.Next()
			record(table, keyPos{line: lineOf(it.Node().Raw)})
		case unstable.KeyValue:
			keyval(table, e)
		}
		return true
	})
	return idx
}

// lineCounter returns a function giving the 1-based line of a range of data.
func lineCounter(data []byte) func(unstable.Range) int {
	var nl []int
	for i, c := range data {
		if c == '\n' {
			nl = append(nl, i)
		}
	}
	return func(r unstable.Range) int { return sort.SearchInts(nl, int(r.Offset)) + 1 }
}

// walkExpressions calls fn for every top-level expression of data with the
// key of the table in effect (for a table header, the header's own key),
// until fn returns false or the document ends or fails to parse.
func walkExpressions(data []byte, fn func(table []string, e *unstable.Node, lineOf func(unstable.Range) int) bool) {
	lineOf := lineCounter(data)
	var p unstable.Parser
	p.Reset(data)
	var table []string
	for p.NextExpression() {
		e := p.Expression()
		if e.Kind == unstable.Table || e.Kind == unstable.ArrayTable {
			table = nil
			it := e.Key()
			for it.Next() {
				table = append(table, string(it.Node().Data))
			}
		}
		if !fn(table, e, lineOf) {
			return
		}
	}
}
