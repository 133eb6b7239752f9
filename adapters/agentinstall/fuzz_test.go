package agentinstall

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/rogpeppe/go-internal/txtar"
)

// seedFiles adds the user files of the golden cases whose name ends
// with suffix.
func seedFiles(f *testing.F, suffix string) {
	cases, _ := filepath.Glob("testdata/merge/*.txtar")
	for _, c := range cases {
		ar, err := txtar.ParseFile(c)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range ar.Files {
			if filepath.Ext(file.Name) == suffix {
				f.Add(file.Data)
			}
		}
	}
}

// editInMemory parses b as an agent file, installs pieces, then reverts
// what install recorded: the texts after each, or the error that
// stopped install.
func editInMemory(b []byte, name string, pieces []piece) (installed, reverted []byte, err error) {
	f := &agentFile{path: name, target: name, shown: name, exists: true, orig: b}
	if err := f.parse(formatOf(name)); err != nil {
		return nil, nil, err
	}
	ed := newEditor(f, nil)
	entries, err := ed.install(pieces)
	if err != nil {
		return nil, nil, err
	}
	installed = bytes.Clone(f.doc.bytes())
	fr := fileRecord{Path: name, Before: f.before(), Made: ed.made, Entries: entries}
	fr.NoFinalNewline = formatOf(name) == formatTOML && len(b) > 0 && b[len(b)-1] != '\n'
	g := &agentFile{path: name, target: name, shown: name, exists: true, orig: installed}
	if err := g.parse(formatOf(name)); err != nil {
		return installed, nil, err
	}
	un := newEditor(g, nil)
	for i := len(entries) - 1; i >= 0; i-- {
		if err := un.revert(entries[i], false); err != nil {
			return installed, nil, err
		}
	}
	if err := un.removeMade(fr.Made); err != nil {
		return installed, nil, err
	}
	return installed, finishUninstall(g, fr), nil
}

// FuzzJSONEdit: on any settings file, install either refuses or leaves
// a JSON object holding every value of the user's; uninstall then gives
// back the same values.
func FuzzJSONEdit(f *testing.F) {
	seedFiles(f, ".json")
	f.Add([]byte(`{"env":{"A":"\u00e9"},"hooks":{"PreToolUse":[{"matcher":"Bash"}]},"permissions":{"deny":[]}}`))
	f.Add([]byte(`{"a":{"a":{"a":[]}},"a ":1}`))
	e := testEnv("/r")
	pieces, err := claudePieces(e)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		installed, reverted, err := editInMemory(b, "/r/settings.json", pieces)
		if err != nil {
			if installed != nil {
				t.Fatalf("install succeeded, uninstall failed: %v\n%s", err, installed)
			}
			return
		}
		var before, after, back map[string]any
		json.Unmarshal(b, &before) // a blank file is no object: nil
		if err := json.Unmarshal(installed, &after); err != nil {
			t.Fatalf("install wrote what is not a JSON object: %v\n%s", err, installed)
		}
		if !containsJSON(after, before) {
			t.Fatalf("install lost a value of the user's:\n%s\n->\n%s", b, installed)
		}
		if len(reverted) > 0 {
			json.Unmarshal(reverted, &back)
		}
		if len(before) == 0 && len(back) == 0 {
			return
		}
		if !reflect.DeepEqual(back, before) {
			t.Fatalf("uninstall did not give back the user's values:\n%s\n->\n%s\n->\n%s", b, installed, reverted)
		}
	})
}

// containsJSON: every key of want is in got, with the same value, but
// that an array may have gained elements at its end.
func containsJSON(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !containsJSON(g[k], v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		return ok && len(g) >= len(w) && reflect.DeepEqual(g[:len(w)], w)
	}
	return reflect.DeepEqual(got, want)
}

// FuzzTOMLEdit: on any config.toml, install either refuses or leaves a
// TOML document that reads as the user's with only install's keys
// changed; uninstall then gives back the same bytes.
func FuzzTOMLEdit(f *testing.F) {
	seedFiles(f, ".toml")
	f.Add([]byte("a = 1\n[hooks]\nstate = {}\n"))
	f.Add([]byte("[hooks.state]\n\"/r/hooks.json:pre_tool_use:0:0\" = { trusted_hash = \"x\" }\n"))
	f.Add([]byte("sandbox_mode = \"\"\"x\"\"\"\n[[hooks.state]]\n"))
	f.Add([]byte("x = [\n1,\n2]\r\n[a] # c\nb.c = 'd'"))
	e := testEnv("/r")
	pieces := codexConfigPieces(e, []int{0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		installed, reverted, err := editInMemory(b, "/r/config.toml", pieces)
		if err != nil {
			if installed != nil {
				t.Fatalf("install succeeded, uninstall failed: %v\n%s", err, installed)
			}
			return
		}
		var before, after map[string]any
		if toml.Unmarshal(b, &before) != nil {
			t.Fatalf("install accepted what does not parse:\n%q", b)
		}
		if err := toml.Unmarshal(installed, &after); err != nil {
			t.Fatalf("install wrote what does not parse: %v\n%q\n->\n%q", err, b, installed)
		}
		for _, p := range pieces {
			v, ok, _ := lookup(after, p.path)
			if !ok || !sameTOML(p.value, v) {
				t.Fatalf("%v is not %s after install:\n%q", p.path, p.value, installed)
			}
			setPath(before, p.path, v)
		}
		if !reflect.DeepEqual(after, before) {
			t.Fatalf("install changed more than its keys:\n%q\n->\n%q", b, installed)
		}
		if !bytes.Equal(reverted, b) {
			t.Fatalf("uninstall did not give back the same bytes:\n%q\n->\n%q\n->\n%q", b, installed, reverted)
		}
	})
}

// setPath sets the value at path in m, making tables on the way.
func setPath(m map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}
