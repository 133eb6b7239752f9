package gitconfig

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// parseCase is one Parse input with its expected result. want lists entries
// as formatEntry prints them. When errLine is non-zero Parse must fail on
// that line (git's "bad config line N" where git fails too) with a message
// containing errMsg; stricter marks errors git does not share.
type parseCase struct {
	name     string
	in       string
	want     []string
	errLine  int
	errMsg   string
	stricter bool
}

// parseCases is shared by TestParse and TestParseAgreesWithGit, so every
// expectation here is also checked against the installed git.
var parseCases = []parseCase{
	// Empty and comment-only input.
	{name: "empty", in: ""},
	{name: "blank lines", in: "\n\n  \t\n"},
	{name: "comments", in: "# one\n; two\n\t# three [x]\n"},
	{name: "comment without newline", in: "# one"},
	{name: "header only", in: "[core]\n"},
	{name: "header without newline", in: "[core]"},

	// Section headers.
	{name: "basic", in: "[core]\n\tbare = false\n", want: []string{`2 core bare = "false"`}},
	{name: "section and key lower-cased", in: "[CoRe]\nFileMode = true\n", want: []string{`2 core filemode = "true"`}},
	{name: "subsection keeps case", in: "[remote \"Origin\"]\nURL = x\n", want: []string{`2 remote "Origin" url = "x"`}},
	{name: "subsection escapes", in: `[a "q\"b\\s"]k=v`, want: []string{`1 a "q\"b\\s" k = "v"`}},
	{name: "subsection drops other backslashes", in: `[a "\a\tb\n"]k=v`, want: []string{`1 a "atbn" k = "v"`}},
	{name: "subsection with spaces and symbols", in: "[a \" x ]; # = \"]k=v", want: []string{`1 a " x ]; # = " k = "v"`}},
	{name: "subsection with dots", in: "[url \"https://Example.com/\"]\ninsteadOf = gh:\n", want: []string{`2 url "https://Example.com/" insteadof = "gh:"`}},
	{name: "subsection utf-8", in: "[branch \"zöé\"]k=v", want: []string{`1 branch "zöé" k = "v"`}},
	{name: "tabs and spaces before subsection", in: "[a \t \"b\"]k=v", want: []string{`1 a "b" k = "v"`}},
	{name: "legacy subsection lower-cased", in: "[Branch.Main]\nMerge = refs/heads/main\n", want: []string{`2 branch "main" merge = "refs/heads/main"`}},
	{name: "legacy subsection with dots", in: "[a.B.c]k=v", want: []string{`1 a "b.c" k = "v"`}},
	{name: "legacy and quoted subsection", in: "[A.B \"C\"]k=v", want: []string{`1 a "b.C" k = "v"`}},
	{name: "legacy subsection with dot in it", in: "[a. \"b\"]k=v", want: []string{`1 a ".b" k = "v"`}},
	{name: "section with digits and dash", in: "[x-1]k=v", want: []string{`1 x-1 k = "v"`}},
	{name: "section starting with digit", in: "[1x]k=v", want: []string{`1 1x k = "v"`}},
	{name: "key after header on same line", in: "[core] bare = true\n", want: []string{`1 core bare = "true"`}},
	{name: "key right after header", in: "[core]bare", want: []string{`1 core bare`}},
	{name: "key after subsection header", in: "[a \"b\"]\tk=v", want: []string{`1 a "b" k = "v"`}},
	{name: "comment after header", in: "[a] # c\nk=v", want: []string{`2 a k = "v"`}},
	{name: "second header replaces first", in: "[a]\nk=1\n[b \"s\"]\nk=2\n[a]\nk=3\n", want: []string{
		`2 a k = "1"`, `4 b "s" k = "2"`, `6 a k = "3"`,
	}},
	{name: "indented header", in: "  \t[a]\n  k=v", want: []string{`2 a k = "v"`}},

	// Keys.
	{name: "no value is true", in: "[a]\nk\n", want: []string{`2 a k`}},
	{name: "no value at EOF", in: "[a]\nk", want: []string{`2 a k`}},
	{name: "no value trailing blanks", in: "[a]\nk \t\n", want: []string{`2 a k`}},
	{name: "empty value", in: "[a]\nk =\n", want: []string{`2 a k = ""`}},
	{name: "empty value at EOF", in: "[a]\nk=", want: []string{`2 a k = ""`}},
	{name: "blank value", in: "[a]\nk =   \n", want: []string{`2 a k = ""`}},
	{name: "key digits and dash", in: "[a]\nk-2x = v\n", want: []string{`2 a k-2x = "v"`}},
	{name: "key tab before equals", in: "[a]\nk\t= v", want: []string{`2 a k = "v"`}},
	{name: "multiple keys", in: "[a]\nx=1\ny\nz = 3\n", want: []string{`2 a x = "1"`, `3 a y`, `4 a z = "3"`}},

	// Values.
	{name: "trimmed", in: "[a]\nk =  \t v \t \n", want: []string{`2 a k = "v"`}},
	{name: "internal spaces kept", in: "[a]\nk = a  b   c\n", want: []string{`2 a k = "a  b   c"`}},
	{name: "internal tab becomes space", in: "[a]\nk = a\t\tb\n", want: []string{`2 a k = "a  b"`}},
	{name: "vertical tab and form feed kept", in: "[a]\nk = \va\fb\v\n", want: []string{`2 a k = "\va\fb\v"`}},
	{name: "equals in value", in: "[a]\nk = a=b\n", want: []string{`2 a k = "a=b"`}},
	{name: "hash comment", in: "[a]\nk = v # c\n", want: []string{`2 a k = "v"`}},
	{name: "semicolon comment", in: "[a]\nk = v;c\n", want: []string{`2 a k = "v"`}},
	{name: "comment ignores escapes and quotes", in: "[a]\nk = v # \\q \"\n", want: []string{`2 a k = "v"`}},
	{name: "quoted", in: "[a]\nk = \"  v  \"\n", want: []string{`2 a k = "  v  "`}},
	{name: "quoted comment chars", in: "[a]\nk = \"a # b ; c\"\n", want: []string{`2 a k = "a # b ; c"`}},
	{name: "quoted tab kept", in: "[a]\nk = \"a\tb\"\n", want: []string{`2 a k = "a\tb"`}},
	{name: "partly quoted", in: "[a]\nk = a\" b \"c\n", want: []string{`2 a k = "a b c"`}},
	{name: "two quoted parts", in: "[a]\nk = \"a\"  \"b\"\n", want: []string{`2 a k = "a  b"`}},
	{name: "empty quotes", in: "[a]\nk = \"\"\n", want: []string{`2 a k = ""`}},
	{name: "empty quotes then text", in: "[a]\nk = \"\"  x\n", want: []string{`2 a k = "x"`}},
	{name: "space kept before quotes", in: "[a]\nk = x  \"\"  \n", want: []string{`2 a k = "x  "`}},
	{name: "escapes", in: `[a]` + "\n" + `k = a\nb\tc\bd\\e\"f` + "\n", want: []string{`2 a k = "a\nb\tc\bd\\e\"f"`}},
	{name: "escapes in quotes", in: "[a]\nk = \"\\n\\\"\\\\\"\n", want: []string{`2 a k = "\n\"\\"`}},
	{name: "continuation", in: "[a]\nk = a\\\nb\nj = c\n", want: []string{`2 a k = "ab"`, `4 a j = "c"`}},
	{name: "continuation keeps spaces", in: "[a]\nk = a \\\n  b\n", want: []string{`2 a k = "a   b"`}},
	{name: "continuation in quotes", in: "[a]\nk = \"a\\\nb\"\n", want: []string{`2 a k = "ab"`}},
	{name: "continuation then comment", in: "[a]\nk = a\\\n# not a comment line\n", want: []string{`2 a k = "a"`}},
	{name: "continuation to EOF", in: "[a]\nk = a\\", want: []string{`2 a k = "a"`}},
	{name: "continuation then EOF after newline", in: "[a]\nk = a\\\n", want: []string{`2 a k = "a"`}},
	{name: "backslash CRLF continues", in: "[a]\r\nk = a\\\r\nb\r\n", want: []string{`2 a k = "ab"`}},
	{name: "CRLF", in: "[a]\r\nk = v\r\nj\r\n", want: []string{`2 a k = "v"`, `3 a j`}},
	{name: "lone CR is blank", in: "[a]\nk = a\rb\r\n", want: []string{`2 a k = "a b"`}},
	{name: "quoted CR kept", in: "[a]\nk = \"\r\"\n", want: []string{`2 a k = "\r"`}},
	{name: "utf-8 value", in: "[a]\nk = héllo wörld\n", want: []string{`2 a k = "héllo wörld"`}},
	{name: "invalid utf-8 value", in: "[a]\nk = \xff\xfe\n", want: []string{`2 a k = "\xff\xfe"`}},
	{name: "BOM", in: "\xEF\xBB\xBF[a]\nk=v\n", want: []string{`2 a k = "v"`}},
	{name: "BOM then blank", in: "\xEF\xBB\xBF\n[a]k", want: []string{`2 a k`}},
	{name: "line numbers after continuations", in: "[a]\nx = 1\\\n2\\\n3\ny = 4\n", want: []string{`2 a x = "123"`, `5 a y = "4"`}},
	{name: "real config", in: "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n[remote \"origin\"]\n\turl = git@github.com:o/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n",
		want: []string{
			`2 core repositoryformatversion = "0"`, `3 core filemode = "true"`, `4 core bare = "false"`,
			`5 core logallrefupdates = "true"`, `7 remote "origin" url = "git@github.com:o/r.git"`,
			`8 remote "origin" fetch = "+refs/heads/*:refs/remotes/origin/*"`,
			`10 branch "main" remote = "origin"`, `11 branch "main" merge = "refs/heads/main"`,
		}},

	// Errors git shares, with git's line numbers.
	{name: "empty header", in: "[]\nk=v", errLine: 1, errMsg: "empty section name"},
	{name: "unterminated header at EOF", in: "[a", errLine: 2, errMsg: "unterminated section header"},
	{name: "header broken by newline", in: "[a\n]k=v", errLine: 1, errMsg: "not closed"},
	{name: "header blank then newline", in: "[a \n\"b\"]", errLine: 1, errMsg: "not closed"},
	{name: "unquoted subsection", in: "[a b]\nk=v", errLine: 1, errMsg: "want a quoted subsection"},
	{name: "invalid section char", in: "[a_b]\nk=v", errLine: 1, errMsg: "'_' in section name"},
	{name: "non-ASCII section", in: "[é]\nk=v", errLine: 1, errMsg: "byte 0xc3 in section name"},
	{name: "subsection unterminated at EOF", in: "[a \"b", errLine: 1, errMsg: "unterminated subsection"},
	{name: "subsection broken by newline", in: "[a \"b\n\"]", errLine: 1, errMsg: "unterminated subsection"},
	{name: "subsection backslash newline", in: "[a \"b\\\nc\"]", errLine: 1, errMsg: "unterminated subsection"},
	{name: "subsection backslash EOF", in: "[a \"b\\", errLine: 1, errMsg: "unterminated subsection"},
	{name: "space before closing bracket", in: "[a \"b\" ]\nk=v", errLine: 1, errMsg: "want ']'"},
	{name: "no closing bracket", in: "[a \"b\"\nk=v", errLine: 2, errMsg: "want ']'"},
	{name: "stray bracket after header", in: "[a]]\nk=v", errLine: 1, errMsg: "unexpected ']'"},
	{name: "key starts with digit", in: "[a]\n1k = v\n", errLine: 2, errMsg: "unexpected '1'"},
	{name: "key starts with dash", in: "[a]\n-k = v\n", errLine: 2, errMsg: "unexpected '-'"},
	{name: "key with underscore", in: "[a]\nk_x = v\n", errLine: 2, errMsg: "'_' after key \"k\""},
	{name: "key with dot", in: "[a]\nk.x = v\n", errLine: 2, errMsg: "'.' after key"},
	{name: "key then word", in: "[a]\nk v\n", errLine: 2, errMsg: "'v' after key"},
	{name: "key then comment", in: "[a]\nk ; c\n", errLine: 2, errMsg: "';' after key"},
	{name: "key then hash", in: "[a]\nk # c\n", errLine: 2, errMsg: "'#' after key"},
	{name: "key then CR", in: "[a]\nk\r=v\n", errLine: 2, errMsg: "byte 0x0d after key"},
	{name: "key then vertical tab", in: "[a]\nk\v=v\n", errLine: 2, errMsg: "byte 0x0b after key"},
	{name: "non-ASCII key", in: "[a]\nkë = v\n", errLine: 2, errMsg: "after key"},
	{name: "value without key", in: "[a]\n= v\n", errLine: 2, errMsg: "unexpected '='"},
	{name: "stray quote", in: "[a]\n\"k\" = v\n", errLine: 2, errMsg: "unexpected '\"'"},
	{name: "unknown escape", in: "[a]\nk = a\\qb\n", errLine: 2, errMsg: `unknown escape \'q'`},
	{name: "escaped CR", in: "[a]\nk = a\\\rb\n", errLine: 2, errMsg: "unknown escape"},
	{name: "escaped space", in: "[a]\nk = a\\ b\n", errLine: 2, errMsg: "unknown escape"},
	{name: "unknown escape in quotes", in: "[a]\nk = \"\\x\"\n", errLine: 2, errMsg: "unknown escape"},
	{name: "unterminated quote", in: "[a]\nk = \"abc\nj = 1\n", errLine: 2, errMsg: "unterminated quoted string"},
	{name: "unterminated quote at EOF", in: "[a]\nk = \"abc", errLine: 2, errMsg: "unterminated quoted string"},
	{name: "unterminated quote over continuation", in: "[a]\nk = \"a\\\nb\nc", errLine: 3, errMsg: "unterminated quoted string"},
	{name: "quote in comment does not count", in: "[a]\nk = \"a;b\" ; \"\nj = \"x\n", errLine: 3, errMsg: "unterminated"},
	{name: "partial BOM", in: "\xEF\xBB[a]\nk=v\n", errLine: 1, errMsg: "byte order mark"},
	{name: "partial BOM at EOF", in: "\xEF", errLine: 2, errMsg: "byte order mark"},
	{name: "BOM not at start", in: "[a]\n\xEF\xBB\xBFk=v\n", errLine: 2, errMsg: "byte 0xef"},
	{name: "error after entries", in: "[a]\nk=1\nj=2\n!\n", errLine: 4, errMsg: "unexpected '!'"},

	// Errors of this package only: git accepts these.
	{name: "key before section", in: "k = v\n[a]\n", errLine: 1, errMsg: "before any section", stricter: true},
	{name: "key before section after comment", in: "# c\n\n  k\n", errLine: 3, errMsg: "before any section", stricter: true},
	{name: "NUL in value", in: "[a]\nk = a\x00b\n", errLine: 2, errMsg: "NUL", stricter: true},
	{name: "NUL in comment", in: "# \x00\n[a]\nk=v", errLine: 1, errMsg: "NUL", stricter: true},
	{name: "NUL in subsection", in: "[a]\n[b \"x\x00y\"]\n", errLine: 2, errMsg: "NUL", stricter: true},
	{name: "empty quoted subsection", in: "[a \"\"]\nk=v", errLine: 1, errMsg: "empty subsection", stricter: true},
	{name: "empty legacy subsection", in: "[a.]\nk=v", errLine: 1, errMsg: "empty subsection", stricter: true},
	{name: "dot only", in: "[.]\nk=v", errLine: 1, errMsg: "empty section", stricter: true},
	{name: "leading dot", in: "[.x]\nk=v", errLine: 1, errMsg: "empty section", stricter: true},
	{name: "subsection without section", in: "[ \"x\"]\nk=v", errLine: 1, errMsg: "empty section", stricter: true},
}

