package gitconfig

import (
	"bytes"
	"fmt"
)

// MaxSize is the largest input Parse accepts, in bytes.
const MaxSize = 4 << 20

// Entry is one "name = value" line of a config file.
//
// Git's flat name for the entry is Section, then "."+Subsection when
// Subsection is not empty, then "."+Key. Parse rejects headers whose
// subsection is empty (`[a ""]`, `[a.]`), so an empty Subsection always
// means the entry has none.
type Entry struct {
	// Section is the section name, lower-cased as git compares it
	// case-insensitively. It is never empty and holds ASCII letters, digits
	// and '-'.
	Section string
	// Subsection is the subsection, case-sensitive, with `\"` and `\\`
	// escapes resolved (`[section "sub"]`). For the legacy form
	// `[section.sub]` it is lower-cased, as git does.
	Subsection string
	// Key is the variable name, lower-cased: an ASCII letter followed by
	// letters, digits and '-'.
	Key string
	// Value is the value after git's unquoting and escape processing.
	// It is empty when NoValue is set.
	Value string
	// NoValue is set for a key written without "=", which git reads as
	// boolean true. ("key =" gives an empty Value instead.)
	NoValue bool
	// Line is the 1-based line on which the key starts.
	Line int
}

// SyntaxError is a config file git would refuse to read, or one this package
// refuses to read although git accepts it (see Parse).
type SyntaxError struct {
	// Line is the 1-based line of the error; for errors git also reports it
	// is the line number git reports ("bad config line N").
	Line int
	// Msg describes the problem.
	Msg string

	// stricter is set when git accepts the input and the error comes from
	// this package's stricter rules.
	stricter bool
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// Parse parses data in git's config file syntax (git help config,
// "CONFIGURATION FILE") and returns its entries in file order. It follows
// git's own parser (config.c) byte for byte: an entry list from Parse matches
// `git config --file F --no-includes --list`, and Parse returns an error
// wherever git reports "bad config line". Includes are not followed.
//
// Parse also rejects, deliberately, some input git accepts:
//   - a key before any section header (git reads it as a name with no
//     section, which no real setting has);
//   - a NUL byte anywhere (git silently truncates names and values at it);
//   - an empty section name (`[.x]`, `[ "x"]`) or an empty subsection
//     (`[x ""]`, `[x.]`), which Entry could not tell apart from none;
//   - input longer than MaxSize.
//
// Errors are *SyntaxError values, whose messages start "line N: ", except
// the size error.
func Parse(data []byte) ([]Entry, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("config is %d bytes, more than the %d-byte limit", len(data), MaxSize)
	}
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return nil, &SyntaxError{
			Line:     1 + bytes.Count(data[:i], []byte{'\n'}),
			Msg:      "NUL byte",
			stricter: true,
		}
	}
	p := parser{data: data, line: 1}
	return p.parse()
}

var utf8BOM = [...]byte{0xEF, 0xBB, 0xBF}

// parser mirrors git's struct config_source: next behaves like
// get_next_char, including its line counting, so that error line numbers
// match git's.
type parser struct {
	data []byte
	pos  int
	eof  bool
	line int
	buf  []byte // scratch for names and values
}

// next returns the next byte, folding "\r\n" into "\n" and returning '\n'
// (with p.eof set) at and after the end of input, as git does.
func (p *parser) next() byte {
	if p.pos >= len(p.data) {
		p.eof = true
		p.line++
		return '\n'
	}
	c := p.data[p.pos]
	p.pos++
	if c == '\r' && p.pos < len(p.data) && p.data[p.pos] == '\n' {
		p.pos++
		c = '\n'
	}
	if c == '\n' {
		p.line++
	}
	return c
}

func (p *parser) errorf(format string, args ...any) *SyntaxError {
	return &SyntaxError{Line: p.line, Msg: fmt.Sprintf(format, args...)}
}

// parse is git_parse_source.
func (p *parser) parse() ([]Entry, error) {
	var (
		entries    []Entry
		section    string
		subsection string
		inSection  bool
		comment    bool
		bom        = 0 // bytes of the BOM matched so far; -1 once past it
	)
	for {
		c := p.next()
		if bom >= 0 && bom < len(utf8BOM) {
			if c == utf8BOM[bom] {
				bom++
				continue
			}
			if bom != 0 {
				return nil, p.errorf("incomplete UTF-8 byte order mark")
			}
			bom = -1
		}
		switch {
		case c == '\n':
			if p.eof {
				return entries, nil
			}
			comment = false
			continue
		case comment:
			continue
		case isSpace(c):
			continue
		case c == '#' || c == ';':
			comment = true
			continue
		case c == '[':
			var err error
			section, subsection, err = p.header()
			if err != nil {
				return nil, err
			}
			inSection = true
			continue
		case !isAlpha(c):
			return nil, p.errorf("unexpected %s; want a section header, a key or a comment", quoteByte(c))
		}
		line := p.line
		key, value, noValue, err := p.entry(c)
		if err != nil {
			return nil, err
		}
		if !inSection {
			return nil, &SyntaxError{Line: line, Msg: fmt.Sprintf("key %q before any section header", key), stricter: true}
		}
		entries = append(entries, Entry{
			Section:    section,
			Subsection: subsection,
			Key:        key,
			Value:      value,
			NoValue:    noValue,
			Line:       line,
		})
	}
}

