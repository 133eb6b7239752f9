package guardrails

import (
	"fmt"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// What a package's doc.go says of its imports, in two sentences a
// reader and this test both read (doc.go of this package describes
// them):
//
//	Of sandboxd's packages it imports only broker, grants and termfilter.
//	Of sandboxd's packages it imports none.
//	It must never import sandbox, landlock, openai-go or an HTTP client.
//
// The first is in every doc.go, once, and names exactly the packages of
// ours the package's production files import directly (relative to the
// module; the list ends at ".", ";" or ":", and a remark in parentheses
// is no item). The second is optional and may
// appear more than once (any subject before "must never import"); it is
// transitive, like the import rules, and names packages of ours as the
// first does, "X/..." for X and everything under it, other packages by
// import path, or one of docAliases. Any other "never import(s)" phrase,
// and any "imports nothing/only/none" outside the first sentence, is a
// claim the test cannot read, and fails.

const (
	onlyLead  = "Of sandboxd's packages it imports "
	neverLead = "must never import "
)

// docAliases are the names a doc.go may use for what is not ours.
func docAliases() map[string]matcher {
	return map[string]matcher{
		"openai-go":         openai,
		"go-landlock":       libLandlock,
		"libseccomp-golang": libSeccomp,
		"an HTTP client":    httpClient,
	}
}

// docClaims is what one doc.go says of its package's imports.
type docClaims struct {
	only     []string // the first sentence's packages; nil when it says none
	onlySeen int      // how many first sentences there are
	never    []string // every "must never import" item
	stray    []string // claims in another form
}

// splitList splits "a, b and c" (or "or", or with a serial comma); a
// remark in parentheses is the reader's, not an item.
func splitList(s string) []string {
	s = regexp.MustCompile(`\s*\([^()]*\)`).ReplaceAllString(s, "")
	var out []string
	for _, part := range strings.Split(s, ",") {
		for _, item := range regexp.MustCompile(`\s+(?:and|or)\s+`).Split(part, -1) {
			item = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(item), "and "), "or ")
			if item != "" {
				out = append(out, strings.ReplaceAll(item, "/\u2026", "/..."))
			}
		}
	}
	return out
}

// readClaims reads a package comment (its text, any line breaks).
func readClaims(doc string) docClaims {
	// "X/..." holds full stops that end no sentence: spell it apart
	// while sentences are found.
	text := strings.ReplaceAll(strings.Join(strings.Fields(doc), " "), "/...", "/\u2026")
	var c docClaims
	only := regexp.MustCompile(regexp.QuoteMeta(onlyLead) + `(?:none\b|only ([^.;:]*)[.;:])`)
	for _, m := range only.FindAllStringSubmatch(text, -1) {
		c.onlySeen++
		c.only = append(c.only, splitList(m[1])...)
	}
	text = only.ReplaceAllString(text, "")
	// The list of a "must never import" runs to the end of its sentence
	// (a full stop before a space or the end: "github.com/x" stays whole).
	never := regexp.MustCompile(regexp.QuoteMeta(neverLead) + `(.*?)[.;](?:\s|$)`)
	for _, m := range never.FindAllStringSubmatch(text, -1) {
		c.never = append(c.never, splitList(m[1])...)
	}
	text = never.ReplaceAllString(text, "")
	stray := regexp.MustCompile(`(?i)\bnever imports?\b|\bimports? (?:nothing|only|none)\b`)
	c.stray = stray.FindAllString(text, -1)
	return c
}

// neverMatcher resolves one "must never import" item: an alias, a
// package of ours relative to the module (that package alone; "X/..."
// is X and every package under it, as the go command spells it), or
// another package the build knows (with what is under it: a module's
// major version is a path element).
func neverMatcher(g graph, item string) (matcher, bool) {
	if m, ok := docAliases()[item]; ok {
		return m, true
	}
	if rel, ok := strings.CutSuffix(item, "/..."); ok && g[module+"/"+rel] != nil {
		return ours(rel), true
	}
	if g[module+"/"+item] != nil {
		return exactly(item), true
	}
	if g[item] != nil && !isOurs(item) {
		return within(item), true
	}
	return nil, false
}

// checkDocClaims compares what each package's doc comment (docs, by
// import path; a package without a doc.go is absent) says with g.
func checkDocClaims(g graph, docs map[string]string) []string {
	const (
		ruleOnly  = "each doc.go names the packages of ours its package imports"
		ruleNever = "each doc.go's \"must never import\" holds"
	)
	var out []string
	for _, p := range sortedOurs(g) {
		if g[p].Name == "main" {
			continue
		}
		doc, ok := docs[p]
		if !ok {
			out = append(out, fmt.Sprintf("rule %q: %s has no doc.go with a package comment", ruleOnly, short(p)))
			continue
		}
		c := readClaims(doc)
		if c.onlySeen != 1 {
			out = append(out, fmt.Sprintf("rule %q: %s's doc.go has %d sentences %q..., want one", ruleOnly, short(p), c.onlySeen, onlyLead))
		}
		if p == module+"/internal/guardrails" {
			// Its doc.go states the other packages' rules and these forms.
			c.stray, c.never = nil, nil
		}
		for _, s := range c.stray {
			out = append(out, fmt.Sprintf("rule %q: %s's doc.go says %q outside the sentences the test reads", ruleOnly, short(p), s))
		}
		var imports []string
		for _, imp := range g[p].Imports {
			if isOurs(imp) {
				imports = append(imports, short(imp))
			}
		}
		for _, imp := range imports {
			if c.onlySeen == 1 && !slices.Contains(c.only, imp) {
				out = append(out, fmt.Sprintf("rule %q: %s imports %s, which its doc.go does not name", ruleOnly, short(p), imp))
			}
		}
		for _, named := range c.only {
			if !slices.Contains(imports, named) {
				out = append(out, fmt.Sprintf("rule %q: %s's doc.go names %s, which it does not import", ruleOnly, short(p), named))
			}
		}
		for _, item := range c.never {
			m, ok := neverMatcher(g, item)
			if !ok {
				out = append(out, fmt.Sprintf("rule %q: %s's doc.go names %q, which is no package", ruleNever, short(p), item))
				continue
			}
			reach(g, p, m, func(chain []string) {
				out = append(out, fmt.Sprintf("rule %q: %s: %s", ruleNever, item, chainString(chain)))
			})
		}
	}
	return out
}

