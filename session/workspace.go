package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/envlist"
	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/persist"
	"github.com/sandboxd/sandboxd/publicerr"
	"golang.org/x/sys/unix"
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

// Where a run's workspace came from (the report's workspace_from).
const (
	fromFlag   = "--workspace"
	fromGit    = "git"
	fromPolicy = workspaceFile
	fromCwd    = "cwd"
)

// workspace is the run's chosen workspace.
type workspace struct {
	// root is the workspace (resolved); cwd the command's working
	// directory (the caller's, when inside root).
	root, cwd string
	// from says how root was chosen; note, when set, why a root that
	// was found was not taken.
	from, note string
	// above are the .sandboxd.toml files found above root on the way
	// up from the working directory, outermost first: they tighten the
	// policy too.
	above []string
}

// policies are the workspace policy files the run applies, in order.
func (w workspace) policies() []string {
	return append(append([]string(nil), w.above...), workspacePolicies(w.root, w.cwd)...)
}

// Found is a workspace a front end fixes once for many runs
// (Runner.Workspace).
type Found struct {
	// Root is the workspace (resolved); From says how it was chosen.
	Root, From string
	// Above are the .sandboxd.toml files above a root that was found,
	// outermost first: they tighten every run in it as they tighten a
	// run that finds it, so the front end passes them on (Job.Above).
	Above []string
}

// Workspace is the workspace a run for c would get with the given
// --workspace (empty: the one found from c's working directory), how it
// was chosen and the policy files above it that apply; resolved as the
// caller. A front end that fixes one workspace for many runs (the MCP
// server) asks once.
func (r *Runner) Workspace(c Caller, given string) (Found, error) {
	var w workspace
	var err error
	aerr := fsid.Do(c.ID(), func() error {
		w, err = resolveWorkspace(given, c)
		return nil
	})
	if aerr != nil {
		return Found{}, publicerr.Wrap(aerr, fmt.Sprintf("sandboxd cannot act as uid %d here", c.UID))
	}
	return Found{Root: w.root, From: w.from, Above: w.above}, err
}

// resolveWorkspace validates the workspace (given; else the one found
// from the caller's working directory, see discoverWorkspace; else that
// directory) and picks the command's working directory: the caller's,
// when it lies inside the workspace. Every error is a public sentence
// naming what was wrong.
func resolveWorkspace(given string, c Caller) (workspace, error) {
	if !filepath.IsAbs(c.Cwd) {
		return workspace{}, publicerr.New("the caller's working directory is not known")
	}
	w := workspace{from: fromFlag}
	switch {
	case given == "":
		w.from = fromCwd
		given = c.Cwd
		d := discoverWorkspace(c)
		w.note, w.above = d.note, d.above
		if d.root != "" {
			given, w.from = d.root, d.from
		}
	case !filepath.IsAbs(given):
		given = filepath.Join(c.Cwd, given)
	}
	ws, cwd, err := checkWorkspace(given, c)
	w.root, w.cwd = ws, cwd
	return w, err
}

// checkWorkspace validates the workspace given and picks the command's
// working directory.
func checkWorkspace(given string, c Caller) (ws, cwd string, err error) {
	abs := filepath.Clean(given)
	ws, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return "", "", workspaceUnusable(given, err)
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
	if real, err := filepath.EvalSymlinks(c.Cwd); err == nil && pathtree.Within(ws, real) {
		cwd = real
	}
	return ws, cwd, nil
}

// readableDir checks that ws is a directory sandboxd can list.
func readableDir(ws, given string) error {
	st, err := os.Stat(ws)
	if err != nil {
		return workspaceUnusable(given, err)
	}
	if !st.IsDir() {
		return publicerr.New(fmt.Sprintf("workspace %s is not a directory", given))
	}
	d, err := os.Open(ws)
	if err != nil {
		return workspaceUnusable(given, err)
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
		if _, below := pathtree.Below(ws, h); below {
			return "a parent of your home directory"
		}
	}
	for _, own := range c.Layout().Own() {
		if pathtree.Within(ws, own) || pathtree.Within(own, ws) {
			return "sandboxd's own configuration or state"
		}
	}
	return ""
}

// discovered is what discoverWorkspace found.
type discovered struct {
	root, from, note string
	above            []string
}

