package gitconfig

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// fuzzSeeds are corner cases beyond parseCases, seeded into both fuzz
// targets and checked against git by TestParseAgreesWithGit.
var fuzzSeeds = []string{
	"[a]k=\"",
	"[a]k=\\",
	"[a]\\",
	"\\",
	"\"",
	"\r",
	"\r\n\r\n",
	"[a]\rk=v",
	"[a]\r\nk=v\r",
	"[a]k=v\r\r\n",
	"[a]k=\"\\\r\n\"",
	"[a]k=\"\\\n",
	"[a \"b\"] k",
	"[a \"b\"]k=v;\"",
	"[a]k=v\\\\\n",
	"[a]k=\\\\\\\nx",
	"[a]k=\"a\"\"b\"",
	"[a]k=a\" \"",
	"[a]k=\"\" \"\" x",
	"[a]k= \\t",
	"[a]k=\\n ",
	"[a]k= \\\n \\\n x",
	"[a]k=\" \"\\\n\" \"",
	"\xEF\xBB\xBF",
	"\xEF\xBB\xBF\xEF\xBB\xBF[a]",
	"\xEF\xBB\xBF\n",
	"\xEF\xBB\xBF#",
	"\xEF\xBBx",
	"\xEF\n",
	"[a]\n\n\n\"",
	"[a]\n[b]\n[c]\nk",
	"[a-b.c-d \"e\\\\f\"]g-h=i",
	"[a \"\\\"\"]k=v",
	"[a \"]\"]k=v",
	"[a \"x\"\"]",
	"[a \"x\"]]",
	"[a \"x\"]#k\nk=v",
	"[a \"x\"];",
	"[a \"\r\"]k=v",
	"[a\r\"x\"]k=v",
	"[a\t\r \"x\"]k=v",
	"[a.b\t\"c\"]k=v",
	"[a. ]",
	"[A.B.C.D]k=v",
	"[a]\nK-1-2-Z = \"one\" ; two\n  k=\\\"quoted\\\"",
	"[a]k=\x7f\x80\xff",
	"[a]\x80",
	"[\x80]",
	"[a]k\x80",
	"k",
	"[]",
	"[",
	"]",
	"[a]k=v\n=",
	"[a]k = a # b \\\n c",
	"[include]\n\tpath = ../x\n[includeIf \"gitdir:/x/\"]\n\tpath = y\n",
	"[core]\n\tfsmonitor = \"./x\"\n\thooksPath = .h\n[alias]\n\tx = ! sh\n",
}

// FuzzParse checks that Parse never panics and that what it accepts is well
// formed, deterministic, and survives a round trip through writeConfig.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.in))
	}
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := Parse(data)
		again, err2 := Parse(data)
		if (err == nil) != (err2 == nil) || err != nil && err.Error() != err2.Error() || !slices.Equal(entries, again) {
			t.Fatalf("Parse(%q) not deterministic: %v, %v", data, err, err2)
		}
		if err != nil {
			if entries != nil {
				t.Fatalf("Parse(%q) returned entries and error %v", data, err)
			}
			return
		}
		checkEntries(t, data, entries)

		text := writeConfig(entries)
		back, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse(%q) = %q; rewritten as %q it fails: %v", data, formatEntries(entries), text, err)
		}
		if !sameIgnoringLine(entries, back) {
			t.Fatalf("round trip of %q via %q:\n got %q\nwant %q", data, text, formatEntries(back), formatEntries(entries))
		}
	})
}

// FuzzParseGit compares Parse with the installed git on every input. It is
// slow (one git process per input) and skips when git is missing.
func FuzzParseGit(f *testing.F) {
	git, err := exec.LookPath("git")
	if err != nil {
		f.Skip("git is not installed")
	}
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, tc := range parseCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkAgainstGit(t, git, data, false)
	})
}

// checkEntries checks the invariants every parsed entry holds.
func checkEntries(t *testing.T, data []byte, entries []Entry) {
	t.Helper()
	lines := 1 + strings.Count(string(data), "\n")
	prev := 1
	for _, e := range entries {
		if !validName(e.Section, false) {
			t.Errorf("Parse(%q): bad section %q", data, e.Section)
		}
		if !validName(e.Key, true) {
			t.Errorf("Parse(%q): bad key %q", data, e.Key)
		}
		if strings.ContainsRune(e.Subsection, '\n') || strings.ContainsRune(e.Subsection, 0) {
			t.Errorf("Parse(%q): bad subsection %q", data, e.Subsection)
		}
		if e.NoValue && e.Value != "" {
			t.Errorf("Parse(%q): NoValue entry with value %q", data, e.Value)
		}
		if e.Line < prev || e.Line > lines {
			t.Errorf("Parse(%q): line %d out of order or range (previous %d, %d lines)", data, e.Line, prev, lines)
		}
		prev = e.Line
	}
}

// validName reports whether s is non-empty lower-case ASCII letters, digits
// and '-', starting with a letter if key is set.
func validName(s string, key bool) bool {
	if s == "" || key && !('a' <= s[0] && s[0] <= 'z') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// writeConfig writes entries back as config text that Parse reads as the
// same entries: quoted subsections and values, with escapes.
func writeConfig(entries []Entry) []byte {
	var b strings.Builder
	for _, e := range entries {
		b.WriteString("[" + e.Section)
		if e.Subsection != "" {
			r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
			b.WriteString(` "` + r.Replace(e.Subsection) + `"`)
		}
		b.WriteString("]\n\t" + e.Key)
		if !e.NoValue {
			r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`, "\b", `\b`)
			b.WriteString(` = "` + r.Replace(e.Value) + `"`)
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

func sameIgnoringLine(a, b []Entry) bool {
	return slices.EqualFunc(a, b, func(x, y Entry) bool {
		x.Line, y.Line = 0, 0
		return x == y
	})
}
