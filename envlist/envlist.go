package envlist

import "strings"

// Key is the name of the entry kv: the text before its first '=', or
// the whole entry when it has none.
func Key(kv string) string {
	k, _, _ := strings.Cut(kv, "=")
	return k
}

// Lookup is the value of the last entry of env that sets key (KEY=...),
// and whether there is one.
func Lookup(env []string, key string) (string, bool) {
	// Not CutPrefix(env[i], key+"="): that builds the prefix once per
	// entry, and a plan looks up hundreds of names.
	for i := len(env) - 1; i >= 0; i-- {
		if e := env[i]; len(e) > len(key) && e[len(key)] == '=' && e[:len(key)] == key {
			return e[len(key)+1:], true
		}
	}
	return "", false
}

// Get is the value of the last entry of env that sets key, "" when none
// does.
func Get(env []string, key string) string {
	v, _ := Lookup(env, key)
	return v
}

// Set returns env without the entries that set key (KEY=...) and with
// KEY=val appended. A bare "KEY" entry, which sets nothing, stays.
//
// Like Drop and DropFunc, it returns a new list and leaves env as it
// was, and the result of a non-nil env is never nil (a nil exec.Cmd.Env
// would hand a child sandboxd's own environment).
func Set(env []string, key, val string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return append(out, key+"="+val)
}

// Drop returns env without the entries named key (see Key): KEY=...
// and a bare "KEY" alike.
func Drop(env []string, key string) []string {
	return DropFunc(env, func(k string) bool { return k == key })
}

// DropFunc returns env without the entries whose name (see Key) drop
// reports.
func DropFunc(env []string, drop func(key string) bool) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !drop(Key(kv)) {
			out = append(out, kv)
		}
	}
	return out
}