// discoverWorkspace finds the workspace a run from the caller's working
// directory defaults to: the top level of the git repository it is in,
// else the nearest directory above it holding a .sandboxd.toml. The
// walk up stops where git's own discovery stops (another file system,
// GIT_CEILING_DIRECTORIES, a repository) and uses git's rule for what a
// repository is (persist.Discover); nothing is run. A root that is found
// but refused (see refusedRoot) is not taken: root is "" and note says
// why, and the workspace is the working directory as when nothing is
// found. above lists the .sandboxd.toml files the walk saw above the
// workspace it leads to.
func discoverWorkspace(c Caller) discovered {
	cwd, err := filepath.EvalSymlinks(c.Cwd)
	var start unix.Stat_t
	if err != nil || unix.Stat(cwd, &start) != nil {
		return discovered{}
	}
	gitTop, policyDirs := walkUp(cwd, start.Dev, ceilingDirs(c.Env))
	var d discovered
	cands := []struct{ dir, from, what string }{{gitTop, fromGit, "the git repository's top level"}}
	for _, p := range policyDirs {
		cands = append(cands, struct{ dir, from, what string }{p, fromPolicy, "the directory of " + workspaceFile})
	}
	for _, cand := range cands {
		if cand.dir == "" {
			continue
		}
		if why := refusedRoot(cand.dir, c); why != "" {
			if d.note == "" {
				d.note = fmt.Sprintf("%s, %s, is %s: the workspace is the current directory", cand.what, cand.dir, why)
			}
			continue
		}
		d.root, d.from, d.note = cand.dir, cand.from, ""
		break
	}
	ws := d.root
	if ws == "" {
		ws = cwd
	}
	for i := len(policyDirs) - 1; i >= 0; i-- {
		p := policyDirs[i]
		if _, above := pathtree.Below(p, ws); !above {
			continue
		}
		// Above the workspace, only the caller's own or root's files
		// count: another user's could only get in the way.
		var st unix.Stat_t
		f := filepath.Join(p, workspaceFile)
		if unix.Lstat(f, &st) == nil && (int(st.Uid) == c.UID || st.Uid == 0) {
			d.above = append(d.above, f)
		}
	}
	return d
}

// walkUp walks from cwd to "/" as git's discovery does and returns the
// repository's top level, if any, and the directories holding a
// .sandboxd.toml on the way, nearest first.
func walkUp(cwd string, dev uint64, ceilings map[string]bool) (gitTop string, policyDirs []string) {
	for dir := cwd; ; dir = filepath.Dir(dir) {
		var st unix.Stat_t
		if dir != cwd && (ceilings[dir] || unix.Stat(dir, &st) != nil || st.Dev != dev) {
			return gitTop, policyDirs
		}
		if hasWorkspacePolicy(dir) {
			policyDirs = append(policyDirs, dir)
		}
		d, v := persist.Discover(persist.Host{}, dir)
		if v == persist.GitDir && !d.Bare {
			gitTop = dir
		}
		// A repository ends the walk, and so does a .git git refuses.
		if v != persist.NotGitDir || dir == "/" {
			return gitTop, policyDirs
		}
	}
}

// refusedRoot says why a discovered root may not be the workspace: it
// must belong to the caller and be none of "/", a temporary directory,
// the home directory or one of its parents, or anything a given
// workspace may not be.
func refusedRoot(dir string, c Caller) string {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "not readable"
	}
	if int(st.Uid) != c.UID {
		return "not yours"
	}
	for _, t := range tempDirs(c.Env) {
		if dir == t {
			return "a temporary directory"
		}
	}
	return forbiddenWorkspace(dir, c)
}

// tempDirs are the temporary directories a root may not be, resolved:
// the system's and the caller's TMPDIR (never sandboxd's own).
func tempDirs(env []string) []string {
	dirs := []string{"/tmp", "/var/tmp", "/dev/shm"}
	if t := envlist.Get(env, "TMPDIR"); filepath.IsAbs(t) {
		dirs = append(dirs, filepath.Clean(t))
	}
	out := dirs
	for _, d := range dirs {
		if r, err := filepath.EvalSymlinks(d); err == nil && r != d {
			out = append(out, r)
		}
	}
	return out
}

// ceilingDirs are GIT_CEILING_DIRECTORIES: git looks no further up
// than these (they are not examined themselves).
func ceilingDirs(env []string) map[string]bool {
	out := map[string]bool{}
	for _, d := range strings.Split(envlist.Get(env, "GIT_CEILING_DIRECTORIES"), ":") {
		if !filepath.IsAbs(d) {
			continue
		}
		out[filepath.Clean(d)] = true
		if r, err := filepath.EvalSymlinks(d); err == nil {
			out[r] = true
		}
	}
	return out
}

// hasWorkspacePolicy reports a regular .sandboxd.toml in dir.
func hasWorkspacePolicy(dir string) bool {
	st, err := os.Lstat(filepath.Join(dir, workspaceFile))
	return err == nil && st.Mode().IsRegular()
}

// workspacePolicies are the workspace policy files a run applies, each
// tightening the last: the workspace's own, then that of every directory
// from below the workspace down to the working directory.
func workspacePolicies(ws, cwd string) []string {
	files := []string{filepath.Join(ws, workspaceFile)}
	rel, below := pathtree.Below(ws, cwd)
	if !below {
		return files
	}
	dir := ws
	for _, part := range strings.Split(rel, "/") {
		dir = filepath.Join(dir, part)
		files = append(files, filepath.Join(dir, workspaceFile))
	}
	return files
}

// workspaceUnusable says, in sandboxd's words, why the workspace given
// (the caller's own name for it) cannot be resolved or opened; err, the
// syscall's, is the cause for the log.
func workspaceUnusable(given string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return publicerr.Errorf(err, "workspace %s does not exist", given)
	case errors.Is(err, unix.ENOTDIR):
		return publicerr.Errorf(err, "workspace %s does not exist (a part of its path is not a directory)", given)
	case errors.Is(err, fs.ErrPermission):
		return publicerr.Errorf(err, "workspace %s is not readable by you (permission denied)", given)
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		return publicerr.Errorf(err, "workspace %s cannot be opened (%v)", given, errno)
	}
	return publicerr.Errorf(err, "workspace %s cannot be opened (run with -v to log why)", given)
}
