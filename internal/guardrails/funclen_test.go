package guardrails

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function or method may be, counted from
// its func keyword to its closing brace, in non-test code.
const maxFuncLines = 80

// longTables are the functions allowed over maxFuncLines because they are
// tables: a list of literal entries, which splitting would only scatter.
// Keyed by package directory (relative to the module's root), then
// function, or receiver type and method: "persist.Builtin",
// "layer.committer.dir".
func longTables() map[string]string {
	return map[string]string{
		"persist.Builtin":        "the built-in persistence names table",
		"persist.StartupTable":   "the host's start-up locations table",
		"credstore.Stores":       "the documented credential stores table",
		"credstore.namePatterns": "the credential-store names table",
	}
}

// longFunc is one function over the limit.
type longFunc struct {
	key   string // as in longTables
	file  string // relative to the module's root
	name  string // function, or Type.Method
	lines int
}

func (l longFunc) String() string { return fmt.Sprintf("%s:%s:%d", l.file, l.name, l.lines) }

// funcName names a declaration as longTables does, without the package.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.IndexExpr: // a generic receiver, T[P]
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		case *ast.ParenExpr:
			t = x.X
			continue
		case *ast.Ident:
			return x.Name + "." + fd.Name.Name
		}
		return fd.Name.Name
	}
}

// longFuncs lists the functions and methods of f (the file rel, in the
// package directory dir) longer than max lines.
func longFuncs(fset *token.FileSet, f *ast.File, dir, rel string, max int) []longFunc {
	var out []longFunc
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
		if n > max {
			name := funcName(fd)
			out = append(out, longFunc{key: dir + "." + name, file: rel, name: name, lines: n})
		}
	}
	return out
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(gomod)))
}

// moduleFuncs walks every non-test .go file under root (not .git, not
// testdata, not another module) and returns the functions over max
// lines, and the names of every function and method it saw, keyed as in
// longTables, with their length.
func moduleFuncs(root string, max int) ([]longFunc, map[string]int, error) {
	fset := token.NewFileSet()
	var long []longFunc
	seen := map[string]int{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if p != root {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		for _, l := range longFuncs(fset, f, dir, rel, 0) {
			if l.lines > seen[l.key] {
				seen[l.key] = l.lines
			}
			if l.lines > max {
				long = append(long, l)
			}
		}
		return nil
	})
	return long, seen, err
}

// checkFuncLengths returns one message per function over the limit that
// longTables does not name, and one per entry of longTables that names no
// function over it (renamed, removed or split: drop the entry).
func checkFuncLengths(long []longFunc, seen map[string]int, tables map[string]string, max int) []string {
	const rule = "no function over 80 lines outside tables"
	var over []string
	for _, l := range long {
		if _, ok := tables[l.key]; !ok {
			over = append(over, l.String())
		}
	}
	sort.Strings(over)
	var out []string
	if len(over) > 0 {
		out = append(out, fmt.Sprintf("rule %q: %d functions over %d lines (file:function:lines; split them, or name a table in longTables):\n\t%s",
			rule, len(over), max, strings.Join(over, "\n\t")))
	}
	var keys []string
	for k := range tables {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if n, ok := seen[k]; !ok {
			out = append(out, fmt.Sprintf("rule %q: longTables names %s, which does not exist: remove the entry", rule, k))
		} else if n <= max {
			out = append(out, fmt.Sprintf("rule %q: longTables names %s, which is %d lines, within the limit: remove the entry", rule, k, n))
		}
	}
	return out
}

func TestFunctionLength(t *testing.T) {
	root := moduleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "internal", "guardrails")); err != nil {
		t.Fatalf("%s is not the module's root: %v", root, err)
	}
	long, seen, err := moduleFuncs(root, maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range checkFuncLengths(long, seen, longTables(), maxFuncLines) {
		t.Error(msg)
	}
}

// TestFunctionLengthCatches proves the rule fires on a long function and
// a long method, with file:function:lines, spares an allowlisted table,
// and reports a stale allowlist entry.
func TestFunctionLengthCatches(t *testing.T) {
	body := strings.Repeat("\t_ = 0\n", 79) // 79 lines + func line + brace = 81
	src := "package p\n\n" +
		"func short() {\n\t_ = 0\n}\n\n" +
		"func long() {\n" + body + "}\n\n" +
		"type T[P any] struct{}\n\n" +
		"func (t *T[P]) method() {\n" + body + "}\n\n" +
		"func table() {\n" + body + "}\n\n" +
		"func exactly() {\n" + strings.Repeat("\t_ = 0\n", 78) + "}\n"
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p/x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	var long []longFunc
	for _, l := range longFuncs(fset, f, "p", "p/x.go", 0) {
		seen[l.key] = l.lines
		if l.lines > maxFuncLines {
			long = append(long, l)
		}
	}
	if seen["p.exactly"] != maxFuncLines {
		t.Errorf("exactly is counted %d lines, want %d", seen["p.exactly"], maxFuncLines)
	}
	got := strings.Join(checkFuncLengths(long, seen, map[string]string{
		"p.table":   "a table",
		"p.short":   "within the limit",
		"p.missing": "gone",
	}, maxFuncLines), "\n")
	for _, want := range []string{
		"2 functions over 80 lines", // long and T.method: table is allowed
		"p/x.go:long:81",
		"p/x.go:T.method:81",
		"longTables names p.missing, which does not exist",
		"longTables names p.short, which is 3 lines, within the limit",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in:\n%s", want, got)
		}
	}
	for _, bad := range []string{"p/x.go:table", "p/x.go:exactly", "p/x.go:short"} {
		if strings.Contains(got, bad) {
			t.Errorf("%s reported:\n%s", bad, got)
		}
	}
}
