package termfilter

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func filter(chunks ...string) string {
	var b bytes.Buffer
	f := New(&b)
	for _, c := range chunks {
		f.Write([]byte(c))
	}
	return b.String()
}

func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want string
	}{
		{"text", []string{"hello\tworld\n"}, "hello\tworld\n"},
		{"colour passes", []string{"\x1b[1;31mred\x1b[0m\n"}, "\x1b[1;31mred\x1b[0m\n"},
		{"truecolour", []string{"\x1b[38:2:10:20:30mx\x1b[m"}, "\x1b[38:2:10:20:30mx\x1b[m"},
		{"cursor up", []string{"a\x1b[2Ab"}, "ab"},
		{"cursor position", []string{"\x1b[1;1Hfake prompt"}, "fake prompt"},
		{"clear screen", []string{"\x1b[2J\x1b[Hx"}, "x"},
		{"clear line", []string{"x\x1b[2Ky"}, "xy"},
		{"save/restore cursor", []string{"\x1b7a\x1b8b"}, "ab"},
		{"reverse index", []string{"\x1bMx"}, "x"},
		{"title BEL", []string{"\x1b]0;pwned\x07ok"}, "ok"},
		{"clipboard ST", []string{"\x1b]52;c;cm0gLXJmIH4=\x1b\\ok"}, "ok"},
		{"hyperlink", []string{"\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\"}, "click"},
		{"DCS", []string{"\x1bPq#0;2;0;0;0\x1b\\x"}, "x"},
		{"charset switch", []string{"\x1b(0lqk\x1b(Bx"}, "lqkx"},
		{"split sequence", []string{"a\x1b", "[", "3", "A", "b"}, "ab"},
		{"split OSC", []string{"\x1b]0;ti", "tle\x1b", "\\z"}, "z"},
		{"split utf8", []string{"\xc3", "\xa9"}, "é"},
		{"8-bit CSI byte", []string{"\x9b2Jx"}, "\uFFFD2Jx"},
		{"encoded C1", []string{"\u009b2Jx"}, "2Jx"},
		{"BEL and SI dropped", []string{"a\x07\x0fb\x00c"}, "abc"},
		{"CR and BS kept", []string{"50%\r100%\b!"}, "50%\r100%\b!"},
		{"private mode", []string{"\x1b[?1049hx"}, "x"},
		{"SGR with odd params dropped", []string{"\x1b[>4;2mx"}, "x"},

		// Reverse video is sandboxd's (FrameOn).
		{"reverse dropped", []string{"\x1b[7mx"}, "x"},
		{"reverse among others", []string{"\x1b[1;7;31mx"}, "\x1b[1;31mx"},
		{"reverse first and last", []string{"\x1b[7;4;7mx"}, "\x1b[4mx"},
		{"reverse with a zero", []string{"\x1b[07mx\x1b[007mx"}, "xx"},
		{"reverse with many zeros", []string{"\x1b[00000000000000000000007;1mx"}, "\x1b[1mx"},
		{"reverse split", []string{"\x1b[1;", "7", "mx"}, "\x1b[1mx"},
		{"reverse wrapped round", []string{"\x1b[65543;263;4294967303;1mx"}, "\x1b[1mx"},
		{"reverse off kept", []string{"\x1b[27mx"}, "\x1b[27mx"},
		{"17 and 70 kept", []string{"\x1b[17;70mx"}, "\x1b[17;70mx"},
		{"reset kept", []string{"\x1b[mx\x1b[0mx"}, "\x1b[mx\x1b[0mx"},
		{"empty then reverse is a reset", []string{"\x1b[;7mx"}, "\x1b[mx"},
		{"reverse then empty is a reset", []string{"\x1b[7;mx"}, "\x1b[mx"},
		{"256 colour 7", []string{"\x1b[38;5;7mx"}, "\x1b[38;5;7mx"},
		{"256 colour 7 then reverse", []string{"\x1b[48;5;7;7mx"}, "\x1b[48;5;7mx"},
		{"256 colour selector with zero", []string{"\x1b[38;05;7mx"}, "\x1b[38;05;7mx"},
		{"truecolour 7s", []string{"\x1b[38;2;7;7;7;7mx"}, "\x1b[38;2;7;7;7mx"},
		{"underline colour", []string{"\x1b[58;2;1;2;7mx"}, "\x1b[58;2;1;2;7mx"},
		{"colours back to back", []string{"\x1b[38;5;7;48;2;7;0;7;7mx"}, "\x1b[38;5;7;48;2;7;0;7mx"},
		{"introducer without colour", []string{"\x1b[38;7mx"}, "x"},
		{"introducer with odd selector", []string{"\x1b[38;3;7mx"}, "\x1b[3mx"},
		{"introducer at the end", []string{"\x1b[1;38mx"}, "\x1b[1mx"},
		{"256 colour cut short", []string{"\x1b[1;38;5mx"}, "\x1b[1mx"},
		{"truecolour cut short", []string{"\x1b[1;38;2;1;7mx"}, "\x1b[1mx"},
		{"colon colour", []string{"\x1b[38:5:208mx"}, "\x1b[38:5:208mx"},
		// With ':' in the list, a 7 anywhere is one reading away from an attribute.
		{"colon 256 colour 7", []string{"\x1b[38:5:7mx"}, "x"},
		{"curly underline", []string{"\x1b[4:3mx"}, "\x1b[4:3mx"},
		{"colon kept whole", []string{"\x1b[38:2::255:0:0;1mx"}, "\x1b[38:2::255:0:0;1mx"},
		{"colon reverse", []string{"\x1b[7:1mx\x1b[07:mx"}, "xx"},
		// Read with ':' as ';' (st) this is a green, then reverse video.
		{"colon truecolour blue 7", []string{"\x1b[38:2::255:0:7mx"}, "x"},
		{"colon truecolour blue 7 with bold", []string{"\x1b[1;38:2::255:0:7mx"}, "\x1b[1mx"},
		{"colon 7 elsewhere in the list", []string{"\x1b[4:3;38;5;7mx"}, "\x1b[38;5;7mx"},
		{"colon 7 after the first", []string{"\x1b[1:7mx"}, "x"},
		{"mixed colour", []string{"\x1b[38;5:208mx"}, "\x1b[38;5:208mx"},
		{"mixed colour 7", []string{"\x1b[38;2:0:0:7;1mx"}, "\x1b[1mx"},
		{"mixed colour with bad selector", []string{"\x1b[38;3:1;1mx"}, "\x1b[3:1;1mx"},
		{"SGR too long dropped", []string{"\x1b[" + strings.Repeat("1;", maxSeq) + "mx"}, "x"},
		{"CSI too long dropped", []string{"\x1b[" + strings.Repeat("1", maxSeq), "1;1", "Hx"}, "x"},
		{"CSI too long, then malformed", []string{"\x1b[" + strings.Repeat("1", maxSeq) + "\x00x"}, "x"},
	} {
		if got := filter(tc.in...); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// checkOutput reports what is wrong with out, a Writer's output: any
// control but newline, tab, carriage return and backspace; any escape but
// an SGR sequence; any SGR sequence that could turn on reverse video.
func checkOutput(out string) error {
	for i := 0; i < len(out); i++ {
		c := out[i]
		if c == 0x1b {
			j := i + 1
			if j >= len(out) || out[j] != '[' {
				return fmt.Errorf("escape at %d is not CSI", i)
			}
			j++
			for j < len(out) && strings.IndexByte("0123456789;:", out[j]) >= 0 {
				j++
			}
			if j >= len(out) || out[j] != 'm' {
				return fmt.Errorf("CSI at %d is not SGR", i)
			}
			if err := checkSGR(out[i+2 : j]); err != nil {
				return fmt.Errorf("SGR %q at %d: %w", out[i:j+1], i, err)
			}
			i = j
			continue
		}
		if c < 0x20 && c != '\n' && c != '\t' && c != '\r' && c != '\b' || c == 0x7f {
			return fmt.Errorf("control %#x at %d", c, i)
		}
	}
	for i, r := range out {
		if r >= 0x80 && r <= 0x9f {
			return fmt.Errorf("C1 control %U at %d", r, i)
		}
	}
	return nil
}

// checkSGR reports whether the SGR parameters p could turn on reverse
// video: read with ':' joining sub-parameters, with the first
// sub-parameter standing for the whole, or (when there is any ':') with
// ':' read as ';'.
func checkSGR(p string) error {
	if p == "" {
		return nil
	}
	// value is a parameter's value as a terminal reads it; -1 for one
	// that could wrap round in a narrow integer.
	value := func(d string) int {
		d = strings.TrimLeft(d, "0")
		if len(d) > 3 {
			return -1
		}
		v, _ := strconv.Atoi("0" + d)
		if v > 255 {
			return -1
		}
		return v
	}
	if strings.Contains(p, ":") {
		for _, f := range strings.FieldsFunc(p, func(r rune) bool { return r == ':' || r == ';' }) {
			if v := value(f); v == 7 || v < 0 {
				return fmt.Errorf("%q in a sequence with ':'", f)
			}
		}
	}
	params := strings.Split(p, ";")
	for i := 0; i < len(params); i++ {
		q := params[i]
		first, _, colon := strings.Cut(q, ":")
		v := value(first)
		if colon {
			if v == 7 || v < 0 {
				return fmt.Errorf("parameter %q", q)
			}
			continue
		}
		switch v {
		case 7, -1:
			return fmt.Errorf("parameter %q", q)
		case 38, 48, 58:
			if i+1 >= len(params) {
				return fmt.Errorf("%q at the end", q)
			}
			sel, _, colon := strings.Cut(params[i+1], ":")
			args := 0
			switch {
			case colon && (value(sel) == 5 || value(sel) == 2):
			case !colon && value(sel) == 5:
				args = 1
			case !colon && value(sel) == 2:
				args = 3
			default:
				return fmt.Errorf("%q without a colour", q)
			}
			if i+1+args >= len(params) {
				return fmt.Errorf("%q cut short", q)
			}
			i += 1 + args
		}
	}
	return nil
}

func TestCheckOutput(t *testing.T) {
	// The fuzz target's oracle must refuse what it is there to catch.
	for _, bad := range []string{
		"\x1b[7m", "\x1b[1;07m", "\x1b[65543m", "\x1b[7:1m", "\x1b[38:2::1:2:7m",
		"\x1b[38;5m", "\x1b[38;7m", "\x1b[2J", "\x1b]0;x\x07", "\x1bM", "\x1b", "\x07", "\u009b",
	} {
		if checkOutput(bad) == nil {
			t.Errorf("checkOutput(%q) accepted it", bad)
		}
	}
	for _, good := range []string{
		"", "x\n", "\x1b[m", "\x1b[1;31m", "\x1b[38;5;7m", "\x1b[38;2;7;7;7;1m", "\x1b[38:5:208m", "\x1b[4:3m",
	} {
		if err := checkOutput(good); err != nil {
			t.Errorf("checkOutput(%q): %v", good, err)
		}
	}
}

// Whatever the command writes, in whatever pieces, only text and colour
// come out, never reverse video, and how the bytes were split (or held
// back part of the way) makes no difference.
func FuzzWriter(f *testing.F) {
	f.Add([]byte("\x1b[2J\x1b]0;x\x07\x1b[31mred\x1b[0m"), uint64(3))
	f.Add([]byte("\x9b\xc2\x9b\x1bP\x1b\\"), uint64(1))
	f.Add([]byte("\x1b[1;7;38;5;7;48;2;7;7;7;7m\x1b[07m\x1b[38;7m"), uint64(7))
	f.Add([]byte("\x1b[38:2::255:0:7m\x1b[4:3;7m\x1b[38;2:0:0:7;1m\x1b[;7m"), uint64(11))
	f.Add([]byte("\xe4\xb8\xad\xe4\xb8\x1b[7m\xed\xa0\x80"), uint64(2))
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		if len(in) > maxHeld/8 {
			return // held, it would fill the bound, and Write would wait for ever
		}
		whole := filter(string(in))
		if err := checkOutput(whole); err != nil {
			t.Fatalf("output %q: %v", whole, err)
		}
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		var b bytes.Buffer
		w := New(&b)
		held, shown := false, 0
		for rest := in; len(rest) > 0; {
			n := 1 + r.IntN(min(len(rest), 8))
			if r.IntN(2) == 0 {
				n = 1 + r.IntN(len(rest))
			}
			if _, err := w.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
			if held && b.Len() != shown {
				t.Fatalf("held output was written: %q", b.String()[shown:])
			}
			if r.IntN(4) == 0 {
				if held {
					w.Release()
				} else {
					w.Hold()
					shown = b.Len()
				}
				held = !held
			}
		}
		w.Release()
		if got := b.String(); got != whole {
			t.Fatalf("split output %q, whole %q", got, whole)
		}
	})
}
