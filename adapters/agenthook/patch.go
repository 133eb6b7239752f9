package agenthook

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/persist"
)

// Codex's apply_patch tool writes files itself, outside any sandbox
// once Codex's own is off (sandboxd needs it off). Its hook judges a
// patch by the files it names: each must lie in the workspace, also
// once symbolic links are resolved, and be none of the names a program
// on the host runs or loads unasked (persist's protected names, git's
// own directory). Anything else is refused: the agent can make the
// change with a shell command, which runs in the sandbox.

// patchHeaders are the lines of Codex's patch format that name a file.
var patchHeaders = []string{"*** Add File:", "*** Update File:", "*** Delete File:", "*** Move to:"}

// patchMarkers are its other lines that start with "***".
var patchMarkers = []string{"*** Begin Patch", "*** End Patch", "*** End of File"}

// PatchFiles are the files a patch in Codex's format names. Codex reads
// a line with its surrounding blanks trimmed, so this does too; any other
// line that reads as one of the format's own ("***") is refused rather
// than guessed at.
func PatchFiles(patch string) ([]string, error) {
	var files []string
	for line := range strings.Lines(patch) {
		t := strings.TrimSpace(line)
		if !strings.HasPrefix(t, "***") || slices.Contains(patchMarkers, t) {
			continue
		}
		known := false
		for _, h := range patchHeaders {
			if name, ok := strings.CutPrefix(t, h); ok {
				if name = strings.TrimSpace(name); name == "" {
					return nil, errors.New("the patch names an empty path")
				}
				files, known = append(files, name), true
			}
		}
		if !known {
			return nil, fmt.Errorf("the patch has a line sandboxd cannot judge: %q", clip(t))
		}
	}
	if len(files) == 0 {
		return nil, errors.New("the patch names no file sandboxd can judge")
	}
	return files, nil
}

// CheckPatch refuses a patch that writes anywhere but ordinary files of
// the workspace; relative names are taken from cwd, as Codex does.
func CheckPatch(patch, cwd, workspace string) error {
	files, err := PatchFiles(patch)
	if err != nil {
		return err
	}
	realWS, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return fmt.Errorf("cannot resolve the workspace %s", workspace)
	}
	names := persist.NewMatcher(persist.Builtin())
	for _, f := range files {
		p := f
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		p = filepath.Clean(p)
		real, err := ResolveExisting(p)
		if err != nil {
			return fmt.Errorf("cannot resolve %s", f)
		}
		if !pathtree.Within(workspace, p) || !pathtree.Within(realWS, real) {
			return fmt.Errorf("apply_patch may not change %s: it is outside the workspace %s; make the change with a shell command, which runs in the sandbox", f, workspace)
		}
		if st, err := os.Lstat(real); err == nil && st.Mode().IsRegular() && linkCount(st) > 1 {
			return fmt.Errorf("apply_patch may not change %s: it has other names (hard links), which may lie outside the workspace; make the change with a shell command, which runs in the sandbox", f)
		}
		rel, _ := pathtree.Rel(realWS, real)
		if why, refused := persist.FileToolRefuses(names, rel); refused {
			return fmt.Errorf("apply_patch may not change %s: %s; make the change with a shell command, which runs in the sandbox, where sandboxd judges it", f, why)
		}
	}
	return nil
}

func linkCount(st os.FileInfo) uint64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(sys.Nlink)
	}
	return 0
}

// ResolveExisting is p with the symbolic links of its longest existing
// prefix resolved: where a write to p would land, and what a program
// that resolves p (Codex, for its trust keys) names it.
func ResolveExisting(p string) (string, error) {
	return persist.ResolveCreated(persist.Host{}, filepath.Clean(p))
}

// CheckWorkdir refuses a shell command the agent would start in cwd
// when cwd is outside the workspace (Codex's model may name any
// directory as the command's workdir): sandboxd run starts such a
// command at the workspace's root instead, so the command would run
// somewhere other than where the model meant, in the project.
func CheckWorkdir(cwd, workspace string) error {
	realWS, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return fmt.Errorf("cannot resolve the workspace %s", workspace)
	}
	real, err := filepath.EvalSymlinks(cwd)
	if err != nil {
		return fmt.Errorf("cannot resolve the command's directory %s", cwd)
	}
	if !pathtree.Within(realWS, real) {
		return fmt.Errorf("the command would run in %s, outside the workspace %s, where sandboxd runs commands: give a directory inside the workspace, or none", cwd, workspace)
	}
	return nil
}
