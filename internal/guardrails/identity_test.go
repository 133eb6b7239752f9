package guardrails

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The caller is the only identity: below cmd/, nothing reads the
// identity or the context of the process running sandboxd — its ids and
// groups, its working directory, home, temporary directory, environment
// or umask — nor changes them; session.Caller carries the caller's to
// every package (one process serves many callers). The class, by what a
// call does rather than its name:
//
//   - the process's ids and groups, and any change of them (os, syscall
//     and x/sys/unix: Getuid ... Getgroups, Getresuid, Setuid ...
//     Setfsuid, Setgroups), and os/user.Current;
//   - its working directory (os.Getwd, syscall/unix Getwd, Getcwd), and
//     a relative path made absolute against it (filepath.Abs);
//   - its home, config, cache and temporary directories (os.UserHomeDir,
//     UserConfigDir, UserCacheDir, TempDir);
//   - its environment (os.Getenv, LookupEnv, Environ, ExpandEnv, and
//     their syscall twins);
//   - its umask (syscall/unix Umask, which reads by changing);
//   - a child that inherits the environment or the working directory:
//     an exec.Cmd without both Env and Dir set where it is made, or an
//     os.StartProcess / syscall.ForkExec / unix.Exec attribute without
//     them;
//   - a read of the process's own /proc entries that describe it
//     (/proc/self/status, environ, cwd, root, loginuid, uid_map,
//     gid_map, setgroups and /proc/thread-self's).
//
// Packages exempt, each with its reason, are in identityExempt.

// identityExempt are the packages of ours that may reach the process's
// identity or context, and why.
func identityExempt() map[string]string {
	return map[string]string{
		"cmd/...":          "the front ends: they describe their own user as the caller",
		"bench/...":        "benchmark programs, front ends like cmd/",
		"internal/cmd/...": "the repository's own tools (make test's go test runner), front ends like cmd/",
		"fsid":             "takes on a caller's identity for file-system work, and compares the thread's groups with the caller's to know whether it must",
		"sandbox/confine":  "the helper: a process of its own inside one run, started with the caller's ids; its identity and /proc/self are the run's",
	}
}

// identityCalls are the functions that read or change the process's
// identity or context, by package.
func identityCalls() map[string][]string {
	ids := []string{"Getuid", "Geteuid", "Getgid", "Getegid", "Getgroups", "Getresuid", "Getresgid",
		"Setuid", "Setgid", "Setreuid", "Setregid", "Setresuid", "Setresgid", "Setgroups", "Setfsuid", "Setfsgid",
		"SetfsuidRetUid", "SetfsgidRetGid", "Getwd", "Getcwd", "Umask", "Getenv", "Environ", "Setenv", "Unsetenv", "Clearenv"}
	return map[string][]string{
		"os": {"Getuid", "Geteuid", "Getgid", "Getegid", "Getgroups", "Getwd", "Chdir", "UserHomeDir",
			"UserConfigDir", "UserCacheDir", "TempDir", "Getenv", "LookupEnv", "Environ", "ExpandEnv",
			"Setenv", "Unsetenv", "Clearenv"},
		"os/user":               {"Current"},
		"path/filepath":         {"Abs"},
		"syscall":               ids,
		"golang.org/x/sys/unix": ids,
	}
}

// selfProc are the /proc entries of the process (or thread) itself that
// describe who and where it is.
var selfProcEntries = []string{"status", "environ", "cwd", "root", "loginuid", "uid_map", "gid_map", "setgroups"}

// typedPkg is one of our packages, parsed and type-checked.
type typedPkg struct {
	rel   string // relative to the module's root
	fset  *token.FileSet
	files []*ast.File
	info  *types.Info
}

// listedPkg is what `go list -export -deps -json` says of a package.
type listedPkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	Standard   bool
}

// loadTyped type-checks every non-test package of ours, importing from
// the build's export data, and returns them with the importer.
func loadTyped(t *testing.T) ([]typedPkg, types.Importer) {
	t.Helper()
	root := moduleRoot(t)
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,Export,Standard", "./...")
	cmd.Dir, cmd.Env = root, os.Environ()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.String())
	}
	exports := map[string]string{}
	var ours []listedPkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
		if isOurs(p.ImportPath) {
			ours = append(ours, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	var pkgs []typedPkg
	for _, p := range ours {
		tp := typedPkg{rel: strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/"), fset: fset,
			info: &types.Info{Uses: map[*ast.Ident]types.Object{}, Types: map[ast.Expr]types.TypeAndValue{}}}
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			tp.files = append(tp.files, f)
		}
		conf := types.Config{Importer: imp.(types.ImporterFrom)}
		if _, err := conf.Check(p.ImportPath, fset, tp.files, tp.info); err != nil {
			t.Fatalf("type-check %s: %v", p.ImportPath, err)
		}
		pkgs = append(pkgs, tp)
	}
	return pkgs, imp
}

