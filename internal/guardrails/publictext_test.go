package guardrails

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
)

// sentenceKeys are the JSON fields of a golden (a report, an event) that
// hold sentences sandboxd writes for people: the other string fields are
// names (a path the command touched, a destination, a command, the
// workspace, where a moved file is kept), which may be anything.
var sentenceKeys = map[string]bool{
	"rationale": true, "reason": true, "why": true, "error": true, "exposed": true,
	"degraded": true, "containment": true, "toml": true, "capture_why": true,
	"credential_scan": true, "workspace_note": true, "message": true, "hint": true,
	"note": true, "refuses": true, "detail": true,
}

// testdataInputs are testdata files that are inputs of a test, not what
// sandboxd says: a corpus `review eval` reads, fuzz seeds. Any other
// testdata file must be of a kind publicSentences knows.
func testdataInput(rel string) bool {
	return strings.Contains(rel, "/testdata/fuzz/") || rel == "cmd/sandboxd/testdata/review-eval.jsonl"
}

// publicSentence is one sentence of a golden file, and where it is.
type publicSentence struct {
	where, text string
}

// publicSentences extracts the public sentences of one testdata file:
// in a .golden of JSON values (lines starting "# " name the cases), the
// strings under sentenceKeys; in any other .golden, every line (stderr
// as a person sees it, rationales, the reviewer's prompt); in a .txtar
// script, the text each stdout or stderr assertion expects (not the
// negated ones) and the archive's want* files (what cmp compares stdout
// with).
func publicSentences(rel string, b []byte) ([]publicSentence, error) {
	switch {
	case strings.HasSuffix(rel, ".golden"):
		if s, ok := jsonSentences(rel, b); ok {
			return s, nil
		}
		var out []publicSentence
		for i, l := range strings.Split(string(b), "\n") {
			if strings.TrimSpace(l) != "" {
				out = append(out, publicSentence{fmt.Sprintf("%s:%d", rel, i+1), l})
			}
		}
		return out, nil
	case strings.HasSuffix(rel, ".txtar"):
		return scriptSentences(rel, b), nil
	}
	return nil, fmt.Errorf("%s: neither a golden nor a script nor a listed input: say in publictext_test.go what its public sentences are", rel)
}

// jsonSentences reads a golden made of JSON values, if it is one.
func jsonSentences(rel string, b []byte) ([]publicSentence, bool) {
	var body bytes.Buffer
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if !strings.HasPrefix(l, "# ") {
			body.WriteString(l)
		}
	}
	dec := json.NewDecoder(&body)
	var out []publicSentence
	n := 0
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		n++
		collect(fmt.Sprintf("%s#%d", rel, n), "", v, &out)
	}
	return out, n > 0
}

// collect appends the strings under sentenceKeys in v.
func collect(where, key string, v any, out *[]publicSentence) {
	switch x := v.(type) {
	case map[string]any:
		for k, vv := range x {
			collect(where+"."+k, k, vv, out)
		}
	case []any:
		for _, vv := range x {
			collect(where, key, vv, out)
		}
	case string:
		if sentenceKeys[key] {
			*out = append(*out, publicSentence{where, x})
		}
	}
}

// scriptAssert is a txtar script's stdout or stderr assertion.
var scriptAssert = regexp.MustCompile(`^\s*(stdout|stderr)\s+'((?:[^']|'')*)'`)

// regexpUnquote turns an assertion's pattern back into the text it
// matches, near enough to search: anchors and escapes go.
func regexpUnquote(p string) string {
	p = strings.ReplaceAll(p, "''", "'")
	for _, a := range []string{`\A`, `\z`, `\n`} {
		p = strings.ReplaceAll(p, a, " ")
	}
	p = strings.TrimPrefix(strings.TrimSuffix(p, "$"), "^")
	p = regexp.MustCompile(`\\S[*+]`).ReplaceAllString(p, "/x")
	return regexp.MustCompile(`\\(.)`).ReplaceAllString(p, "$1")
}

