package mcp

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBounded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limit  int
		writes []string
		want   string
		trunc  bool
	}{
		{"fits", 10, []string{"abc", "de"}, "abcde", false},
		{"exactly", 6, []string{"abcdef"}, "abcdef", false},
		{"head and tail", 6, []string{"abcdefghij"}, "abc\n[sandboxd: 4 bytes left out here; 10 in all]\nhij", true},
		{"many small writes", 4, []string{"a", "b", "c", "d", "e", "f", "g"}, "ab\n[sandboxd: 3 bytes left out here; 7 in all]\nfg", true},
		{"one big write after", 4, []string{"ab", strings.Repeat("x", 100), "yz"}, "ab\n[sandboxd: 100 bytes left out here; 104 in all]\nyz", true},
		{"cut characters dropped", 6, []string{"aé" + strings.Repeat("-", 10) + "éz"}, "aé\n[sandboxd: 10 bytes left out here; 16 in all]\néz", true},
		{"cut inside a character", 4, []string{"aaé" + strings.Repeat("-", 10) + "éz"}, "aa\n[sandboxd: 14 bytes left out here; 17 in all]\nz", true},
		{"invalid bytes", 10, []string{"a\xffb"}, "a\uFFFDb", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBounded(tc.limit)
			total := 0
			for _, w := range tc.writes {
				n, err := b.Write([]byte(w))
				if n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
				total += len(w)
			}
			if got := b.String(); got != tc.want || b.Truncated() != tc.trunc || b.Total() != int64(total) {
				t.Fatalf("String = %q (truncated %v, total %d), want %q (%v, %d)", got, b.Truncated(), b.Total(), tc.want, tc.trunc, total)
			}
			if !utf8.ValidString(b.String()) {
				t.Fatal("not UTF-8")
			}
		})
	}
}

// However the output arrives, what is kept is the true head and tail.
func FuzzBounded(f *testing.F) {
	f.Add([]byte("hello, world"), uint8(4), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, limit, chunk uint8) {
		lim := int(limit%64) + 2
		step := int(chunk%16) + 1
		b := NewBounded(lim)
		for i := 0; i < len(data); i += step {
			b.Write(data[i:min(i+step, len(data))])
		}
		half := lim / 2
		if len(data) <= 2*half {
			if b.Truncated() {
				t.Fatalf("%q truncated at %d", data, lim)
			}
			return
		}
		s := b.String()
		head, tail := string(data[:half]), string(data[len(data)-half:])
		if utf8.ValidString(head) && utf8.ValidString(tail) && (!strings.HasPrefix(s, head) || !strings.HasSuffix(s, tail)) {
			t.Fatalf("%q kept as %q", data, s)
		}
		if !b.Truncated() || len(s) > 2*half*3+80 {
			t.Fatalf("%q kept as %q", data, s)
		}
	})
}
