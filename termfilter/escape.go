package termfilter

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s as it may be shown on a terminal or written to a log
// when s came from somewhere sandboxd does not trust: a path, a host, a
// command line, a rationale, a reviewer's text. Printable text, the ASCII
// space and printable non-ASCII runes pass unchanged. Everything that
// could drive a terminal or mislead a reader is spelled out instead, so a
// person sees that it is there: \n, \r and \t for those three; \xNN for
// every other C0 control, for DEL and for each byte of invalid UTF-8;
// \uNNNN (or \UNNNNNNNN) for C1 controls, format characters (bidi
// overrides and isolates, zero-width characters, the byte order mark),
// the line and paragraph separators and any other rune that does not
// print. A backslash becomes \\, so two different strings never escape
// to the same text.
//
// Strings that need nothing escaped are returned as they are, without
// allocating.
func Escape(s string) string {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f || c == '\\' {
				return escapeFrom(s, i)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if !shown(r, n) {
			return escapeFrom(s, i)
		}
		i += n
	}
	return s
}

// escapeFrom escapes s, whose first i bytes need nothing done.
func escapeFrom(s string, i int) string {
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\\':
				b.WriteString(`\\`)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c < 0x20 || c == 0x7f:
				writeHex(&b, `\x`, uint32(c), 2)
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			// Not a rune: show the byte, so the escaping stays
			// reversible and a real U+FFFD stays distinct from it.
			writeHex(&b, `\x`, uint32(c), 2)
		case shown(r, n):
			b.WriteString(s[i : i+n])
		case r <= 0xffff:
			writeHex(&b, `\u`, uint32(r), 4)
		default:
			writeHex(&b, `\U`, uint32(r), 8)
		}
		i += n
	}
	return b.String()
}

// shown reports whether the non-ASCII rune r, n bytes long, may be
// written as it is. unicode.IsPrint already refuses every class named
// here; they are spelled out because they are the reason Escape exists,
// and a later Unicode version must not quietly let one through.
func shown(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n == 1: // invalid UTF-8
		return false
	case r >= 0x80 && r <= 0x9f: // C1 controls: 8-bit CSI, OSC, NEL...
		return false
	case r == '\u2028' || r == '\u2029': // line and paragraph separators
		return false
	case unicode.Is(unicode.Cf, r): // bidi controls, zero-width, BOM, tags
		return false
	}
	return unicode.IsPrint(r)
}

// writeHex writes prefix and v as exactly digits lowercase hex digits.
func writeHex(b *strings.Builder, prefix string, v uint32, digits int) {
	b.WriteString(prefix)
	h := strconv.FormatUint(uint64(v), 16)
	for range digits - len(h) {
		b.WriteByte('0')
	}
	b.WriteString(h)
}
