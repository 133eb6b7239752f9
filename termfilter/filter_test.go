package termfilter

import (
	"bytes"
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
	} {
		if got := filter(tc.in...); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// safe reports whether s holds only text and SGR sequences.
func safe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == 0x1b {
			if i+1 >= len(s) || s[i+1] != '[' {
				return false
			}
			j := i + 2
			for j < len(s) && ((s[j] >= '0' && s[j] <= '9') || s[j] == ';' || s[j] == ':') {
				j++
			}
			if j >= len(s) || s[j] != 'm' {
				return false
			}
			i = j
			continue
		}
		if c < 0x20 && c != '\n' && c != '\t' && c != '\r' && c != '\b' {
			return false
		}
	}
	return !strings.ContainsAny(s, "\u0080\u0081\u0082\u0083\u0084\u0085\u0086\u0087\u0088\u0089\u008a\u008b\u008c\u008d\u008e\u008f\u0090\u0091\u0092\u0093\u0094\u0095\u0096\u0097\u0098\u0099\u009a\u009b\u009c\u009d\u009e\u009f")
}

// Whatever the command writes, in whatever pieces, only text and colour
// come out.
func FuzzFilter(f *testing.F) {
	f.Add([]byte("\x1b[2J\x1b]0;x\x07\x1b[31mred\x1b[0m"), 3)
	f.Add([]byte("\x9b\xc2\x9b\x1bP\x1b\\"), 1)
	f.Fuzz(func(t *testing.T, in []byte, cut int) {
		if cut < 1 {
			cut = 1
		}
		var chunks []string
		for len(in) > 0 {
			n := min(cut, len(in))
			chunks = append(chunks, string(in[:n]))
			in = in[n:]
		}
		if out := filter(chunks...); !safe(out) {
			t.Fatalf("unsafe output %q", out)
		}
	})
}