func scriptSentences(rel string, b []byte) []publicSentence {
	ar := txtar.Parse(b)
	var out []publicSentence
	for i, l := range strings.Split(string(ar.Comment), "\n") {
		if m := scriptAssert.FindStringSubmatch(l); m != nil {
			out = append(out, publicSentence{fmt.Sprintf("%s:%d", rel, i+1), regexpUnquote(m[2])})
		}
	}
	for _, f := range ar.Files {
		if strings.HasPrefix(filepath.Base(f.Name), "want") {
			for _, l := range strings.Split(string(f.Data), "\n") {
				out = append(out, publicSentence{rel + ":" + f.Name, l})
			}
		}
	}
	return out
}

// goErrorText are the marks of an error's own text: an os or syscall
// operation before a path or descriptor, an errno glued on with a
// colon, a library's prefix. sandboxd says a syscall's reason in words
// of its own, or in parentheses after them, never like this.
var goErrorText = []*regexp.Regexp{
	regexp.MustCompile(`\b(open|openat|stat|lstat|fstatat|read|write|mkdir|mkdirat|remove|unlinkat|rename|renameat|readlink|readlinkat|chmod|chown|symlink|link|close|seek|sync|truncate|mount|unmount|pivot_root|socket|bind|listen|accept|connect|fcntl|ioctl) (/|\||\$[A-Z])`),
	regexp.MustCompile(`\b(read|write) \|\d`),
	regexp.MustCompile(`: (no such file or directory|permission denied|operation not permitted|file exists|not a directory|is a directory|directory not empty|bad file descriptor|invalid argument|too many open files|input/output error|read-only file system|resource temporarily unavailable|broken pipe|connection refused|no space left on device|too many levels of symbolic links|file name too long|text file busy|exec format error|device or resource busy)`),
	// A library's prefix starts the text or follows a space: "x.toml: "
	// is a file of the user's.
	regexp.MustCompile(`(^|[\s(])(json|toml|yaml|strconv\.[A-Za-z]+|exec|flate|gzip|x509|tls|http|bufio\.Scanner): `),
	regexp.MustCompile(`fork/exec |dial (tcp|udp|unix)|context deadline exceeded|context canceled|cannot unmarshal|Go struct field|unexpected end of JSON input|invalid character '|i/o timeout|use of closed network connection`),
}

// stateText are the marks of a path under sandboxd's own state (STATE
// is $XDG_STATE_HOME/sandboxd, ~/.local/state/sandboxd by default: the
// journals and staging of commits (txn), the private caches (cache),
// the quarantine, the model reviewer's meters) and data directory. A
// report's "quarantine" field names where a moved file of the user's is
// kept, on purpose; it is not a sentence.
var stateText = []*regexp.Regexp{
	regexp.MustCompile(`/\.local/(state|share)/sandboxd\b`),
	regexp.MustCompile(`/sandboxd/(txn|cache|quarantine|review|grants|sessions)/`),
	regexp.MustCompile(`\.(journal|stage|done|lock|use)\b`),
}

// ownErrorPrefixes are the prefixes the module's production code puts
// before a wrapped error (fmt.Errorf("landlock: ...%w", ...)): the name
// of the package or step that failed. "sandboxd" is not one of them:
// every line sandboxd's CLI writes starts with it.
func ownErrorPrefixes(root string) ([]string, error) {
	set := map[string]bool{}
	prefix := regexp.MustCompile(`^([a-z][a-z0-9]*): `)
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Errorf" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil || !strings.Contains(s, "%w") {
				return true
			}
			if m := prefix.FindStringSubmatch(s); m != nil && m[1] != "sandboxd" {
				set[m[1]] = true
			}
			return true
		})
		return nil
	})
	var out []string
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, err
}

