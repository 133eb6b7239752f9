package guardrails

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// The supervisor side of a sandboxed run (package sandbox, its detector
// and the wire both sides share) lives inside a long-lived process that
// serves many callers: it enforces and reports, and never decides,
// handles the process's signals, reads the process's own context or
// writes to its standard streams. The helper (sandbox/confine) is a
// process of its own and is not part of it.

// supervisorRule names the import rule on the supervisor side.
const supervisorRule = "the supervisor side (sandbox, sandbox/detect, sandbox/internal/wire) never imports the helper, broker, review, session, netproxy, openai-go or net/http"

// supervisorPkgs are the supervisor side's packages, relative to the
// module (exactly these: sandbox/confine is the helper).
func supervisorPkgs() []string {
	return []string{"sandbox", "sandbox/detect", "sandbox/internal/wire"}
}

// supervisorForbidden is what the supervisor side never imports,
// directly or not: the helper, the decision side, the proxy, any HTTP
// client.
func supervisorForbidden(p string) bool {
	return ours("sandbox/confine", "broker", "review", "session", "netproxy")(p) || openai(p) || within("net/http")(p)
}

// supervisorUses are what the supervisor side's code never refers to,
// as package.Name: process-wide signal handling, sandboxd's own
// environment and working directory, its own standard streams, and the
// grant store and requests (issuing, storing and consuming grants is the
// broker's; the sandbox uses only the boundary vocabulary).
func supervisorUses() map[string]bool {
	return map[string]bool{
		"signal.Notify": true, "signal.NotifyContext": true, "signal.Ignore": true, "signal.Reset": true,
		"os.Getenv": true, "os.LookupEnv": true, "os.Environ": true, "os.Getwd": true, "os.Chdir": true,
		"os.Stdout": true, "os.Stderr": true, "os.Stdin": true,
		"grants.NewStore": true, "grants.Store": true, "grants.Grant": true, "grants.Request": true,
	}
}

// supervisorFindings checks one of the supervisor side's files, whatever
// its build tags: what it imports directly (the graph sees only this
// build's files) and what it refers to. The match is by the name the
// file writes, as a reader sees it.
func supervisorFindings(fset *token.FileSet, f *ast.File) []string {
	const rule = "the supervisor side never refers to process-wide signals, sandboxd's own environment, working directory or streams, or the grant store"
	var out []string
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); supervisorForbidden(p) {
			out = append(out, fmt.Sprintf("rule %q: %s imports %s", supervisorRule, fset.Position(imp.Pos()), short(p)))
		}
	}
	uses := supervisorUses()
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && uses[x.Name+"."+sel.Sel.Name] {
			out = append(out, fmt.Sprintf("rule %q: %s: %s.%s", rule, fset.Position(sel.Pos()), x.Name, sel.Sel.Name))
		}
		return true
	})
	return out
}

// TestSupervisorSource checks every non-test file of the supervisor
// side, for every build.
func TestSupervisorSource(t *testing.T) {
	g := loadGraph(t)
	fset := token.NewFileSet()
	for _, rel := range supervisorPkgs() {
		n := g[module+"/"+rel]
		if n == nil {
			continue // a rule about a package that does not exist yet passes
		}
		var names []string
		for _, name := range append(append(append([]string(nil), n.GoFiles...), n.CgoFiles...), n.IgnoredGoFiles...) {
			if !strings.HasSuffix(name, "_test.go") {
				names = append(names, name)
			}
		}
		files, err := parse(fset, n, names)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		for _, f := range files {
			for _, msg := range supervisorFindings(fset, f) {
				t.Error(msg)
			}
		}
	}
}

// TestSupervisorFindings proves the source rule fires on each kind of
// reference, and not on a method or field of the same name.
func TestSupervisorFindings(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want string // "" when the file breaks no rule
	}{
		{`package p; import "os/signal"; func f() { signal.Notify(nil) }`, "signal.Notify"},
		{`package p; import "os/signal"; func f() { signal.Ignore() }`, "signal.Ignore"},
		{`package p; import "os"; var e = os.Getenv("HOME")`, "os.Getenv"},
		{`package p; import "os"; func f() { os.Chdir("/") }`, "os.Chdir"},
		{`package p; import "os"; var w = os.Stderr`, "os.Stderr"},
		{`package p; import "x/grants"; var s *grants.Store`, "grants.Store"},
		{`package p; import "x/grants"; func f(r grants.Request) {}`, "grants.Request"},
		{`package p; import _ "github.com/sandboxd/sandboxd/sandbox/confine"`, "imports sandbox/confine"},
		{`package p; import _ "github.com/sandboxd/sandboxd/broker"`, "imports broker"},
		{`package p; import _ "github.com/openai/openai-go/v3"`, "imports github.com/openai/openai-go/v3"},
		{`package p; import _ "net/http/httptrace"`, "imports net/http/httptrace"},
		{`package p; import "x/grants"; var s grants.Surface`, ""},
		{`package p; import "os"; func f() { os.Exit(1) }`, ""},
		{`package p; func f(x t) { x.os.Getenv() }`, ""},
		{`package p; import _ "github.com/sandboxd/sandboxd/sandbox/detect"`, ""},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", tc.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(supervisorFindings(fset, f), "\n")
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: found %q, want %q", tc.src, got, tc.want)
		}
	}
}
