package guardrails

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/sandboxd/sandboxd"

// pkg is the part of `go list -json` the rules read.
type pkg struct {
	ImportPath     string
	Name           string
	Dir            string
	Standard       bool
	GoFiles        []string
	CgoFiles       []string
	IgnoredGoFiles []string
	TestGoFiles    []string
	XTestGoFiles   []string
	Imports        []string
	Error          *struct{ Err string }
}

// graph is every package of the module and everything they import.
type graph map[string]*pkg

// matcher says whether an import path is one a rule names.
type matcher func(path string) bool

// within matches each path and everything under it; a path without a dot
// in its first element that is not a standard package is taken as ours.
func within(paths ...string) matcher {
	return func(p string) bool {
		for _, w := range paths {
			if p == w || strings.HasPrefix(p, w+"/") {
				return true
			}
		}
		return false
	}
}

// ours matches our packages at and under each path relative to the module.
func ours(rel ...string) matcher {
	abs := make([]string, len(rel))
	for i, r := range rel {
		abs[i] = module + "/" + r
	}
	return within(abs...)
}

// exactly matches our packages at each path relative to the module, and
// not those under them.
func exactly(rel ...string) matcher {
	return func(p string) bool {
		for _, r := range rel {
			if p == module+"/"+r {
				return true
			}
		}
		return false
	}
}

func anyOf(ms ...matcher) matcher {
	return func(p string) bool {
		for _, m := range ms {
			if m(p) {
				return true
			}
		}
		return false
	}
}

func isOurs(p string) bool { return p == module || strings.HasPrefix(p, module+"/") }

func openai(p string) bool      { return within("github.com/openai/openai-go")(p) }
func libLandlock(p string) bool { return within("github.com/landlock-lsm/go-landlock")(p) }
func libSeccomp(p string) bool  { return within("github.com/seccomp/libseccomp-golang")(p) }

// httpClient matches the ways to speak HTTP the broker must not have.
func httpClient(p string) bool {
	return openai(p) || within("net/http", "golang.org/x/net/http2", "github.com/hashicorp/go-retryablehttp",
		"github.com/go-resty/resty", "github.com/valyala/fasthttp")(p)
}

// importRule: no package matched by from imports, directly or not, a
// package matched by forbid.
type importRule struct {
	name   string
	from   matcher // applied to our packages only
	forbid matcher
}

