// Package termfilter makes a command's output safe to show on a terminal
// next to sandboxd's own prompts: it passes text, newlines, tabs, carriage
// returns, backspaces and colour (SGR) sequences, and drops every other
// control sequence — cursor movement, clearing, scrolling regions, window
// titles, clipboard and hyperlink OSCs, device control strings, charset
// switches and C1 controls — so a command cannot move above its own
// output to hide or fake a prompt. The filter is a streaming state
// machine: sequences split across writes are handled.
//
// The package has no dependencies beyond the standard library and must
// never import broker, sandbox or review.
package termfilter

import (
	"io"
	"unicode/utf8"
)

// maxSeq bounds how much of one escape sequence is buffered; a longer one
// is dropped whole.
const maxSeq = 4096

type state uint8

const (
	ground  state = iota
	escape        // after ESC
	csi           // ESC [ ... final
	str           // OSC, DCS, APC, PM, SOS: until BEL or ST
	strEsc        // ESC inside a string (maybe ST)
	skipOne       // ESC ( X and friends: one more byte to drop
)

// Writer filters what is written to it before passing it on.
type Writer struct {
	w     io.Writer
	st    state
	seq   []byte // the CSI sequence being read
	utf   []byte // an incomplete UTF-8 sequence
	out   []byte
	isOSC bool
}

// New returns a Writer that filters into w.
func New(w io.Writer) *Writer { return &Writer{w: w} }

// Write filters p. It reports len(p) consumed unless the underlying
// writer fails.
func (f *Writer) Write(p []byte) (int, error) {
	f.out = f.out[:0]
	for _, b := range p {
		f.step(b)
	}
	if len(f.out) > 0 {
		if _, err := f.w.Write(f.out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (f *Writer) step(b byte) {
	switch f.st {
	case escape:
		switch b {
		case '[':
			f.st, f.seq = csi, append(f.seq[:0], 0x1b, '[')
		case ']', 'P', '_', '^', 'X':
			f.st = str
		case '(', ')', '*', '+', '-', '.', '/', '#', '%', ' ':
			f.st = skipOne
		default:
			f.st = ground // a two-byte sequence: dropped
		}
		return
	case skipOne:
		f.st = ground
		return
	case csi:
		if len(f.seq) >= maxSeq {
			f.st = ground // too long: dropped whole
			return
		}
		f.seq = append(f.seq, b)
		switch {
		case b >= 0x40 && b <= 0x7e: // final byte
			if b == 'm' && sgrParams(f.seq[2:len(f.seq)-1]) {
				f.out = append(f.out, f.seq...)
			}
			f.st = ground
		case b < 0x20 || b > 0x7e:
			f.st = ground // malformed: dropped
		}
		return
	case str:
		switch b {
		case 0x07:
			f.st = ground
		case 0x1b:
			f.st = strEsc
		}
		return
	case strEsc:
		if b == '\\' {
			f.st = ground
		} else {
			f.st = str
		}
		return
	}
	// ground
	if len(f.utf) > 0 {
		f.rune(b)
		return
	}
	switch {
	case b == 0x1b:
		f.st = escape
	case b == '\n' || b == '\t' || b == '\r' || b == '\b':
		f.out = append(f.out, b)
	case b < 0x20 || b == 0x7f:
		// other C0 controls (BEL, SO/SI, VT, FF, NUL...): dropped
	case b < 0x80:
		f.out = append(f.out, b)
	default:
		f.rune(b)
	}
}

// rune collects a multi-byte UTF-8 sequence; invalid bytes become U+FFFD
// and encoded C1 controls (U+0080-U+009F, which some terminals obey) are
// dropped.
func (f *Writer) rune(b byte) {
	f.utf = append(f.utf, b)
	if !utf8.FullRune(f.utf) {
		if len(f.utf) < utf8.UTFMax {
			return
		}
	}
	r, n := utf8.DecodeRune(f.utf)
	rest := append([]byte(nil), f.utf[n:]...)
	f.utf = f.utf[:0]
	switch {
	case r == utf8.RuneError && n <= 1:
		f.out = append(f.out, "\uFFFD"...)
	case r >= 0x80 && r <= 0x9f:
	default:
		f.out = utf8.AppendRune(f.out, r)
	}
	for _, c := range rest {
		f.step(c)
	}
}

// sgrParams accepts the parameters of a colour sequence: digits, ';' and
// ':' only.
func sgrParams(p []byte) bool {
	for _, c := range p {
		if (c < '0' || c > '9') && c != ';' && c != ':' {
			return false
		}
	}
	return true
}

// Reset drops any half-read sequence, so one the command began before a
// prompt cannot swallow or restyle the prompt's first bytes.
func (f *Writer) Reset() {
	f.st, f.seq, f.utf = ground, f.seq[:0], f.utf[:0]
}
