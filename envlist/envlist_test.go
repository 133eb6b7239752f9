package envlist

import (
	"slices"
	"strings"
	"testing"
)

func TestKey(t *testing.T) {
	for kv, want := range map[string]string{"A=1": "A", "A==1": "A", "A=": "A", "A": "A", "=x": "", "": ""} {
		if got := Key(kv); got != want {
			t.Errorf("Key(%q) = %q, want %q", kv, got, want)
		}
	}
}

func TestLookup(t *testing.T) {
	env := []string{"A=1", "B", "A=2", "AB=3", "C=", "D=x=y"}
	for _, tc := range []struct {
		key, want string
		ok        bool
	}{
		{"A", "2", true}, // the last entry wins
		{"B", "", false}, // a bare name sets nothing
		{"AB", "3", true},
		{"C", "", true},
		{"D", "x=y", true},
		{"E", "", false},
	} {
		v, ok := Lookup(env, tc.key)
		if v != tc.want || ok != tc.ok {
			t.Errorf("Lookup(%q) = %q, %v, want %q, %v", tc.key, v, ok, tc.want, tc.ok)
		}
		if g := Get(env, tc.key); g != tc.want {
			t.Errorf("Get(%q) = %q, want %q", tc.key, g, tc.want)
		}
	}
	if _, ok := Lookup(nil, "A"); ok {
		t.Error("Lookup found a key in nil")
	}
}

func TestSetAndDrop(t *testing.T) {
	env := []string{"A=1", "A", "AB=2", "B=3", "A=4"}
	orig := slices.Clone(env)
	for _, tc := range []struct {
		name string
		got  []string
		want string
	}{
		{"set replaces every A=, keeps bare A", Set(env, "A", "9"), "A AB=2 B=3 A=9"},
		{"set appends a new key", Set(env, "C", ""), "A=1 A AB=2 B=3 A=4 C="},
		{"drop removes A= and bare A", Drop(env, "A"), "AB=2 B=3"},
		{"drop of an unset key", Drop(env, "Z"), "A=1 A AB=2 B=3 A=4"},
		{"drop by name", DropFunc(env, func(k string) bool { return strings.HasPrefix(k, "A") }), "B=3"},
	} {
		if got := strings.Join(tc.got, " "); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	if !slices.Equal(env, orig) {
		t.Errorf("env changed: %q", env)
	}
}

// TestNeverNil: a non-nil list stays non-nil when every entry goes (a
// nil exec.Cmd.Env inherits sandboxd's own environment), and nil stays
// nil.
func TestNeverNil(t *testing.T) {
	if got := Drop([]string{"A=1"}, "A"); got == nil {
		t.Error("Drop of the only entry returned nil")
	}
	if got := DropFunc([]string{}, func(string) bool { return true }); got == nil {
		t.Error("DropFunc of an empty list returned nil")
	}
	if got := Drop(nil, "A"); got != nil {
		t.Errorf("Drop(nil) = %q", got)
	}
}