func importRules() []importRule {
	return []importRule{
		{
			name: "broker never imports the sandbox, its enforcement, netproxy or an HTTP client",
			from: ours("broker"),
			forbid: anyOf(ours("sandbox", "landlock", "seccomp", "kernelaudit", "layer", "netproxy"),
				libLandlock, libSeccomp, httpClient),
		},
		{
			name:   "boundary imports nothing of ours",
			from:   ours("boundary"),
			forbid: func(p string) bool { return isOurs(p) && !ours("boundary")(p) },
		},
		{
			name:   "grants imports nothing of ours but boundary and netdest",
			from:   ours("grants"),
			forbid: func(p string) bool { return isOurs(p) && !ours("grants", "boundary", "netdest")(p) },
		},
		{
			name:   "atomicfile imports nothing of ours",
			from:   ours("atomicfile"),
			forbid: func(p string) bool { return isOurs(p) && !ours("atomicfile")(p) },
		},
		{
			name: "overrides imports only boundary, grants (and what grants may import) and atomicfile of ours",
			from: ours("overrides"),
			forbid: func(p string) bool {
				return isOurs(p) && !ours("overrides", "boundary", "grants", "netdest", "atomicfile")(p)
			},
		},
		{
			name:   "broker never imports overrides or review (it owns the interfaces they fill)",
			from:   ours("broker"),
			forbid: ours("overrides", "review"),
		},
		{
			name:   "evidence imports nothing of ours (both ends of the reader's protocol, nothing else)",
			from:   ours("evidence"),
			forbid: func(p string) bool { return isOurs(p) && !ours("evidence")(p) },
		},
		{
			name:   "ruletext imports nothing of ours",
			from:   ours("ruletext"),
			forbid: func(p string) bool { return isOurs(p) && !ours("ruletext")(p) },
		},
		{
			name:   "suggest never imports session, sandbox or review (the report and the audit log both call it)",
			from:   ours("suggest"),
			forbid: ours("session", "sandbox", "review"),
		},
		{
			name:   "netdest imports nothing of ours",
			from:   ours("netdest"),
			forbid: func(p string) bool { return isOurs(p) && !ours("netdest")(p) },
		},
		{
			name:   "pathtree imports nothing of ours",
			from:   ours("pathtree"),
			forbid: func(p string) bool { return isOurs(p) && !ours("pathtree")(p) },
		},
		{
			name:   "statedir imports nothing of ours",
			from:   ours("statedir"),
			forbid: func(p string) bool { return isOurs(p) && !ours("statedir")(p) },
		},
		{
			name:   "envlist imports nothing of ours",
			from:   ours("envlist"),
			forbid: func(p string) bool { return isOurs(p) && !ours("envlist")(p) },
		},
		{
			name:   "netproxy imports nothing of ours but netdest (no rules, grants, policy or sandbox)",
			from:   ours("netproxy"),
			forbid: func(p string) bool { return isOurs(p) && !ours("netproxy", "netdest")(p) },
		},
		{
			name:   "netproxy never imports broker or review",
			from:   ours("netproxy"),
			forbid: ours("broker", "review"),
		},
		{
			name:   "enforcement packages never import broker, review, session or openai-go",
			from:   ours("landlock", "seccomp", "kernelaudit", "sandbox", "layer", "persist", "netproxy"),
			forbid: anyOf(ours("broker", "review", "session"), openai),
		},
		{
			name:   supervisorRule,
			from:   exactly(supervisorPkgs()...),
			forbid: supervisorForbidden,
		},
		{
			name:   "policy never imports broker, review, netproxy, landlock, seccomp or openai-go",
			from:   ours("policy"),
			forbid: anyOf(ours("broker", "review", "netproxy", "landlock", "seccomp"), libLandlock, libSeccomp, openai),
		},
		{
			name: "audit never imports the sandbox, its enforcement, netproxy, review, session or openai-go",
			from: ours("audit"),
			forbid: anyOf(ours("sandbox", "landlock", "seccomp", "kernelaudit", "netproxy", "review", "session"),
				openai),
		},
		{
			name:   leanHelperRule,
			from:   ours("cmd/sandboxd-helper"),
			forbid: leanHelperForbidden,
		},
		{
			name:   leanFrontRule,
			from:   ours("cmd/sandboxd-front", "cmd/internal/daemonrun", "daemon/client", "runflags", "sibling"),
			forbid: leanFrontForbidden,
		},
		{
			name:   leanRunRule,
			from:   ours("cmd/sandboxd-run", "cmd/internal/runcmd"),
			forbid: leanRunForbidden,
		},
		{
			name:   "no package of ours imports cmd/...",
			from:   func(p string) bool { return !ours("cmd")(p) },
			forbid: ours("cmd"),
		},
	}
}

// leanHelperRule keeps the separate helper binary what it is for: a
// launch's helper that initialises nothing the sandbox's setup does not
// use (each package's init runs again at every launch).
const leanHelperRule = "cmd/sandboxd-helper imports the helper's side only: no supervisor, session, broker, review, daemon, metrics, policy, persist or layer, no HTTP, TLS, openai-go or Prometheus"

// leanFrontRule keeps the lean front (the `sandboxd` every command of an
// agent starts) and what it links to what a run through the daemon
// uses: each package's init runs again at every launch.
const leanFrontRule = "cmd/sandboxd-front, cmd/internal/daemonrun, daemon/client, runflags and sibling import no session, broker, review, sandbox, daemon, metrics, policy, persist or layer, no HTTP, TLS, openai-go, nftables or Prometheus"

// leanRunRule keeps the lean embedded run (sandboxd-run, the
// supervisor of every embedded launch) to what a run uses: the model's
// client is the core's, asked through a pipe.
const leanRunRule = "cmd/sandboxd-run and cmd/internal/runcmd import no review/openai, daemon, metrics, machine, approvals, adapters or sandbox/confine, no openai-go, Prometheus, protobuf, MCP SDK, JSON schema, html/template or nftables"

func leanRunForbidden(p string) bool {
	return openai(p) || exactly("daemon")(p) || ours("review/openai", "metrics", "machine", "approvals", "adapters", "sandbox/confine")(p) ||
		within("github.com/prometheus", "google.golang.org/protobuf", "github.com/modelcontextprotocol", "github.com/google/jsonschema-go",
			"html/template", "github.com/google/nftables")(p)
}

func leanFrontForbidden(p string) bool {
	return exactly("daemon")(p) || ours("sandbox", "session", "broker", "review", "metrics", "machine", "policy", "persist", "layer",
		"netproxy", "adapters", "approvals", "audit", "runtext")(p) ||
		httpClient(p) || within("crypto/tls", "github.com/prometheus", "github.com/google/nftables")(p)
}

