package policy

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// KeySet is the set of keys a policy file sets, with the line of each (see
// ParseWithKeys). It distinguishes an absent key from one set to an empty
// array. The zero KeySet is empty.
type KeySet struct {
	m map[string]keyPos
}

// Has reports whether the file sets the dotted key (e.g. "env.allow").
func (s KeySet) Has(key string) bool {
	_, ok := s.m[key]
	return ok
}

// Line returns the line where the file sets key, or 0.
func (s KeySet) Line(key string) int { return s.m[key].line }

// Keys returns the keys the file sets, sorted.
func (s KeySet) Keys() []string { return sortedKeys(s.m) }

// Tightening rules, as written in `tighten` struct tags.
const (
	ruleUnion     = "union"     // result = user ∪ workspace
	ruleSubset    = "subset"    // workspace list must be a subset of the user's; result = workspace list
	ruleMin       = "min"       // workspace value must be <= the user's; result = workspace value
	ruleProfile   = "profile"   // default < strict
	ruleIsolation = "isolation" // landlock-only < auto < namespaces
	ruleUser      = "user"      // only the user's policy may set it
	ruleScope     = "scope"     // run < connection
	ruleOff       = "off"       // a workspace may turn it off (true -> false), never on
)

// rank returns the strictness of value under an ordered rule.
func rank(rule, value string) (int, bool) {
	var order []string
	switch rule {
	case ruleProfile:
		order = []string{ProfileDefault, ProfileStrict}
	case ruleIsolation:
		order = []string{IsolationLandlockOnly, IsolationAuto, IsolationNamespaces}
	case ruleScope:
		order = []string{ScopeRun, ScopeConnection}
	}
	i := slices.Index(order, value)
	return i, i >= 0
}

// ruleFits reports whether a tighten rule applies to fields of type t.
func ruleFits(rule string, t reflect.Type) bool {
	switch rule {
	case ruleUser:
		switch t.Kind() {
		case reflect.String, reflect.Int64:
			return true
		}
		return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String
	case ruleUnion, ruleSubset:
		return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String
	case ruleMin:
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return true
		}
	case ruleProfile, ruleIsolation, ruleScope:
		return t.Kind() == reflect.String
	case ruleOff:
		return t.Kind() == reflect.Bool
	}
	return false
}

// checkTightenTags verifies that every leaf of struct type t carries a known
// `tighten` rule that suits its type. It fails closed: a new key without a
// rule is an error.
func checkTightenTags(t reflect.Type) error {
	for _, lf := range leaves(t) {
		rule, ok := lf.field.Tag.Lookup("tighten")
		if !ok {
			return fmt.Errorf("key %s has no tighten rule", lf.path)
		}
		if !ruleFits(rule, lf.field.Type) {
			return fmt.Errorf("key %s: tighten rule %q is unknown or does not suit type %s", lf.path, rule, lf.field.Type)
		}
	}
	return nil
}

// Tighten merges a workspace-local policy ws into user and returns the
// result. Only the keys in wsSet (the keys the workspace file sets, from
// ParseWithKeys) are considered. Each key is merged by the rule of its
// `tighten` tag; any key that would loosen the user policy makes Tighten
// return an *Error naming wsName, the line and the key. A schema key
// without a known rule is an error whether or not the workspace sets it.
func Tighten(user Policy, ws Policy, wsName string, wsSet KeySet) (Policy, error) {
	return tighten(ruleSchema(), user, ws, wsName, wsSet)
}

// tighten is Tighten with the schema s.
func tighten(s *schema, user Policy, ws Policy, wsName string, wsSet KeySet) (Policy, error) {
	out := user.clone()
	err := tightenInto(s, reflect.ValueOf(&out).Elem(), reflect.ValueOf(user), reflect.ValueOf(ws), wsName, wsSet)
	if err != nil {
		return Policy{}, err
	}
	return out, nil
}

