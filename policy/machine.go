package policy

import (
	"reflect"
)

// Machine is the machine's policy: the one an operator sets in the
// daemon's machine configuration (package machine reads it), which
// every caller's own policy and workspace policies may only tighten.
type Machine struct {
	// Policy is the machine policy, on top of Default().
	Policy Policy
	// Set holds the keys the operator's file sets: only those bind a
	// caller (a key the operator leaves alone is the caller's to set).
	Set KeySet
	// File names the operator's file in the caller's errors.
	File string
}

// UnderMachine merges a caller's own policy (user, parsed from userName
// on Default(), setting the keys userSet holds) under the machine
// policy m and returns the result, which workspace policies then
// tighten.
//
// A key the machine does not set is the caller's, as without a machine
// policy. A key it sets binds: the caller's value must tighten it by
// the key's `tighten` rule, exactly as a workspace's must tighten the
// caller's (a union list gains the caller's entries; a subset list, a
// limit, the profile, the isolation, the grant scope and an on/off key
// may only be narrowed, lowered, made stricter or turned off). A key
// only a caller's own policy may set (rule "user") that the machine
// sets may not be changed at all. A loosening is never clamped: it is
// an *Error naming userName, the line and the key, so the caller
// learns which of their settings the machine refuses instead of
// running under rules other than those their file says.
func UnderMachine(m Machine, user Policy, userName string, userSet KeySet) (Policy, error) {
	return mergeUnderMachine(ruleSchema(), m, user, userName, userSet)
}

// mergeUnderMachine is UnderMachine with the schema s.
func mergeUnderMachine(s *schema, m Machine, user Policy, userName string, userSet KeySet) (Policy, error) {
	if s.tagErr != nil {
		return Policy{}, &Error{File: m.File, Msg: "sandboxd cannot apply the machine's policy because of an internal error (run with -v to log why)", cause: s.tagErr}
	}
	out := user.clone()
	o, mv, uv := reflect.ValueOf(&out).Elem(), reflect.ValueOf(m.Policy), reflect.ValueOf(user)
	for _, lf := range s.leaves {
		if !m.Set.Has(lf.path) {
			continue
		}
		mf, uf, of := mv.FieldByIndex(lf.index), uv.FieldByIndex(lf.index), o.FieldByIndex(lf.index)
		if !userSet.Has(lf.path) {
			of.Set(cloneValue(mf))
			continue
		}
		pos := userSet.m[lf.path]
		rule := lf.field.Tag.Get("tighten")
		if rule == ruleUser {
			if !reflect.DeepEqual(mf.Interface(), uf.Interface()) {
				return Policy{}, &Error{File: userName, Line: pos.line, Key: lf.path,
					Msg: "the machine's policy (" + m.File + ") sets " + lf.path + ", and only its operator may change it"}
			}
			continue
		}
		if elem, msg := mergeRule(rule, lf.path, mf, uf, of, "the machine's policy"); msg != "" {
			return Policy{}, &Error{File: userName, Line: pos.elemLine(elem), Key: lf.path,
				Msg: "the machine's policy (" + m.File + ") may only be tightened: " + msg}
		}
	}
	return out, nil
}