func leanHelperForbidden(p string) bool {
	return exactly("sandbox")(p) || ours("session", "broker", "review", "daemon", "metrics", "machine", "policy", "persist", "layer", "netproxy", "adapters")(p) ||
		httpClient(p) || within("crypto/tls", "github.com/prometheus")(p)
}

// short names a package as the rules do: ours relative to the module.
func short(p string) string {
	if r, ok := strings.CutPrefix(p, module+"/"); ok {
		return r
	}
	return p
}

func chainString(chain []string) string {
	s := make([]string, len(chain))
	for i, p := range chain {
		s[i] = short(p)
	}
	return strings.Join(s, " → ")
}

// reach walks g from src breadth first (so each chain is a shortest
// one) and calls found with the chain to every package stop matches;
// it does not walk on from those.
func reach(g graph, src string, stop matcher, found func(chain []string)) {
	parent := map[string]string{src: ""}
	queue := []string{src}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p != src && stop(p) {
			var chain []string
			for q := p; q != ""; q = parent[q] {
				chain = append([]string{q}, chain...)
			}
			found(chain)
			continue
		}
		n := g[p]
		if n == nil {
			continue
		}
		for _, imp := range n.Imports {
			if _, seen := parent[imp]; !seen {
				parent[imp] = p
				queue = append(queue, imp)
			}
		}
	}
}

// sortedOurs is our packages in g, in order.
func sortedOurs(g graph) []string {
	var out []string
	for p := range g {
		if isOurs(p) {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// checkImports returns one message per rule, package and forbidden
// package reached.
func checkImports(g graph, rules []importRule) []string {
	var out []string
	for _, r := range rules {
		for _, p := range sortedOurs(g) {
			if !r.from(p) {
				continue
			}
			reach(g, p, r.forbid, func(chain []string) {
				out = append(out, fmt.Sprintf("rule %q: %s", r.name, chainString(chain)))
			})
		}
	}
	return out
}

// checkOpenAI: at most one package of ours imports openai-go directly,
// and it is under review/.
func checkOpenAI(g graph) []string {
	const rule = "at most one package of ours imports openai-go directly, and it is under review/"
	var importers []string
	var out []string
	for _, p := range sortedOurs(g) {
		for _, imp := range g[p].Imports {
			if openai(imp) {
				importers = append(importers, p)
				if !strings.HasPrefix(p, module+"/review/") {
					out = append(out, fmt.Sprintf("rule %q: %s", rule, chainString([]string{p, imp})))
				}
				break
			}
		}
	}
	if len(importers) > 1 {
		names := make([]string, len(importers))
		for i, p := range importers {
			names[i] = short(p)
		}
		out = append(out, fmt.Sprintf("rule %q: %d packages import it: %s", rule, len(importers), strings.Join(names, ", ")))
	}
	return out
}

// checkSignals: no package of ours that a signal root is or depends on
// calls signal.Notify; calls maps a package to where it does.
func checkSignals(g graph, calls map[string][]string) []string {
	const rule = "packages in the transitive deps of sandbox, session or broker may not call signal.Notify"
	var out []string
	reported := map[string]bool{}
	check := func(chain []string) {
		last := chain[len(chain)-1]
		if reported[last] || len(calls[last]) == 0 {
			return
		}
		reported[last] = true
		out = append(out, fmt.Sprintf("rule %q: %s calls it at %s", rule, chainString(chain), strings.Join(calls[last], ", ")))
	}
	for _, p := range sortedOurs(g) {
		// sandbox's own subpackages count only when it imports them:
		// the helper is one, and a process of its own.
		if p != module+"/sandbox" && !ours("session", "broker")(p) {
			continue
		}
		check([]string{p})
		reach(g, p, func(q string) bool { return isOurs(q) && len(calls[q]) > 0 }, check)
	}
	return out
}

// signalCalls lists where a file set refers to signal.Notify or
// signal.NotifyContext of os/signal, however it is imported.
func signalCalls(fset *token.FileSet, files []*ast.File) []string {
	var out []string
	for _, f := range files {
		name := ""
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); path == "os/signal" {
				name = "signal"
				if imp.Name != nil {
					name = imp.Name.Name
				}
			}
		}
		if name == "" || name == "_" {
			continue
		}
		// An identifier that resolves to nothing in the file (Obj nil)
		// is the package (or, dot-imported, its function), not a local.
		var visit func(n ast.Node) bool
		visit = func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && id.Name == name && id.Obj == nil && isNotify(x.Sel.Name) {
					out = append(out, fset.Position(x.Pos()).String())
				}
				ast.Inspect(x.X, visit) // not x.Sel: a field or method named Notify
				return false
			case *ast.Ident:
				if name == "." && isNotify(x.Name) && x.Obj == nil {
					out = append(out, fset.Position(x.Pos()).String())
				}
			}
			return true
		}
		ast.Inspect(f, visit)
	}
	return out
}

