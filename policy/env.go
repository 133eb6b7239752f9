package policy

import (
	"sort"

	"github.com/sandboxd/sandboxd/envlist"
)

// FilterEnv returns environ (KEY=VALUE strings) without the entries whose
// KEY matches a deny pattern, unless the KEY also matches an allow pattern.
// dropped lists the removed KEYs, sorted and without duplicates. A pattern is
// an exact name or contains '*' wildcards, each matching any run of
// characters (FOO_*, *_TOKEN, *SECRET*); it must match the whole name, and
// matching is case-sensitive. An entry without '=' is treated as a KEY with
// an empty value.
func FilterEnv(environ []string, allow, deny []string) (kept []string, dropped []string) {
	var gone orderedSet
	for _, kv := range environ {
		key := envlist.Key(kv)
		if matchAny(deny, key) && !matchAny(allow, key) {
			gone.add(key)
			continue
		}
		kept = append(kept, kv)
	}
	dropped = gone.list
	sort.Strings(dropped)
	return kept, dropped
}

// matchAny reports whether name matches one of patterns.
func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if MatchEnvPattern(p, name) {
			return true
		}
	}
	return false
}

// MatchEnvPattern reports whether the environment variable name matches
// pattern: '*' matches any run of characters (including none), every other
// character matches itself, and the whole name must match.
func MatchEnvPattern(pattern, name string) bool {
	// Greedy wildcard matching with backtracking to the last '*': linear
	// in practice, O(len(pattern)*len(name)) at worst.
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case p < len(pattern) && pattern[p] == name[n]:
			p++
			n++
		case star >= 0:
			p = star + 1
			mark++
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
