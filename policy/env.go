package policy

import (
	"net/url"
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
// credentials, the class a name-based deny list cannot see (DATABASE_URL,
// REDIS_URL, FTP_PROXY, RSYNC_PROXY, PIP_INDEX_URL, PGDSN,
// JAVA_TOOL_OPTIONS with a key store's password, a remote's URL kept in a
// variable):
//   - a password in a URL's user information (scheme://user:password@,
//     scheme://:password@ as Redis takes it, in any URL of the value, the
//     password running to the last '@' before a space as SQLAlchemy
//     reads it), or a token as an http(s) URL's only user (20 characters
//     or more, no '.' or '@', and not the first path segment: Azure
//     Repos puts the organisation there);
//   - user:password@ without a scheme, before a host[:port] or a
//     protocol's address as Go's MySQL driver takes it (tcp(host:3306));
//   - a password, key or authorization by keyword (password=, passwd=,
//     pwd=, accountkey=, sharedaccesskey=, authorization=, also with ':'
//     as in JSON or headers): libpq's conninfo, ODBC, JDBC, Azure's
//     connection strings, Spring's -D...password=, OTLP headers, also
//     percent-encoded once. A value of true, false, or the JDK's default
//     key store password "changeit" is no secret.
func CredentialValue(v string) bool {
	if keywordSecret(v) {
		return true
	}
	if strings.IndexByte(v, '%') >= 0 {
		if d, err := url.QueryUnescape(v); err == nil && keywordSecret(d) {
			return true
		}
	}
	for rest := v; ; {
		i := strings.Index(rest, "://")
		if i < 0 {
			break
		}
		if scheme, ok := schemeBefore(rest[:i]); ok && urlCredential(scheme, rest[i+3:]) {
			return true
		}
		rest = rest[i+3:]
	}
	return !strings.Contains(v, "://") && bareCredential(v)
}

// schemeBefore returns the URL scheme s ends with: a letter, then
// letters, digits, '+', '.' or '-'.
func schemeBefore(s string) (string, bool) {
	j := len(s)
	for j > 0 && (isAlnum(s[j-1]) || strings.IndexByte("+.-", s[j-1]) >= 0) {
		j--
	}
	for j < len(s) && !isLetter(s[j]) {
		j++
	}
	return strings.ToLower(s[j:]), j < len(s)
}

// urlCredential reports whether the URL after scheme:// (rest, which may
// run on into more text) names a password or a token as its user.
func urlCredential(scheme, rest string) bool {
	if i := strings.IndexAny(rest, " \t\n"); i >= 0 {
		rest = rest[:i]
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return false
	}
	if user, pass, ok := strings.Cut(rest[:at], ":"); ok {
		if strings.ContainsAny(user, "/?#") || pass == "" {
			return false
		}
		// host:port/path@... is a port, not a password.
		port, _, _ := strings.Cut(pass, "/")
		return !(strings.Contains(pass, "/") && port != "" && strings.Trim(port, "0123456789") == "")
	}
	user := rest[:at]
	if strings.ContainsAny(user, "/?#.@") || len(user) < 20 || !strings.Contains(scheme, "http") {
		return false
	}
	// Azure Repos: https://ORG@dev.azure.com/ORG/...
	_, path, _ := strings.Cut(rest[at+1:], "/")
	first, _, _ := strings.Cut(path, "/")
	return !strings.EqualFold(first, user)
}

// bareCredential reports whether v is user:password@ before a host
// without a scheme: user:password@host[:port][/...] (the proxy variables,
// rsync, ftp) or user:password@proto(address)... (Go's MySQL driver).
// The password runs to the last '@'. URIs without "//" (mailto:, sip:)
// and an image's name:tag@sha256:digest are not one.
func bareCredential(v string) bool {
	if strings.ContainsAny(v, " \t\n") {
		return false
	}
	user, rest, ok := strings.Cut(v, ":")
	at := strings.LastIndexByte(rest, '@')
	if !ok || at <= 0 || user == "" || strings.ContainsAny(user, "/@") {
		return false
	}
	switch strings.ToLower(user) {
	case "mailto", "sip", "sips", "xmpp", "tel", "news", "urn", "im", "pres":
		return false
	}
	host := rest[at+1:]
	if i := strings.IndexByte(host, '('); i > 0 && isWord(host[:i]) {
		return strings.Contains(host[i:], ")")
	}
	host, _, _ = strings.Cut(host, "/")
	name, port := host, ""
	if strings.HasPrefix(host, "[") {
		// An IPv6 address in brackets, then :port or nothing.
		end := strings.IndexByte(host, ']')
		if end < 2 || end+1 < len(host) && host[end+1] != ':' {
			return false
		}
		name, port = "", strings.TrimPrefix(host[end+1:], ":")
		if end+1 < len(host) && port == "" {
			return false
		}
	} else if h, p, ok := strings.Cut(host, ":"); ok {
		if p == "" {
			return false
		}
		name, port = h, p
	}
	if strings.Trim(port, "0123456789") != "" {
		return false
	}
	return strings.HasPrefix(host, "[") || name != "" && strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") == ""
}

// keywordSecret reports whether v gives a password, a key or an
// authorization by keyword: the keyword (case aside; quoted, as in JSON,
// or not), '=' or ':' (spaces around allowed), then a value.
func keywordSecret(v string) bool {
	lower := strings.ToLower(v)
	for _, k := range []string{"password", "passwd", "pwd", "accountkey", "sharedaccesskey", "authorization"} {
		for i := 0; ; {
			j := strings.Index(lower[i:], k)
			if j < 0 {
				break
			}
			j += i
			i = j + len(k)
			// pwd alone is also the working directory (cwd=, $PWD): it
			// counts only as a word of its own.
			if k == "pwd" && j > 0 && strings.IndexByte(" \t;&?,\"'{", lower[j-1]) < 0 {
				continue
			}
			if keywordValue(lower[i:]) {
				return true
			}
		}
	}
	return false
}

// keywordValue reports whether rest, after a keyword, is a separator and
// a value that may be a secret.
func keywordValue(rest string) bool {
	rest = strings.TrimLeft(rest, "\"' \t")
	if rest == "" || rest[0] != '=' && rest[0] != ':' {
		return false
	}
	rest = strings.TrimLeft(rest[1:], " \t")
	rest = strings.TrimLeft(rest, "\"'{")
	end := strings.IndexAny(rest, ";&, \t\"'}")
	if end < 0 {
		end = len(rest)
	}
	switch rest[:end] {
	case "", "true", "false", "changeit":
		return false
	}
	return true
}

func isWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isAlnum(s[i]) {
			return false
		}
	}
	return s != ""
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool  { return isLetter(c) || c >= '0' && c <= '9' }

// envValue is the value of a KEY=VALUE entry ("" without '=').
func envValue(kv string) string {
	_, v, _ := strings.Cut(kv, "=")
	return v
}
