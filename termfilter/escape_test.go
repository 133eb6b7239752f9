package termfilter

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"plain", "/home/me/src/app.go", "/home/me/src/app.go"},
		{"spaces", "a b  c", "a b  c"},
		{"non-ASCII", "café 中文 🙂", "café 中文 🙂"},
		{"real U+FFFD", "\uFFFD", "\uFFFD"},
		{"ESC", "a\x1bb", `a\x1bb`},
		{"OSC 52 clipboard", "\x1b]52;c;ZXZpbA==\x07", `\x1b]52;c;ZXZpbA==\x07`},
		{"OSC 0 title", "\x1b]0;pwned\x1b\\", `\x1b]0;pwned\x1b\\`},
		{"OSC 10 colour query", "\x1b]10;?\x07", `\x1b]10;?\x07`},
		{"OSC 11 colour set", "\x1b]11;#000000\x07", `\x1b]11;#000000\x07`},
		{"CSI 2J", "\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
		{"fake prompt", "x\nAllow exactly this, once? [y/N] ", `x\nAllow exactly this, once? [y/N] `},
		{"CR overwrite", "evil\rgood", `evil\rgood`},
		{"tab", "a\tb", `a\tb`},
		{"NUL, BEL, DEL", "\x00\x07\x7f", `\x00\x07\x7f`},
		{"bidi override", "/tmp/\u202etxt.exe", `/tmp/\u202etxt.exe`},
		{"bidi isolates", "\u2066a\u2069", `\u2066a\u2069`},
		{"zero width", "a\u200bb\u200dc\u2060d\ufeff", `a\u200bb\u200dc\u2060d\ufeff`},
		{"line separator", "a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"C1 CSI", "\u009b2J", `\u009b2J`},
		{"C1 NEL", "a\u0085b", `a\u0085b`},
		{"no-break space", "a\u00a0b", `a\u00a0b`},
		{"tag character", "\U000e0041", `\U000e0041`},
		{"private use", "\ue000", `\ue000`},
		{"invalid UTF-8", "a\xffb\xc3", `a\xffb\xc3`},
		{"8-bit CSI byte", "\x9b2J", `\x9b2J`},
		{"surrogate half", "\xed\xa0\x80", `\xed\xa0\x80`},
		{"backslash", `C:\x1b`, `C:\\x1b`},
		{"backslash alone", `\`, `\\`},
	} {
		if got := Escape(tc.in); got != tc.want {
			t.Errorf("%s: Escape(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestEscapeUnchangedDoesNotAllocate(t *testing.T) {
	s := "/home/me/src/café/中文.go"
	if n := testing.AllocsPerRun(100, func() { Escape(s) }); n != 0 {
		t.Errorf("Escape of a clean string allocated %v times", n)
	}
}

// unescape inverts Escape, for the injectivity check; it accepts only
// what Escape writes.
func unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return "", errors.New("trailing backslash")
		}
		digits := 0
		switch s[i+1] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'x':
			digits = 2
		case 'u':
			digits = 4
		case 'U':
			digits = 8
		default:
			return "", errors.New("unknown escape " + s[i:i+2])
		}
		i += 2
		if digits == 0 {
			continue
		}
		if i+digits > len(s) {
			return "", errors.New("short escape")
		}
		h := s[i : i+digits]
		if strings.ToLower(h) != h {
			return "", errors.New("upper-case hex " + h)
		}
		v, err := strconv.ParseUint(h, 16, 32)
		if err != nil {
			return "", err
		}
		if digits == 2 {
			b.WriteByte(byte(v))
		} else {
			b.WriteRune(rune(v))
		}
		i += digits
	}
	return b.String(), nil
}

// Whatever a string holds, its escaped form can drive no terminal, hides
// nothing from a reader, and says exactly what the string was.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{
		"", "plain", "café 🙂", `a\b`, `\x41`, "\x1b]52;c;ZXZpbA==\x07",
		"\x1b[2J", "a\nb\r\t", "\u202e\u2066\u200b\ufeff", "\u009b\u0085",
		"\xff\xc3\xed\xa0\x80", "\u2028\U000e0001",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Escape(in)
		if !utf8.ValidString(out) {
			t.Fatalf("Escape(%q) = %q: not UTF-8", in, out)
		}
		for _, r := range out {
			switch {
			case r < 0x20 || r == 0x7f:
				t.Fatalf("Escape(%q) = %q: holds control %U", in, out, r)
			case r >= 0x80 && r <= 0x9f:
				t.Fatalf("Escape(%q) = %q: holds C1 control %U", in, out, r)
			case unicode.Is(unicode.Cf, r):
				t.Fatalf("Escape(%q) = %q: holds format character %U", in, out, r)
			case r == '\u2028' || r == '\u2029':
				t.Fatalf("Escape(%q) = %q: holds separator %U", in, out, r)
			case !unicode.IsPrint(r):
				t.Fatalf("Escape(%q) = %q: holds non-printing %U", in, out, r)
			}
		}
		back, err := unescape(out)
		if err != nil {
			t.Fatalf("Escape(%q) = %q: %v", in, out, err)
		}
		if back != in {
			t.Fatalf("Escape(%q) = %q, which reads back as %q", in, out, back)
		}
	})
}