// publicTextProblems lists what is wrong with one sentence: each mark
// of an internal error's text or of sandboxd's state in it. A sentence
// starting "sandboxd: " is a CLI line; the rest is checked.
func publicTextProblems(s string, prefixes []string) []string {
	s = strings.TrimPrefix(strings.TrimSpace(s), "sandboxd: ")
	var out []string
	for _, re := range goErrorText {
		if m := re.FindString(s); m != "" {
			out = append(out, fmt.Sprintf("Go error text %q", m))
		}
	}
	for _, re := range stateText {
		if m := re.FindString(s); m != "" {
			out = append(out, fmt.Sprintf("sandboxd's state %q", m))
		}
	}
	for _, p := range prefixes {
		// A package's prefix starts an error's text, or follows the
		// prefix of the error that wraps it.
		if strings.HasPrefix(s, p+": ") || strings.Contains(s, ": "+p+": ") {
			out = append(out, fmt.Sprintf("the error prefix %q", p+": "))
		}
	}
	return out
}

// TestPublicTextCarriesNoInternalText: no public sentence pinned in a
// golden file or script (what a report, an event, sandboxd's stderr or
// the reviewer's prompt says) carries an internal error's text or a
// path of sandboxd's state. The cause of a failure goes to the log.
func TestPublicTextCarriesNoInternalText(t *testing.T) {
	root := moduleRoot(t)
	prefixes, err := ownErrorPrefixes(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"landlock", "sandbox", "layer"} {
		if !contains(prefixes, want) {
			t.Fatalf("the module's error prefixes %q lack %q: ownErrorPrefixes is broken", prefixes, want)
		}
	}
	files, sentences := 0, 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if !strings.Contains("/"+rel, "/testdata/") || testdataInput(rel) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		ss, err := publicSentences(rel, b)
		if err != nil {
			t.Error(err)
			return nil
		}
		files++
		sentences += len(ss)
		for _, s := range ss {
			for _, problem := range publicTextProblems(s.text, prefixes) {
				t.Errorf("%s: %s in the public sentence %q", s.where, problem, s.text)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d golden files, %d public sentences, %d error prefixes of the module's own", files, sentences, len(prefixes))
	if files < 10 || sentences < 200 {
		t.Fatalf("read %d golden files and %d sentences: the walk missed the goldens", files, sentences)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestPublicTextCatches: each mark the guardrail knows fires on the
// kind of sentence it is for, and not on sandboxd's own words.
func TestPublicTextCatches(t *testing.T) {
	prefixes := []string{"landlock", "sandbox", "layer"}
	for _, bad := range []string{
		"sandboxd: read the report: open /tmp/r.json: no such file or directory",
		"cannot enforce the policy on this kernel: landlock: not supported by this kernel",
		"sandboxd: sandbox: state directory: mkdir /home/u/.local/state/sandboxd: permission denied",
		"the interrupted commit failed: layer: recover 0123: unreadable journal",
		"stdin relay: read |0: bad file descriptor",
		"x.json is not a report: json: cannot unmarshal string into Go struct field",
		"the model could not be reached: dial tcp 10.0.0.1:443: i/o timeout",
		"not committed: cannot be reached in the workspace: /home/u/.local/state/sandboxd/txn/0123.stage/x",
		"private cache /home/u/.local/state/sandboxd/cache/ab12: lstat failed",
		"corpus: strconv.Atoi: parsing \"x\": invalid syntax",
		"fork/exec /bin/x: exec format error",
		"the policy could not be read: toml: expected a table",
	} {
		if len(publicTextProblems(bad, prefixes)) == 0 {
			t.Errorf("not caught: %q", bad)
		}
	}
	for _, good := range []string{
		"sandboxd: workspace /home/u/missing does not exist",
		"sandboxd: the report could not be written to /tmp/x/r.json (no such file or directory)",
		"sandboxd: /tmp/x/notexec.sh: not executable (permission denied)",
		"namespaces are unavailable here (operation not permitted)",
		"sandboxd: denied write_file /etc/x",
		"/home/u/.config/sandboxd/policy.toml:2: limits.pids: must not be negative (got -1)",
		"your policy: boundaries: rule \"fs x\" is not one sandboxd can apply (run with -v to log why)",
		"sandboxd's own configuration and state are never opened to a sandboxed command",
		"sandboxd: /tmp/x/no-such-policy.toml: cannot read policy file (no such file or directory)",
	} {
		if p := publicTextProblems(good, prefixes); len(p) != 0 {
			t.Errorf("%q flagged: %q", good, p)
		}
	}
}
