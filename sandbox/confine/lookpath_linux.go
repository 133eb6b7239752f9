package confine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/envlist"
	"golang.org/x/sys/unix"
)

// errNotExecutable is the shell's "Permission denied" for a command
// without an execute bit, said as sandboxd says a kernel's reason: its
// own words, the errno in parentheses.
var errNotExecutable = errors.New("not executable (permission denied)")

// lookPath resolves the command as a shell would, in the sandbox's view,
// returning the POSIX exit status for failures (127 not found, 126 not
// executable).
func lookPath(name string, env []string, dir string) (string, int, error) {
	check := func(p string) (int, error) {
		st, err := os.Stat(p)
		if err != nil {
			return 127, errors.New("command not found")
		}
		if st.IsDir() {
			return 126, errors.New("is a directory")
		}
		if err := unix.Access(p, unix.X_OK); err != nil {
			return 126, errNotExecutable
		}
		return 0, nil
	}
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		code, err := check(p)
		return p, code, err
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	if v, ok := envlist.Lookup(env, "PATH"); ok {
		path = v
	}
	notExec := false
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, name)
		code, err := check(p)
		if err == nil {
			return p, 0, nil
		}
		if code == 126 {
			notExec = true
		}
	}
	if notExec {
		return "", 126, errNotExecutable
	}
	return "", 127, errors.New("command not found")
}
