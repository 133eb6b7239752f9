package guardrails

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
	"github.com/sandboxd/sandboxd/internal/publictext"
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
// sandboxd says: a corpus `review eval` reads, fuzz seeds, the agents'
// own hook payloads and transcripts. Any other
// testdata file must be of a kind publicSentences knows.
func testdataInput(rel string) bool {
	return strings.Contains(rel, "/testdata/fuzz/") || rel == "cmd/sandboxd/testdata/review-eval.jsonl" ||
		strings.HasPrefix(rel, "adapters/agenthook/testdata/payloads/") || strings.HasPrefix(rel, "adapters/agenthook/testdata/") && strings.HasSuffix(rel, ".jsonl")
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

// TestPublicTextCarriesNoInternalText: no public sentence pinned in a
// golden file or script (what a report, an event, sandboxd's stderr or
// the reviewer's prompt says) carries an internal error's text or a
// path of sandboxd's state. The cause of a failure goes to the log.
func TestPublicTextCarriesNoInternalText(t *testing.T) {
	root := moduleRoot(t)
	prefixes, err := publictext.OwnErrorPrefixes(root)
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
			for _, problem := range publictext.Problems(s.text, prefixes) {
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
