package sandbox

import (
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/envlist"
)

// layerGitConfig is git configuration a run behind the copy-on-write
// layer gives the command: a local clone of a repository in the
// workspace goes through git's file:// transport instead of hardlinking
// its objects. (git clone links each object and then checks the link
// is the file it linked; in an overlay the link copies the file up into
// the layer first, so its inode changes and git stops with "hardlink
// different from source". The layer commits a link as a separate file
// anyway.) Only paths in the workspace are rewritten; the exact
// workspace path also matches siblings that share it as a prefix, for
// which file:// is the same clone without links.
func layerGitConfig(workspace string) [][2]string {
	ws := strings.TrimRight(workspace, "/")
	return [][2]string{
		{"url.file://" + ws + "/.insteadOf", ws + "/"},
		{"url.file://" + ws + ".insteadOf", ws},
	}
}

// addGitConfig appends entries to the git configuration the environment
// carries through GIT_CONFIG_COUNT (the caller's own never reach the
// command; the run's proxy sets http.proxy there).
func addGitConfig(env []string, entries [][2]string) []string {
	n := 0
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GIT_CONFIG_COUNT="); ok {
			if c, err := strconv.Atoi(v); err == nil && c > 0 {
				n = c
			}
		}
	}
	for _, e := range entries {
		env = envlist.Set(env, "GIT_CONFIG_KEY_"+strconv.Itoa(n), e[0])
		env = envlist.Set(env, "GIT_CONFIG_VALUE_"+strconv.Itoa(n), e[1])
		n++
	}
	return envlist.Set(env, "GIT_CONFIG_COUNT", strconv.Itoa(n))
}
