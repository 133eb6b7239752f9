package termfilter

import (
	"io"
	"sync"
	"unicode/utf8"
)

// FrameOn and FrameOff bracket a question sandboxd asks a person. Writer
// removes reverse video from everything a command prints, so reverse
// video on the terminal is sandboxd's. It is a mark, not a proof: a
// command can imitate it with explicit colours, so what keeps a question
// whole is holding the command's output while it is open (Hold).
// FrameOn resets first so that attributes a command left on (concealed
// text, foreground equal to background) cannot hide or disguise the
// question; FrameOff resets again rather than only ending reverse video,
// so nothing sandboxd set inside the frame outlasts it.
const (
	FrameOn  = "\x1b[0;7m"
	FrameOff = "\x1b[0m"
)

// maxHeld bounds the filtered output a held Writer keeps; past it, Write
// waits for Release, which slows the command instead of dropping output.
// A Write fills it in steps of holdStep input bytes, so it may be
// exceeded by one step's output (at most 3*holdStep+maxSeq bytes:
// an invalid byte becomes the 3-byte U+FFFD, and a colour sequence
// buffered before the step may end in it).
const (
	maxHeld  = 1 << 20
	holdStep = 4096
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
	csiSkip       // the rest of a CSI sequence too long to keep
)

// Writer filters what is written to it before passing it on. It is safe
// for concurrent use: a relay goroutine writes while the goroutine asking
// a question calls Hold, Release and Reset.
type Writer struct {
	w io.Writer

	// wmu serialises Write calls, so the bytes of one call are filtered
	// and passed on together even when it waits part-way for Release.
	// Lock order: wmu, then mu.
	wmu sync.Mutex

	// mu guards every field below. It is also held while writing to w,
	// so filtered output reaches w in the order it was filtered and Hold
	// returns only after a write under way has finished.
	mu    sync.Mutex
	room  sync.Cond // L is &mu; broadcast when the last hold is released
	holds int       // Hold calls not yet released
	held  []byte    // filtered output kept back while holds > 0
	err   error     // from writing held to w, for the next Write to report
	st    state
	seq   []byte // the CSI sequence being read
	utf   []byte // an incomplete UTF-8 sequence
	out   []byte // what the bytes being filtered produced
}

// New returns a Writer that filters into w.
func New(w io.Writer) *Writer {
	f := &Writer{w: w}
	f.room.L = &f.mu
	return f
}

// Write filters p. It reports len(p) consumed unless writing to the
// underlying writer fails, now or while releasing output held back
// before. While the Writer is held and maxHeld is reached, Write waits
// for Release.
func (f *Writer) Write(p []byte) (int, error) {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	done := 0
	for {
		for f.holds > 0 && len(f.held) >= maxHeld {
			f.room.Wait()
		}
		if err := f.err; err != nil {
			f.err = nil
			return done, err
		}
		if done == len(p) {
			return done, nil
		}
		if f.holds > 0 {
			n := min(len(p)-done, holdStep)
			f.filterLocked(p[done : done+n])
			f.held = append(f.held, f.out...)
			done += n
			continue
		}
		f.filterLocked(p[done:])
		if len(f.out) > 0 {
			if _, err := f.w.Write(f.out); err != nil {
				return done, err
			}
		}
		return len(p), nil
	}
}

// Hold keeps filtered output back from the underlying writer until a
// matching Release, so nothing the command prints lands in the middle of
// a question. When Hold returns, no write to the underlying writer is
// under way. Holds nest: output flows again after as many Releases as
// Holds. Hold does not reset the filter, so a sequence the command split
// across the question is still read whole.
func (f *Writer) Hold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holds++
}

// Release ends one Hold. When it ends the last, it writes what was held,
// in order, before any later output, and lets waiting Writes go on; an
// error writing it is reported by the next Write, since the Writes that
// produced it have already returned. A Release without a Hold does
// nothing.
func (f *Writer) Release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.holds == 0 {
		return
	}
	f.holds--
	if f.holds > 0 {
		return
	}
	if len(f.held) > 0 {
		if _, err := f.w.Write(f.held); err != nil && f.err == nil {
			f.err = err
		}
	}
	f.held = nil // up to maxHeld: not worth keeping between questions
	f.room.Broadcast()
}

// filterLocked runs p through the state machine into f.out.
func (f *Writer) filterLocked(p []byte) {
	f.out = f.out[:0]
	for _, b := range p {
		f.step(b)
	}
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
			f.st = csiSkip // too long: dropped whole
			f.step(b)
			return
		}
		f.seq = append(f.seq, b)
		switch {
		case b >= 0x40 && b <= 0x7e: // final byte
			if b == 'm' && sgrParams(f.seq[2:len(f.seq)-1]) {
				if p, ok := sgrFilter(f.seq[2 : len(f.seq)-1]); ok {
					f.out = append(f.out, 0x1b, '[')
					f.out = append(f.out, p...)
					f.out = append(f.out, 'm')
				}
			}
			f.st = ground
		case b < 0x20 || b > 0x7e:
			f.st = ground // malformed: dropped
		}
		return
	case csiSkip:
		if b >= 0x40 || b < 0x20 { // final or malformed: the sequence ends
			f.st = ground
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
// prompt cannot swallow or restyle the prompt's first bytes. It leaves
// held output held.
func (f *Writer) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.st, f.seq, f.utf = ground, f.seq[:0], f.utf[:0]
}