// exempt reports whether rel is exempt (and why).
func exempt(rel string) (string, bool) {
	for pat, why := range identityExempt() {
		if base, ok := strings.CutSuffix(pat, "/..."); ok {
			if rel == base || strings.HasPrefix(rel, base+"/") {
				return why, true
			}
		} else if rel == pat {
			return why, true
		}
	}
	return "", false
}

// identityFindings lists every reach for the process's identity or
// context in p, as "file:line: what".
func identityFindings(p typedPkg) []string {
	var out []string
	report := func(n ast.Node, format string, args ...any) {
		pos := p.fset.Position(n.Pos())
		out = append(out, fmt.Sprintf("%s:%d: %s", filepath.Base(pos.Filename), pos.Line, fmt.Sprintf(format, args...)))
	}
	calls := identityCalls()
	for _, f := range p.files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.Ident:
				if fn, ok := p.info.Uses[x].(*types.Func); ok && fn.Pkg() != nil {
					for _, name := range calls[fn.Pkg().Path()] {
						if fn.Name() == name && fn.Type().(*types.Signature).Recv() == nil {
							report(x, "%s.%s reads or changes the process's identity or context", fn.Pkg().Path(), name)
						}
					}
				}
			case *ast.BasicLit:
				if x.Kind != token.STRING {
					break
				}
				if tv, ok := p.info.Types[x]; ok && tv.Value != nil && selfProc(constant.StringVal(tv.Value)) {
					report(x, "%q describes the process running sandboxd", constant.StringVal(tv.Value))
				}
			case *ast.FuncDecl:
				if x.Body != nil {
					childFindings(p, x.Body, report)
				}
			case *ast.FuncLit:
				childFindings(p, x.Body, report)
			}
			return true
		})
	}
	return dedupe(out)
}

// selfProc reports whether s names an entry of /proc/self or
// /proc/thread-self that describes the process.
func selfProc(s string) bool {
	for _, self := range []string{"/proc/self/", "/proc/thread-self/"} {
		rest, ok := strings.CutPrefix(s, self)
		if !ok {
			continue
		}
		for _, e := range selfProcEntries {
			if rest == e || strings.HasPrefix(rest, e+"/") {
				return true
			}
		}
	}
	return false
}

// childFindings finds, in body, children made to inherit the process's
// environment or working directory: exec.Command results with no Env
// or no Dir assigned in the same body, exec.Cmd literals without both
// keys (nor an assignment of them later), and process attributes of
// os.StartProcess, syscall.ForkExec and the like without both.
func childFindings(p typedPkg, body *ast.BlockStmt, report func(ast.Node, string, ...any)) {
	set := assignedFields(body)
	ast.Inspect(body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.AssignStmt:
			for i, rhs := range x.Rhs {
				if i >= len(x.Lhs) {
					break
				}
				call, ok := ast.Unparen(rhs).(*ast.CallExpr)
				if !ok || !isFunc(p, call.Fun, "os/exec", "Command", "CommandContext") {
					continue
				}
				v := exprText(x.Lhs[i])
				for _, field := range []string{"Env", "Dir"} {
					if !set[v+"."+field] {
						report(call, "exec.Command's %s has no %s: the child would inherit the process's", v, field)
					}
				}
			}
		case *ast.CompositeLit:
			name := typeName(p, x)
			switch name {
			case "os/exec.Cmd", "os.ProcAttr", "syscall.ProcAttr":
			default:
				return true
			}
			keys := map[string]bool{}
			for _, e := range x.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok {
					keys[exprText(kv.Key)] = true
				}
			}
			for _, field := range []string{"Env", "Dir"} {
				if !keys[field] {
					report(x, "%s without %s: the child would inherit the process's", name, field)
				}
			}
		case *ast.CallExpr:
			if isFunc(p, x.Fun, "os/exec", "Command", "CommandContext") && !assignedCall(body, x) {
				report(x, "exec.Command used without a variable whose Env and Dir are set")
			}
		}
		return true
	})
}

// assignedFields are the "x.F" selectors assigned anywhere in body.
func assignedFields(body *ast.BlockStmt) map[string]bool {
	set := map[string]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		if a, ok := n.(*ast.AssignStmt); ok {
			for _, l := range a.Lhs {
				if sel, ok := l.(*ast.SelectorExpr); ok {
					set[exprText(sel)] = true
				}
			}
		}
		return true
	})
	return set
}

// assignedCall reports whether call is the right-hand side of an
// assignment in body (childFindings checks those).
func assignedCall(body *ast.BlockStmt, call *ast.CallExpr) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if a, ok := n.(*ast.AssignStmt); ok {
			for _, r := range a.Rhs {
				if ast.Unparen(r) == call {
					found = true
				}
			}
		}
		return !found
	})
	return found
}

