package session

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/publicerr"
)

// systemDirs may never be a workspace; those marked true may not contain
// one either.
func systemDirs() map[string]bool {
	return map[string]bool{
		"/": false, "/bin": true, "/boot": true, "/dev": true, "/etc": true, "/lib": true,
		"/lib32": true, "/lib64": true, "/libx32": true, "/proc": true, "/run": true,
		"/sbin": true, "/sys": true, "/usr": true, "/var": false, "/tmp": false,
		"/var/tmp": false, "/home": false, "/root": false, "/opt": false, "/srv": false,
		"/mnt": false, "/media": false, "/snap": true, "/var/run": true, "/var/lib": false,
		"/var/log": true, "/var/cache": false,
	}
}

// resolveWorkspace validates the workspace (given, or the caller's
// working directory) and picks the command's working directory: the
// caller's, when it lies inside the workspace. Every error is a public
// sentence naming what was wrong.
func resolveWorkspace(given string, c Caller) (ws, cwd string, err error) {
	if !filepath.IsAbs(c.Cwd) {
		return "", "", publicerr.New("the caller's working directory is not known")
	}
	if given == "" {
		given = c.Cwd
	} else if !filepath.IsAbs(given) {
		given = filepath.Join(c.Cwd, given)
	}
	abs := filepath.Clean(given)
	ws, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return "", "", publicerr.Wrap(err, fmt.Sprintf("workspace %s: %v", given, errors.Unwrap(err)))
	}
	if err := readableDir(ws, given); err != nil {
		return "", "", err
	}
	refuse := func(why string) (string, string, error) {
		if ws != abs {
			why += " (through the symlink " + abs + ")"
		}
		return "", "", publicerr.New(fmt.Sprintf("workspace %s is %s; choose a project directory", ws, why))
	}
	if why := forbiddenWorkspace(ws, c); why != "" {
		return refuse(why)
	}
	cwd = ws
	if real, err := filepath.EvalSymlinks(c.Cwd); err == nil && (real == ws || strings.HasPrefix(real, ws+"/")) {
		cwd = real
	}
	return ws, cwd, nil
}

// readableDir checks that ws is a directory sandboxd can list.
func readableDir(ws, given string) error {
	st, err := os.Stat(ws)
	if err != nil {
		return publicerr.Wrap(err, fmt.Sprintf("workspace %s: %v", given, errors.Unwrap(err)))
	}
	if !st.IsDir() {
		return publicerr.New(fmt.Sprintf("workspace %s is not a directory", given))
	}
	d, err := os.Open(ws)
	if err != nil {
		return publicerr.Wrap(err, fmt.Sprintf("workspace %s is not readable: %v", given, errors.Unwrap(err)))
	}
	d.Close()
	return nil
}

// forbiddenWorkspace says why ws may not be a workspace, or "".
func forbiddenWorkspace(ws string, c Caller) string {
	sys := systemDirs()
	if _, ok := sys[ws]; ok {
		return "a system directory"
	}
	for dir := filepath.Dir(ws); ; dir = filepath.Dir(dir) {
		if sys[dir] {
			return "inside the system directory " + dir
		}
		if dir == "/" {
			break
		}
	}
	home, _ := filepath.EvalSymlinks(c.Home)
	for _, h := range []string{c.Home, home} {
		if h == "" {
			continue
		}
		if ws == h {
			return "your home directory"
		}
		if strings.HasPrefix(h, ws+"/") {
			return "a parent of your home directory"
		}
	}
	for _, own := range []string{c.ConfigDir(), c.StateDir()} {
		if ws == own || strings.HasPrefix(own, ws+"/") || strings.HasPrefix(ws, own+"/") {
			return "sandboxd's own configuration or state"
		}
	}
	return ""
}