func isNotify(s string) bool { return s == "Notify" || s == "NotifyContext" }

// parse parses the named files of p (nil names: its production files).
func parse(fset *token.FileSet, p *pkg, names []string) ([]*ast.File, error) {
	var out []*ast.File
	for _, n := range names {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, n), nil, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// loadGraph runs `go list -deps -json ./...` at the module's root.
func loadGraph(t *testing.T) graph {
	t.Helper()
	root := moduleRoot(t)
	cmd := exec.Command("go", "list", "-e", "-deps", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		g[p.ImportPath] = &p
	}
	if g[module+"/internal/guardrails"] == nil {
		t.Fatalf("go list at %s did not list this package: not the module's root?", root)
	}
	return g
}

func TestImportRules(t *testing.T) {
	g := loadGraph(t)
	for _, p := range sortedOurs(g) {
		// An import go list could not resolve leaves the graph
		// incomplete: the rules could pass for want of an edge.
		if g[p].Error != nil {
			t.Errorf("%s: %s (the import rules cannot be checked on an incomplete graph)", short(p), g[p].Error.Err)
		}
	}
	for _, msg := range checkImports(g, importRules()) {
		t.Error(msg)
	}
	for _, msg := range checkOpenAI(g) {
		t.Error(msg)
	}
}

func TestSourceRules(t *testing.T) {
	g := loadGraph(t)
	calls := map[string][]string{}
	fset := token.NewFileSet()
	for _, p := range sortedOurs(g) {
		n := g[p]
		prod, err := parse(fset, n, append(append([]string(nil), n.GoFiles...), n.CgoFiles...))
		if err != nil {
			t.Errorf("%s: %v", short(p), err)
			continue
		}
		tests, err := parse(fset, n, append(append([]string(nil), n.TestGoFiles...), n.XTestGoFiles...))
		if err != nil {
			t.Errorf("%s: %v", short(p), err)
			continue
		}
		calls[p] = signalCalls(fset, prod)
		for _, f := range append(prod, tests...) {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "init" {
					t.Errorf("rule %q: %s has an init function at %s", "no package of ours has an init function", short(p), fset.Position(fd.Pos()))
				}
			}
		}
		if p == module+"/policy" {
			for _, f := range prod {
				for _, d := range f.Decls {
					if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.VAR {
						t.Errorf("rule %q: package-level var at %s", "policy keeps no package-level variables", fset.Position(gd.Pos()))
					}
				}
			}
		}
	}
	for _, msg := range checkSignals(g, calls) {
		t.Error(msg)
	}
}

