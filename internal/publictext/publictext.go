package publictext

import (
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
)

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
	regexp.MustCompile(`(^|[\s(])(json|toml|yaml|strconv\.[A-Za-z]+|exec|flate|zlib|gzip|x509|tls|http|bufio\.Scanner): `),
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

// Problems lists what is wrong with one public sentence: each mark of an
// internal error's text or of sandboxd's state in it, and each of
// prefixes (OwnErrorPrefixes) that starts it or follows another error's
// colon. A sentence starting "sandboxd: " is a CLI line; the rest is
// checked.
func Problems(s string, prefixes []string) []string {
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

// OwnErrorPrefixes are the prefixes the module's production code under
// root puts before a wrapped error (fmt.Errorf("landlock: ...%w", ...)):
// the name of the package or step that failed. "sandboxd" is not one of
// them: every line sandboxd's CLI writes starts with it.
func OwnErrorPrefixes(root string) ([]string, error) {
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

// ModuleRoot is the directory of the go.mod at or above dir, as a path
// relative to dir when dir is relative.
func ModuleRoot(dir string) (string, error) {
	d := dir
	for i := 0; i < 64; i++ {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.IsAbs(d) && filepath.Dir(d) == d {
			break
		}
		d = filepath.Join(d, "..")
	}
	return "", fmt.Errorf("publictext: no go.mod at or above %s", dir)
}

// ModulePrefixes is OwnErrorPrefixes of the module the working
// directory (a package's, in its test) is in.
func ModulePrefixes() ([]string, error) {
	root, err := ModuleRoot(".")
	if err != nil {
		return nil, err
	}
	return OwnErrorPrefixes(root)
}