func isFunc(p typedPkg, fun ast.Expr, pkg string, names ...string) bool {
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	fn, ok := p.info.Uses[sel.Sel].(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Pkg().Path() != pkg {
		return false
	}
	for _, n := range names {
		if fn.Name() == n {
			return true
		}
	}
	return false
}

// typeName is the package path and name of a literal's type ("" when
// it is not a named type).
func typeName(p typedPkg, x *ast.CompositeLit) string {
	tv, ok := p.info.Types[x]
	if !ok {
		return ""
	}
	t := tv.Type
	if ptr, ok := t.(*types.Pointer); ok {
		t = ptr.Elem()
	}
	named, ok := t.(*types.Named)
	if !ok || named.Obj().Pkg() == nil {
		return ""
	}
	return named.Obj().Pkg().Path() + "." + named.Obj().Name()
}

func exprText(e ast.Expr) string {
	var b strings.Builder
	var walk func(ast.Expr)
	walk = func(e ast.Expr) {
		switch x := e.(type) {
		case *ast.Ident:
			b.WriteString(x.Name)
		case *ast.SelectorExpr:
			walk(x.X)
			b.WriteString("." + x.Sel.Name)
		case *ast.StarExpr:
			walk(x.X)
		case *ast.ParenExpr:
			walk(x.X)
		default:
			b.WriteString("?")
		}
	}
	walk(e)
	return b.String()
}

func dedupe(in []string) []string {
	sort.Strings(in)
	out := in[:0]
	for i, s := range in {
		if i == 0 || s != in[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// TestCallerIsTheOnlyIdentity: no package below cmd/ but the exempt ones
// reaches for the process's identity or context.
func TestCallerIsTheOnlyIdentity(t *testing.T) {
	pkgs, _ := loadTyped(t)
	matched := map[string]bool{}
	for _, p := range pkgs {
		if why, ok := exempt(p.rel); ok {
			matched[why] = true
			continue
		}
		for _, f := range identityFindings(p) {
			t.Errorf("%s/%s", p.rel, f)
		}
	}
	if t.Failed() {
		t.Log("take it from session.Caller (through sandbox.Spec or the package's options), or, for file-system work as the caller, use package fsid")
	}
	for pat, why := range identityExempt() {
		if !matched[why] {
			t.Errorf("identityExempt names %s, which matches no package", pat)
		}
	}
}

// TestIdentityRuleCatches: each class the rule names is found in a
// package that reaches for it, and the compliant forms are not.
func TestIdentityRuleCatches(t *testing.T) {
	_, imp := loadTyped(t)
	src := `package bad

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

func bad() {
	_ = os.Getuid()                  // L14
	_, _ = os.Getwd()                // L15
	_ = os.TempDir()                 // L16
	_, _ = os.UserHomeDir()          // L17
	_, _ = os.LookupEnv("HOME")      // L18
	_ = syscall.Getegid()            // L19
	_ = unix.Umask(0)                // L20
	_, _ = user.Current()            // L21
	_, _ = filepath.Abs("x")         // L22
	_, _ = os.ReadFile("/proc/self/status") // L23
	c := exec.Command("git")         // L24
	c.Env = []string{}
	_ = exec.Command("ls").Run()     // L26
	_ = &exec.Cmd{Path: "/bin/true", Env: []string{}} // L27
	_, _ = os.StartProcess("/bin/true", nil, &os.ProcAttr{Dir: "/"}) // L28
	_ = unix.Setfsuid(1)             // L29
}

func good() {
	c := exec.Command("git")
	c.Env, c.Dir = []string{}, "/"
	_ = &exec.Cmd{Path: "/bin/true", Env: []string{}, Dir: "/"}
	_, _ = os.ReadFile("/proc/self/mountinfo")
	_ = os.Getpid()
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "bad.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := typedPkg{rel: "bad", fset: fset, files: []*ast.File{f},
		info: &types.Info{Uses: map[*ast.Ident]types.Object{}, Types: map[ast.Expr]types.TypeAndValue{}}}
	if _, err := (&types.Config{Importer: imp}).Check("bad", fset, p.files, p.info); err != nil {
		t.Fatal(err)
	}
	lines := map[int]bool{}
	for _, finding := range identityFindings(p) {
		var line int
		fmt.Sscanf(strings.SplitN(finding, ":", 3)[1], "%d", &line)
		lines[line] = true
	}
	for line := 14; line <= 29; line++ {
		if line != 25 && !lines[line] {
			t.Errorf("line %d of the bad package is not caught", line)
		}
		delete(lines, line)
	}
	for line := range lines {
		t.Errorf("line %d is caught, but it is compliant", line)
	}
}