// formatEntry prints e for the tables: line, section, quoted subsection if
// any, key, and " = " with the quoted value unless NoValue.
func formatEntry(e Entry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", e.Line, e.Section)
	if e.Subsection != "" {
		fmt.Fprintf(&b, " %q", e.Subsection)
	}
	b.WriteString(" " + e.Key)
	if !e.NoValue {
		fmt.Fprintf(&b, " = %q", e.Value)
	}
	return b.String()
}

func formatEntries(entries []Entry) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, formatEntry(e))
	}
	return out
}

func TestParse(t *testing.T) {
	seen := make(map[string]bool)
	for _, tc := range parseCases {
		if seen[tc.name] {
			t.Fatalf("duplicate case name %q", tc.name)
		}
		seen[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.in))
			if tc.errLine == 0 {
				if err != nil {
					t.Fatalf("Parse(%q): %v", tc.in, err)
				}
				if g := formatEntries(got); !slices.Equal(g, tc.want) {
					t.Errorf("Parse(%q)\n got %q\nwant %q", tc.in, g, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse(%q) = %q, want error on line %d", tc.in, formatEntries(got), tc.errLine)
			}
			if got != nil {
				t.Errorf("Parse(%q) returned entries with an error", tc.in)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Parse(%q) error %v is %T, want *SyntaxError", tc.in, err, err)
			}
			if se.Line != tc.errLine || se.stricter != tc.stricter {
				t.Errorf("Parse(%q) error on line %d (stricter %v), want line %d (stricter %v): %v",
					tc.in, se.Line, se.stricter, tc.errLine, tc.stricter, err)
			}
			if want := fmt.Sprintf("line %d: ", tc.errLine); !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
			if !strings.Contains(err.Error(), tc.errMsg) {
				t.Errorf("error %q does not contain %q", err, tc.errMsg)
			}
		})
	}
}