// TestRulesCatch proves each rule fires, with its chain, on a synthetic
// graph that breaks it.
func TestRulesCatch(t *testing.T) {
	m := func(rel string) string { return module + "/" + rel }
	g := graph{}
	add := func(p string, imports ...string) { g[p] = &pkg{ImportPath: p, Imports: imports} }
	add(m("broker"), m("grants"), m("review"))
	add(m("review"), m("review/openai"), "net/http")
	add(m("review/openai"), "github.com/openai/openai-go/v3")
	add("github.com/openai/openai-go/v3", "net/http")
	add("net/http")
	add(m("grants"), m("publicerr"), m("boundary"), m("netdest"))
	add(m("boundary"), m("publicerr"))
	add(m("netdest"))
	add(m("atomicfile"), m("grants"))
	add(m("publicerr"), "errors")
	add("errors")
	add(m("netproxy"), m("session"))
	add(m("session"), m("broker"), m("sandbox"))
	add(m("sandbox"), m("sandbox/internal/wire"), m("landlock"))
	add(m("sandbox/internal/wire"), "net/http")
	add(m("sandbox/confine"), m("sandbox/internal/wire"))
	add(m("sandbox/detect"), m("sandbox/confine"))
	add(m("landlock"), m("cmd/internal/flags"))
	add(m("cmd/internal/flags"))
	add(m("cmd/sandboxd"), m("cmd/internal/flags"), m("session"))
	add(m("cmd/sandboxd-helper"), m("sandbox/confine"))
	add(m("cmd/sandboxd-front"), m("daemon/client"))
	add(m("cmd/sandboxd-run"), m("cmd/internal/runcmd"))
	add(m("cmd/internal/runcmd"), m("daemon/client"), "html/template")
	add("html/template")
	add(m("daemon/client"), m("publicerr"), m("daemon"))
	add(m("daemon"), "net/http")
	add(m("layer"), "github.com/openai/openai-go/v3/option")
	add("github.com/openai/openai-go/v3/option")
	add(m("policy"), "github.com/seccomp/libseccomp-golang")
	add(m("ruletext"), m("grants"))
	add(m("suggest"), m("session"))
	add(m("statedir"), m("publicerr"))
	add(m("envlist"), m("statedir"))
	add(m("pathtree"), m("envlist"))
	add(m("audit"), m("atomicfile"), m("review"))
	add("github.com/seccomp/libseccomp-golang")

	var got []string
	got = append(got, checkImports(g, importRules())...)
	got = append(got, checkOpenAI(g)...)
	got = append(got, checkSignals(g, map[string][]string{
		m("sandbox/internal/wire"): {"wire.go:10:2"},
		m("sandbox/confine"):       {"helper.go:5:2"}, // the helper: allowed
		m("cmd/sandboxd"):          {"main.go:3:4"},   // allowed
	})...)
	all := strings.Join(got, "\n")
	for _, want := range []string{
		`broker never imports the sandbox, its enforcement, netproxy or an HTTP client": broker → review → net/http`,
		`"grants imports nothing of ours but boundary and netdest": grants → publicerr`,
		`"boundary imports nothing of ours": boundary → publicerr`,
		`"netproxy never imports broker or review": netproxy → session → broker`,
		`"atomicfile imports nothing of ours": atomicfile → grants`,
		`"ruletext imports nothing of ours": ruletext → grants`,
		`"suggest never imports session, sandbox or review (the report and the audit log both call it)": suggest → session`,
		`"statedir imports nothing of ours": statedir → publicerr`,
		`"envlist imports nothing of ours": envlist → statedir`,
		`"pathtree imports nothing of ours": pathtree → envlist`,
		`"audit never imports the sandbox, its enforcement, netproxy, review, session or openai-go": audit → review`,
		`"enforcement packages never import broker, review, session or openai-go": netproxy → session`,
		`"enforcement packages never import broker, review, session or openai-go": layer → github.com/openai/openai-go/v3/option`,
		`"policy never imports broker, review, netproxy, landlock, seccomp or openai-go": policy → github.com/seccomp/libseccomp-golang`,
		`"no package of ours imports cmd/...": landlock → cmd/internal/flags`,
		supervisorRule + `": sandbox/detect → sandbox/confine`,
		supervisorRule + `": sandbox → sandbox/internal/wire → net/http`,
		leanHelperRule + `": cmd/sandboxd-helper → sandbox/confine → sandbox/internal/wire → net/http`,
		leanFrontRule + `": cmd/sandboxd-front → daemon/client → daemon`,
		leanRunRule + `": cmd/sandboxd-run → cmd/internal/runcmd → daemon/client → daemon`,
		leanRunRule + `": cmd/internal/runcmd → html/template`,
		`under review/": layer → github.com/openai/openai-go/v3/option`,
		`under review/": 2 packages import it: layer, review/openai`,
		`may not call signal.Notify": sandbox → sandbox/internal/wire calls it at wire.go:10:2`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no violation %s\ngot:\n%s", want, all)
		}
	}
	for _, bad := range []string{"grants → boundary", "grants → netdest", "confine calls", "cmd/sandboxd calls", "cmd/sandboxd → cmd/internal/flags", `under review/": review/openai`,
		supervisorRule + `": sandbox/confine`} {
		if strings.Contains(all+"\n", bad) {
			t.Errorf("a violation that is allowed (%s):\n%s", bad, all)
		}
	}
	if strings.Count(all, "sandbox/internal/wire calls") != 1 {
		t.Errorf("one package calling signal.Notify is reported once, got:\n%s", all)
	}
}

func TestSignalCalls(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want int
	}{
		{`package p; import "os/signal"; func f() { signal.Notify(nil) }`, 1},
		{`package p; import "os/signal"; func f() { signal.NotifyContext(nil) }`, 1},
		{`package p; import sig "os/signal"; var g = sig.Notify`, 1},
		{`package p; import . "os/signal"; func f() { Notify(nil) }`, 1},
		{`package p; import "os/signal"; func f() { signal.Stop(nil) }`, 0},
		{`package p; import "os/signal"; func f(signal notifier) { signal.Notify(nil) }`, 0}, // a local, not the package
		{`package p; func f() { signal.Notify(nil) }`, 0},                                    // not os/signal
		{`package p; import . "os/signal"; func f(x t) { x.Notify() }`, 0},                   // a method
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", tc.src, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := signalCalls(fset, []*ast.File{f}); len(got) != tc.want {
			t.Errorf("%s: %d calls found (%v), want %d", tc.src, len(got), got, tc.want)
		}
	}
}
