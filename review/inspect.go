package review

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Inspection bounds: scripts are evidence, read statically and never
// run; secrets are never read at all.
const (
	maxScripts     = 16
	maxScriptBytes = 64 << 10 // all scripts together
	maxScriptDepth = 4
)

// interpreters run the file named after them.
var interpreters = map[string]bool{
	"bash": true, "sh": true, "zsh": true, "dash": true, "source": true, ".": true,
	"python": true, "python3": true, "node": true, "perl": true, "ruby": true, "make": false,
}

// InspectScripts reads the scripts command invokes: files it names that
// an interpreter or a leading "./" would run, and, to depth 4, the
// scripts those source or run. cwd resolves relative names; denied says
// which paths are never read (secrets, sandboxd's own state). What is
// left out is listed in skipped.
func InspectScripts(command, cwd string, denied func(path string) bool) (scripts []Script, skipped []string) {
	seen := map[string]bool{}
	budget := maxScriptBytes
	var walk func(text, dir string, depth int)
	walk = func(text, dir string, depth int) {
		for _, name := range invoked(text) {
			p := name
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			p = filepath.Clean(p)
			if seen[p] {
				continue
			}
			seen[p] = true
			switch {
			case depth > maxScriptDepth:
				skipped = append(skipped, p+": deeper than "+fmt.Sprint(maxScriptDepth)+" levels")
				continue
			case denied(p):
				skipped = append(skipped, p+": a protected file, never read")
				continue
			case len(scripts) >= maxScripts:
				skipped = append(skipped, p+": more than "+fmt.Sprint(maxScripts)+" scripts")
				continue
			case budget <= 0:
				skipped = append(skipped, p+": over the 64 KiB inspection budget")
				continue
			}
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				continue // nothing there: nothing to show
			}
			if real != p && denied(real) {
				// A link in the workspace to a secret (a cloned repository
				// can carry one): never followed.
				skipped = append(skipped, p+": a link to a protected file, never read")
				continue
			}
			content, truncated, ok := readScript(real, budget)
			if !ok {
				continue // not a regular file, or it changed under us: nothing to show
			}
			budget -= len(content)
			if truncated {
				skipped = append(skipped, p+": shown only in part")
			}
			scripts = append(scripts, Script{Path: p, Content: content})
			walk(content, filepath.Dir(p), depth+1)
		}
	}
	walk(command, cwd, 1)
	return scripts, skipped
}

// invoked lists the file names a shell text would run: the word after an
// interpreter, and words starting with "./", "../" or "/" in command
// position. It is a reading aid for the reviewer, not a parser: what it
// misses the reviewer still sees in the command itself.
func invoked(text string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), maxScriptBytes)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "#"); i >= 0 && (i == 0 || line[i-1] == ' ') {
			line = line[:i]
		}
		for _, cmd := range strings.FieldsFunc(line, func(r rune) bool { return r == ';' || r == '|' || r == '&' || r == '(' || r == ')' }) {
			words := strings.Fields(cmd)
			for len(words) > 0 && (strings.Contains(words[0], "=") || words[0] == "exec" || words[0] == "env" || words[0] == "sudo") {
				words = words[1:]
			}
			if len(words) == 0 {
				continue
			}
			w := strings.Trim(words[0], `"'`)
			switch {
			case interpreters[filepath.Base(w)] && len(words) > 1:
				if arg := strings.Trim(words[1], `"'`); !strings.HasPrefix(arg, "-") {
					out = append(out, arg)
				}
			case strings.HasPrefix(w, "./") || strings.HasPrefix(w, "../") || (strings.HasPrefix(w, "/") && !strings.HasPrefix(w, "/usr/") && !strings.HasPrefix(w, "/bin/")):
				out = append(out, w)
			}
		}
	}
	return out
}

// readScript reads at most limit bytes of a regular text file at p, a
// path with every link already resolved: it is opened without following
// any, so a link swapped in after the check is not followed either.
func readScript(p string, limit int) (string, bool, bool) {
	fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return "", false, false
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return "", false, false
	}
	// Only what the command could read as its user: the caller's own
	// files and world-readable ones, never another user's private file
	// that sandboxd (perhaps root) could open.
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || (int(sys.Uid) != os.Getuid() && st.Mode().Perm()&0o004 == 0) {
		return "", false, false
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return "", false, false
	}
	truncated := len(b) > limit
	if truncated {
		b = b[:limit]
	}
	return strings.ToValidUTF8(string(b), "?"), truncated, true
}