// loadDocs reads the package comment of each package's doc.go.
func loadDocs(t *testing.T, g graph) map[string]string {
	t.Helper()
	docs := map[string]string{}
	fset := token.NewFileSet()
	for _, p := range sortedOurs(g) {
		if !slices.Contains(g[p].GoFiles, "doc.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(g[p].Dir, "doc.go"), nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Errorf("%s: %v", short(p), err)
			continue
		}
		if f.Doc != nil {
			docs[p] = f.Doc.Text()
		}
	}
	return docs
}

func TestDocClaims(t *testing.T) {
	g := loadGraph(t)
	for _, msg := range checkDocClaims(g, loadDocs(t, g)) {
		t.Error(msg)
	}
}

// TestDocClaimsCatch proves the doc.go rule fires, on a synthetic graph
// and doc comments that break it each way, and stays quiet on doc
// comments that hold.
func TestDocClaimsCatch(t *testing.T) {
	m := func(rel string) string { return module + "/" + rel }
	g := graph{}
	add := func(p string, imports ...string) { g[p] = &pkg{ImportPath: p, Name: "x", Imports: imports} }
	add(m("broker"), m("grants"), m("review"))
	add(m("review"), m("review/openai"))
	add(m("review/openai"), "github.com/openai/openai-go/v3")
	add("github.com/openai/openai-go/v3", "net/http")
	add("net/http")
	add(m("grants"))
	add(m("sandbox"), m("sandbox/detect"), m("grants"))
	add(m("sandbox/detect"), m("grants"))
	add(m("sandbox/confine"), m("sandbox/detect"))
	add(m("nodoc"))
	add(m("twice"))
	add(m("stray"))
	add(m("cmd/sandboxd"), m("broker"))
	g[m("cmd/sandboxd")].Name = "main"
	docs := map[string]string{
		// Names grants, not review; says what it never imports, wrongly
		// (through review), and names what is no package.
		m("broker"):        "Package broker decides. Of sandboxd's packages it imports\nonly grants and ruletext. It must never import review/openai, openai-go, an HTTP client or nosuch.",
		m("review"):        "Of sandboxd's packages it imports only review/openai.",
		m("review/openai"): "Of sandboxd's packages it imports none.",
		m("grants"):        "Of sandboxd's packages it imports none, so every package may use it. It must never import sandbox/..., broker or review.",
		// Holds: "sandbox" is that package alone, and the remark in
		// parentheses is no item.
		m("sandbox"):        "Of sandboxd's packages it imports only grants and\nsandbox/detect (the detector). It must never import sandbox/confine (the helper), review/... or openai-go.",
		m("sandbox/detect"): "Of sandboxd's packages it imports only grants; it must never import sandbox, sandbox/confine or broker.",
		// Breaks: sandbox/... holds sandbox/detect.
		m("sandbox/confine"): "Of sandboxd's packages it imports only sandbox/detect. It must never import sandbox/..., broker or review.",
		m("twice"):           "Of sandboxd's packages it imports none. Of sandboxd's packages it imports none.",
		m("stray"):           "Of sandboxd's packages it imports none. It never imports broker, and imports nothing else.",
	}
	all := strings.Join(checkDocClaims(g, docs), "\n")
	for _, want := range []string{
		`names the packages of ours its package imports": broker imports review, which its doc.go does not name`,
		`names the packages of ours its package imports": broker's doc.go names ruletext, which it does not import`,
		`"must never import\" holds": review/openai: broker → review → review/openai`,
		`"must never import\" holds": openai-go: broker → review → review/openai → github.com/openai/openai-go/v3`,
		`"must never import\" holds": an HTTP client: broker → review → review/openai → github.com/openai/openai-go/v3`,
		`"must never import\" holds": broker's doc.go names "nosuch", which is no package`,
		`"must never import\" holds": sandbox/...: sandbox/confine → sandbox/detect`,
		`nodoc has no doc.go with a package comment`,
		`twice's doc.go has 2 sentences`,
		`stray's doc.go says "never imports" outside the sentences the test reads`,
		`stray's doc.go says "imports nothing" outside the sentences the test reads`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no violation %s\ngot:\n%s", want, all)
		}
	}
	for _, quiet := range []string{"review's", "review/openai's", "grants", "sandbox's", "sandbox/detect's", "sandbox/detect imports", "cmd/sandboxd", ": review → ", "sandbox → "} {
		if strings.Contains(all, quiet) {
			t.Errorf("a doc.go that holds is reported (%s):\n%s", quiet, all)
		}
	}
}