// tightenInto implements Tighten: out starts as a copy of user and
// receives the merged values.
func tightenInto(s *schema, out, user, ws reflect.Value, wsName string, wsSet KeySet) error {
	if s.tagErr != nil {
		return &Error{File: wsName, Msg: "sandboxd cannot apply a workspace policy because of an internal error (run with -v to log why)", cause: s.tagErr}
	}
	for _, lf := range s.leaves {
		if !wsSet.Has(lf.path) {
			continue
		}
		rule := lf.field.Tag.Get("tighten")
		pos := wsSet.m[lf.path]
		if rule == ruleUser {
			return &Error{File: wsName, Line: pos.line, Key: lf.path,
				Msg: "only your own policy may set " + lf.path + " (" + userOnlyWhy(lf.path) + ")"}
		}
		u := user.FieldByIndex(lf.index)
		w := ws.FieldByIndex(lf.index)
		o := out.FieldByIndex(lf.index)
		if elem, msg := mergeRule(rule, lf.path, u, w, o, "user policy"); msg != "" {
			return &Error{File: wsName, Line: pos.elemLine(elem), Key: lf.path, Msg: "workspace policy may only tighten: " + msg}
		}
	}
	return nil
}

// mergeRule merges one key by its tighten rule (not ruleUser): u is the
// value being tightened (called whose in messages), w the tightening
// file's, and o receives the result. It returns "" when w tightens u,
// else why not and the offending array element (-1: the whole value).
func mergeRule(rule, path string, u, w, o reflect.Value, whose string) (int, string) {
	switch rule {
	case ruleUnion:
		var merged orderedSet
		for _, list := range []reflect.Value{u, w} {
			for i := 0; i < list.Len(); i++ {
				merged.add(list.Index(i).String())
			}
		}
		o.Set(reflect.ValueOf(merged.list).Convert(o.Type()))
	case ruleSubset:
		var have orderedSet
		for i := 0; i < u.Len(); i++ {
			have.add(u.Index(i).String())
		}
		for i := 0; i < w.Len(); i++ {
			if s := w.Index(i).String(); !have.has(s) {
				return i, fmt.Sprintf("adds %s %q", subsetNoun(path), s)
			}
		}
		o.Set(cloneValue(w))
	case ruleOff:
		if w.Bool() && !u.Bool() {
			return -1, fmt.Sprintf("turns %s on", path)
		}
		o.Set(w)
	case ruleMin:
		if w.Int() > u.Int() {
			return -1, fmt.Sprintf("raises %s from %v to %v", path, u.Interface(), w.Interface())
		}
		o.Set(w)
	case ruleProfile, ruleIsolation, ruleScope:
		ur, uok := rank(rule, u.String())
		wr, wok := rank(rule, w.String())
		switch {
		case !uok:
			return -1, fmt.Sprintf("%s has unknown %s %q", whose, path, u.String())
		case !wok:
			return -1, fmt.Sprintf("unknown %s %q", path, w.String())
		case wr < ur:
			return -1, fmt.Sprintf("loosens %s from %q to %q", path, u.String(), w.String())
		}
		o.Set(w)
	default:
		return -1, fmt.Sprintf("no tighten rule for %s", path)
	}
	return -1, ""
}

// userOnlyWhy says why a workspace may not set a user-only key.
func userOnlyWhy(path string) string {
	switch {
	case strings.HasPrefix(path, "review."):
		return "a workspace must not choose the reviewer, its endpoint or key, or trim what it is shown"
	case strings.HasPrefix(path, "network."):
		return "a workspace must not choose how names are resolved"
	case strings.HasPrefix(path, "transaction."):
		return "a workspace must not choose to write past the copy-on-write layer"
	case strings.HasPrefix(path, "audit."):
		return "a workspace has no say in what your audit log keeps"
	}
	return "a workspace could quiet what you want to see"
}

// subsetNoun names an entry of a subset-ruled list in error messages.
func subsetNoun(path string) string {
	switch path {
	case "filesystem.writable":
		return "writable root"
	case "filesystem.allow_secrets":
		return "allow_secrets entry (exposing a secret)"
	case "filesystem.home_allow":
		return "home_allow entry"
	case "env.allow":
		return "env allow entry"
	}
	return path + " entry"
}
