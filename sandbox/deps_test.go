package sandbox_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/sandboxd/sandboxd"

// forbiddenDeps are what the supervisor side (sandbox, detect, wire) must
// never import, directly or not: the helper, the decision side, any HTTP
// client. grants is imported for the boundary vocabulary only (Surface,
// Operation); forbiddenUses keeps the grant store and requests out.
var forbiddenDeps = []string{
	module + "/sandbox/confine",
	module + "/broker", module + "/review", module + "/session", module + "/netproxy",
	"github.com/openai/openai-go", "net/http",
}

// forbiddenUses are what the supervisor side's code must never touch:
// process-wide signal handling, sandboxd's own environment and working
// directory, its own standard streams.
var forbiddenUses = map[string]bool{
	"signal.Notify": true, "signal.NotifyContext": true, "signal.Ignore": true, "signal.Reset": true,
	"os.Getenv": true, "os.LookupEnv": true, "os.Environ": true, "os.Getwd": true, "os.Chdir": true,
	"os.Stdout": true, "os.Stderr": true, "os.Stdin": true,
	// The sandbox enforces and reports; issuing, storing and consuming
	// grants is the broker's.
	"grants.NewStore": true, "grants.Store": true, "grants.Grant": true, "grants.Request": true,
}

func supervisorDirs() []string { return []string{".", "detect", "internal/wire"} }

// TestSupervisorSource checks the supervisor side's own code.
func TestSupervisorSource(t *testing.T) {
	for _, dir := range supervisorDirs() {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			checkFile(t, f)
		}
	}
}

func checkFile(t *testing.T, name string) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		for _, bad := range forbiddenDeps {
			if p == bad || strings.HasPrefix(p, bad+"/") {
				t.Errorf("%s imports %s", name, p)
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && forbiddenUses[x.Name+"."+sel.Sel.Name] {
			t.Errorf("%s: %s.%s", fset.Position(sel.Pos()), x.Name, sel.Sel.Name)
		}
		return true
	})
}

// TestSupervisorDeps checks what the supervisor side imports through
// other packages too.
func TestSupervisorDeps(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	for _, dir := range supervisorDirs() {
		out, err := exec.Command(goTool, "list", "-deps", "./"+dir).Output()
		if err != nil {
			t.Fatalf("go list -deps ./%s: %v", dir, err)
		}
		for _, p := range strings.Fields(string(out)) {
			for _, bad := range forbiddenDeps {
				if p == bad || strings.HasPrefix(p, bad+"/") {
					t.Errorf("./%s depends on %s", dir, p)
				}
			}
		}
	}
}