// header reads a section header after its '[' (git's get_base_var and
// get_extended_base_var) and splits git's dotted name into section and
// subsection.
func (p *parser) header() (section, subsection string, err error) {
	name := p.buf[:0]
	defer func() { p.buf = name[:0] }()
	for {
		c := p.next()
		if p.eof {
			return "", "", p.errorf("unterminated section header")
		}
		if c == ']' {
			break
		}
		if isSpace(c) {
			if name, err = p.extendedHeader(name, c); err != nil {
				return "", "", err
			}
			break
		}
		if !isKeyChar(c) && c != '.' {
			return "", "", p.errorf("%s in section name", quoteByte(c))
		}
		name = append(name, toLower(c))
	}
	if len(name) == 0 {
		return "", "", p.errorf("empty section name")
	}
	dot := bytes.IndexByte(name, '.')
	if dot < 0 {
		return string(name), "", nil
	}
	if dot == 0 {
		return "", "", &SyntaxError{Line: p.line, Msg: "empty section name", stricter: true}
	}
	if dot == len(name)-1 {
		return "", "", &SyntaxError{Line: p.line, Msg: "empty subsection name", stricter: true}
	}
	return string(name[:dot]), string(name[dot+1:]), nil
}

// extendedHeader reads ` "subsection"]` after a section name; c is the
// whitespace byte that ended the name.
func (p *parser) extendedHeader(name []byte, c byte) ([]byte, error) {
	for {
		if c == '\n' {
			p.line--
			return name, p.errorf("section header not closed on its line")
		}
		c = p.next()
		if !isSpace(c) {
			break
		}
	}
	if c != '"' {
		return name, p.errorf("%s after section name; want a quoted subsection", quoteByte(c))
	}
	name = append(name, '.')
	for {
		c = p.next()
		if c == '\n' {
			p.line--
			return name, p.errorf("unterminated subsection name")
		}
		if c == '"' {
			break
		}
		if c == '\\' {
			// Git keeps the byte after any backslash, so `\a` is "a".
			c = p.next()
			if c == '\n' {
				p.line--
				return name, p.errorf("unterminated subsection name")
			}
		}
		name = append(name, c)
	}
	if c = p.next(); c != ']' {
		return name, p.errorf("%s after subsection; want ']'", quoteByte(c))
	}
	return name, nil
}

// entry reads a key whose first byte is first, and its value if any (git's
// get_value).
func (p *parser) entry(first byte) (key, value string, noValue bool, err error) {
	name := append(p.buf[:0], toLower(first))
	var c byte
	for {
		c = p.next()
		if p.eof || !isKeyChar(c) {
			break
		}
		name = append(name, toLower(c))
	}
	key = string(name)
	p.buf = name[:0]
	for c == ' ' || c == '\t' {
		c = p.next()
	}
	if c == '\n' {
		return key, "", true, nil
	}
	if c != '=' {
		return "", "", false, p.errorf("%s after key %q; want '=' or end of line", quoteByte(c), key)
	}
	value, err = p.value()
	return key, value, false, err
}

// value reads a value after its '=' (git's parse_value).
func (p *parser) value() (string, error) {
	v := p.buf[:0]
	defer func() { p.buf = v[:0] }()
	quote, comment := false, false
	space := 0
	for {
		c := p.next()
		if c == '\n' {
			if quote {
				p.line--
				return "", p.errorf("unterminated quoted string")
			}
			return string(v), nil
		}
		if comment {
			continue
		}
		if isSpace(c) && !quote {
			// Whitespace runs are kept, each byte as one ' ', only when
			// something other than whitespace follows: that trims both ends.
			if len(v) > 0 {
				space++
			}
			continue
		}
		if !quote && (c == ';' || c == '#') {
			comment = true
			continue
		}
		for ; space > 0; space-- {
			v = append(v, ' ')
		}
		switch c {
		case '\\':
			switch c = p.next(); c {
			case '\n':
				continue // line continuation
			case 't':
				c = '\t'
			case 'b':
				c = '\b'
			case 'n':
				c = '\n'
			case '\\', '"':
			default:
				return "", p.errorf("unknown escape \\%s in value", quoteByte(c))
			}
		case '"':
			quote = !quote
			continue
		}
		v = append(v, c)
	}
}

// The character classes below are git's (sane_ctype in ctype.c): ASCII only,
// and whitespace is just space, tab, newline and carriage return.

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isKeyChar(c byte) bool { return isAlpha(c) || '0' <= c && c <= '9' || c == '-' }

func toLower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// quoteByte formats c for an error message without echoing raw control or
// non-ASCII bytes.
func quoteByte(c byte) string {
	if c == '\n' {
		return "end of line"
	}
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}
