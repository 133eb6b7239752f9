package policy

import (
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/envlist"
)

// FilterEnv returns environ (KEY=VALUE strings) without the entries whose
// KEY matches a deny pattern or whose VALUE carries credentials in a URL
// (CredentialValue), whatever its name, unless the KEY also matches an
// allow pattern. dropped lists the removed KEYs, sorted and without
// duplicates. A pattern is
// an exact name or contains '*' wildcards, each matching any run of
// characters (FOO_*, *_TOKEN, *SECRET*); it must match the whole name, and
// matching is case-sensitive. An entry without '=' is treated as a KEY with
// an empty value.
func FilterEnv(environ []string, allow, deny []string) (kept []string, dropped []string) {
	var gone orderedSet
	for _, kv := range environ {
		key := envlist.Key(kv)
		if (matchAny(deny, key) || CredentialValue(envValue(kv))) && !matchAny(allow, key) {
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

// CredentialValue reports whether an environment variable's value carries
// credentials in a URL's user information, the class a name-based deny
// list cannot see (DATABASE_URL, REDIS_URL, FTP_PROXY, RSYNC_PROXY,
// PIP_INDEX_URL, a remote's URL kept in a variable): a password after a
// user (scheme://user:password@host, also scheme://:password@host as
// Redis takes it, in any URL of the value, and user:password@host[:port]
// without a scheme as the whole value, as the proxy variables, rsync and
// ftp take it), or a user alone as long as a token (https://TOKEN@host:
// 20 characters or more, where user names are short); or a connection
// string's password by keyword (password=, passwd= or pwd= with a value:
// libpq's conninfo, ODBC, a JDBC URL's query).
func CredentialValue(v string) bool {
	if keywordPassword(v) {
		return true
	}
	for rest := v; ; {
		i := strings.Index(rest, "://")
		if i < 0 {
			break
		}
		if schemeEnds(rest[:i]) && userinfoCredential(authority(rest[i+3:]), 20) {
			return true
		}
		rest = rest[i+3:]
	}
	at := strings.LastIndexByte(v, '@')
	if at < 0 || strings.ContainsAny(v, " \t\n") || strings.Contains(v, "://") {
		return false
	}
	host := strings.TrimSuffix(v[at+1:], "/")
	if h, port, ok := strings.Cut(host, ":"); ok {
		if port == "" || strings.Trim(port, "0123456789") != "" {
			return false
		}
		host = h
	}
	if host == "" || strings.Trim(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != "" {
		return false
	}
	return !strings.ContainsAny(v[:at], "/@") && userinfoCredential(v[:at]+"@", 0)
}

// schemeEnds reports whether s ends with a URL scheme: a letter, then
// letters, digits, '+', '.' or '-'.
func schemeEnds(s string) bool {
	j := len(s)
	for j > 0 && (isAlnum(s[j-1]) || strings.IndexByte("+.-", s[j-1]) >= 0) {
		j--
	}
	return j < len(s) && isLetter(s[j])
}

// authority is the start of s, after a scheme's "://", up to its path,
// query, fragment or the next space.
func authority(s string) string {
	if i := strings.IndexAny(s, "/?# \t\n"); i >= 0 {
		return s[:i]
	}
	return s
}

// userinfoCredential reports whether the authority a (host after the
// last '@') holds a password, or a user of at least tokenLen characters
// (0: users alone never count).
func userinfoCredential(a string, tokenLen int) bool {
	at := strings.LastIndexByte(a, '@')
	if at < 0 {
		return false
	}
	user, pass, hasPass := strings.Cut(a[:at], ":")
	if hasPass {
		return pass != ""
	}
	return tokenLen > 0 && len(user) >= tokenLen
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool  { return isLetter(c) || c >= '0' && c <= '9' }

// envValue is the value of a KEY=VALUE entry ("" without '=').
func envValue(kv string) string {
	_, v, _ := strings.Cut(kv, "=")
	return v
}

// keywordPassword reports whether v names a non-empty password by
// keyword: password, passwd or pwd, at the start or after a space, ';',
// '&', '?' or ',', then '=' (spaces around it allowed) and a value.
func keywordPassword(v string) bool {
	lower := strings.ToLower(v)
	for _, k := range []string{"password", "passwd", "pwd"} {
		for i := 0; ; {
			j := strings.Index(lower[i:], k)
			if j < 0 {
				break
			}
			j += i
			i = j + len(k)
			if j > 0 && strings.IndexByte(" \t;&?,", lower[j-1]) < 0 {
				continue
			}
			rest := strings.TrimLeft(lower[i:], " \t")
			if !strings.HasPrefix(rest, "=") {
				continue
			}
			rest = strings.TrimLeft(rest[1:], " \t")
			if rest != "" && strings.IndexByte(";&, \t", rest[0]) < 0 {
				return true
			}
		}
	}
	return false
}