func TestParseFields(t *testing.T) {
	// The tables compare a printed form; pin the struct itself once.
	got, err := Parse([]byte("[Remote \"Up\\\"s\"]\n\tPushURL = \"a b\" # c\n[Core]\n\tBare\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Section: "remote", Subsection: `Up"s`, Key: "pushurl", Value: "a b", Line: 2},
		{Section: "core", Key: "bare", NoValue: true, Line: 4},
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestParseSizeLimit(t *testing.T) {
	ok := append([]byte("[a]\nk = v\n#"), bytes.Repeat([]byte{'x'}, MaxSize-11)...)
	if len(ok) != MaxSize {
		t.Fatalf("test input is %d bytes", len(ok))
	}
	if got, err := Parse(ok); err != nil || len(got) != 1 {
		t.Errorf("Parse(%d bytes) = %d entries, %v; want 1 entry", len(ok), len(got), err)
	}
	tooBig := append(ok, '\n')
	got, err := Parse(tooBig)
	if err == nil || got != nil {
		t.Fatalf("Parse(%d bytes) = %d entries, %v; want error", len(tooBig), len(got), err)
	}
	if !strings.Contains(err.Error(), "limit") {
		t.Errorf("error %q does not mention the limit", err)
	}
}

// gitResult is what `git config --list --null` made of a file: names holds
// "name\nvalue" or, for a key without "=", "name"; errLine is the line of
// git's "bad config line N", 0 when git read the file.
type gitResult struct {
	names   []string
	errLine int
}

var badLine = regexp.MustCompile(`bad config line (\d+) in file`)

// runGit asks git to read data as a config file, with no system, global or
// included config and no repository around it.
func runGit(tb testing.TB, git string, data []byte) gitResult {
	tb.Helper()
	dir := tb.TempDir()
	file := filepath.Join(dir, "config")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(git, "config", "--no-includes", "--file", file, "--list", "--null")
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"XDG_CONFIG_HOME=" + dir,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull,
		"GIT_CEILING_DIRECTORIES=" + filepath.Dir(dir),
		"LC_ALL=C",
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		m := badLine.FindSubmatch(stderr.Bytes())
		if m == nil {
			tb.Fatalf("git config on %q: %v: %s", data, err, stderr.Bytes())
		}
		n, _ := strconv.Atoi(string(m[1]))
		return gitResult{errLine: n}
	}
	var names []string
	for _, rec := range bytes.SplitAfter(stdout.Bytes(), []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		if rec[len(rec)-1] != 0 {
			tb.Fatalf("git config on %q: unterminated record %q", data, rec)
		}
		names = append(names, string(rec[:len(rec)-1]))
	}
	return gitResult{names: names}
}

// gitNames formats entries the way `git config --list --null` prints them.
func gitNames(entries []Entry) []string {
	var out []string
	for _, e := range entries {
		name := e.Section
		if e.Subsection != "" {
			name += "." + e.Subsection
		}
		name += "." + e.Key
		if !e.NoValue {
			name += "\n" + e.Value
		}
		out = append(out, name)
	}
	return out
}

// checkAgainstGit fails tb unless Parse and git agree on data: the same
// entries, or errors on the same line. Where Parse is deliberately stricter
// than git it only requires that, if strict is set, git accepted the input.
func checkAgainstGit(tb testing.TB, git string, data []byte, strict bool) {
	tb.Helper()
	got, err := Parse(data)
	g := runGit(tb, git, data)
	var se *SyntaxError
	switch {
	case err == nil:
		if g.errLine != 0 {
			tb.Fatalf("input %q: Parse accepted it, git failed on line %d", data, g.errLine)
		}
		if want := gitNames(got); !slices.Equal(want, g.names) {
			tb.Fatalf("input %q:\nParse %q\n  git %q", data, want, g.names)
		}
	case !errors.As(err, &se):
		tb.Fatalf("input %q: Parse: %v", data, err)
	case se.stricter:
		if strict && g.errLine != 0 {
			tb.Fatalf("input %q: git failed on line %d; the case expects git to accept what Parse refuses (%v)", data, g.errLine, err)
		}
	case g.errLine == 0:
		tb.Fatalf("input %q: Parse failed (%v), git accepted it: %q", data, err, g.names)
	case g.errLine != se.Line:
		tb.Fatalf("input %q: Parse failed on line %d (%v), git on line %d", data, se.Line, err, g.errLine)
	}
}

func TestParseAgreesWithGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			checkAgainstGit(t, git, []byte(tc.in), true)
		})
	}
	for i, seed := range fuzzSeeds {
		t.Run(fmt.Sprintf("seed%d", i), func(t *testing.T) {
			checkAgainstGit(t, git, []byte(seed), false)
		})
	}
}

func ExampleParse() {
	entries, err := Parse([]byte(`[core]
	bare = false
	pager = "less -R" ; a comment
[remote "origin"]
	url = https://example.com/r.git
[alias]
	co = checkout
	up = !git fetch && \
	     git rebase
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range entries {
		fmt.Printf("%d: %s %q %s = %q\n", e.Line, e.Section, e.Subsection, e.Key, e.Value)
	}
	_, err = Parse([]byte("[core]\n\teditor = \"vim\n"))
	fmt.Println(err)
	// Output:
	// 2: core "" bare = "false"
	// 3: core "" pager = "less -R"
	// 5: remote "origin" url = "https://example.com/r.git"
	// 7: alias "" co = "checkout"
	// 8: alias "" up = "!git fetch &&       git rebase"
	// line 2: unterminated quoted string
}
