package ruletext

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrTrailingEscape is a line or pattern that ends in a lone backslash.
var ErrTrailingEscape = errors.New("a backslash at the end escapes nothing")

// Fields splits a rule line at its unescaped white space (what
// unicode.IsSpace calls space). Each field keeps its backslashes: the
// pattern language reads them again. A line without backslashes splits
// exactly as strings.Fields splits it.
func Fields(s string) ([]string, error) {
	var out []string
	start := -1
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\\':
			if i+n >= len(s) {
				return nil, ErrTrailingEscape
			}
			if start < 0 {
				start = i
			}
			_, m := utf8.DecodeRuneInString(s[i+n:])
			i += n + m
			continue
		case unicode.IsSpace(r):
			if start >= 0 {
				out = append(out, s[start:i])
				start = -1
			}
		case start < 0:
			start = i
		}
		i += n
	}
	if start >= 0 {
		out = append(out, s[start:])
	}
	return out, nil
}

// special reports whether a pattern must escape r to mean r itself: the
// wildcards, the escape, and white space (which would end the field).
func special(r rune) bool {
	switch r {
	case '*', '?', '[', ']', '\\':
		return true
	}
	return unicode.IsSpace(r)
}

// Escape spells name as a pattern that matches name and nothing else:
// every wildcard, backslash and space in it is escaped. Bytes that are
// not valid UTF-8 pass unchanged (they are neither wildcards nor space).
func Escape(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRuneInString(name[i:])
		if special(r) {
			b.WriteByte('\\')
		}
		b.WriteString(name[i : i+n])
		i += n
	}
	return b.String()
}

// ExpandHome expands a leading "~" (alone or before "/") to home, escaped,
// so that the wildcards or spaces a home directory's name may hold are
// that name and never a wildcard.
func ExpandHome(pattern, home string) (string, error) {
	if pattern != "~" && !strings.HasPrefix(pattern, "~/") {
		return pattern, nil
	}
	if home == "" {
		return "", errors.New("no home to expand ~")
	}
	return Escape(home) + pattern[1:], nil
}

// Check reports what is wrong with an absolute path pattern: each
// element but "**" must be a valid path.Match pattern on its own, since
// each is matched on its own ("a\/b" would split into "a\" and "b").
func Check(pattern string) error {
	if !strings.HasPrefix(pattern, "/") {
		return errors.New("a filesystem pattern must be absolute or start with ~/")
	}
	if strings.IndexByte(pattern, 0) >= 0 {
		return errors.New("a filesystem pattern must not contain a NUL byte")
	}
	for _, e := range elements(pattern) {
		if e == "**" {
			continue
		}
		if _, err := path.Match(e, ""); err != nil {
			return fmt.Errorf("bad pattern element %q: %w", e, err)
		}
	}
	return nil
}

// elements splits a pattern or a path into its elements, as Match does.
func elements(p string) []string {
	return strings.Split(strings.Trim(p, "/"), "/")
}

// Match matches an absolute path against a pattern where "*" and "?"
// stay within one element, "**" (a whole element) spans any number of
// elements (including none) and "\x" is x. A malformed element matches
// nothing.
func Match(pattern, name string) bool {
	if name == "" {
		return false
	}
	return matchParts(elements(pattern), elements(name))
}

func matchParts(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchParts(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], name[0]); err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// Literal returns the one clean absolute path pattern matches, when it
// has no wildcard: its escapes undone, its slashes as Match reads them
// ("/a/b/" names "/a/b"). ok is false for a pattern with a wildcard, a
// malformed one, and one no clean path can match (an empty, "." or ".."
// element).
func Literal(pattern string) (string, bool) {
	if !strings.HasPrefix(pattern, "/") || Check(pattern) != nil {
		return "", false
	}
	if strings.Trim(pattern, "/") == "" {
		return "/", true
	}
	var b strings.Builder
	for _, e := range elements(pattern) {
		lit, ok := unescape(e)
		if !ok || lit == "" || lit == "." || lit == ".." {
			return "", false
		}
		b.WriteByte('/')
		b.WriteString(lit)
	}
	return b.String(), true
}

// unescape undoes an element's escapes; ok is false when it has a
// wildcard or a lone trailing backslash.
func unescape(e string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(e); i++ {
		switch c := e[i]; c {
		case '*', '?', '[':
			return "", false
		case '\\':
			if i+1 == len(e) {
				return "", false
			}
			i++
			b.WriteByte(e[i])
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// TOMLString writes s as a TOML basic string, escaping the quote, the
// backslash and every rune that does not print (controls, format
// characters such as bidi overrides, separators, unassigned runes). s
// must be valid UTF-8: an invalid byte would come out as U+FFFD. A
// suggested rule and an agent's config.toml are written with it.
func TOMLString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		default:
			switch {
			case unicode.IsPrint(r):
				b.WriteRune(r)
			case r <= 0xffff:
				fmt.Fprintf(&b, `\u%04X`, r)
			default:
				fmt.Fprintf(&b, `\U%08X`, r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
