package policy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPackageRules enforces doc.go: the package must not import the
// sandbox's enforcement or network pieces, and must keep no package-level
// mutable state.
func TestPackageRules(t *testing.T) {
	forbidden := []string{"broker", "review", "netproxy", "landlock", "seccomp", "openai-go"}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				for _, elem := range strings.Split(path, "/") {
					if elem == bad {
						t.Errorf("%s imports %s", name, path)
					}
				}
			}
		}
		full, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range full.Decls {
			switch d := decl.(type) {
			case *ast.GenDecl:
				if d.Tok == token.VAR {
					t.Errorf("%s: package-level var at %s", name, fset.Position(d.Pos()))
				}
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.Name == "init" {
					t.Errorf("%s: init function", name)
				}
			}
		}
	}
}
