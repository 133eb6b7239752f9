package review

import (
	"bufio"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sandboxd/sandboxd/evidence"
)

// Inspection bounds: scripts are evidence, read statically and never
// run, with the command's own eyes; secrets are never read at all.
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

// View reads files as the command sees them: with its mounts and masks,
// its private /tmp, its Landlock rules and its uid (an evidence.Client
// speaking to a reader in a read-only sandbox of the run's own Spec).
// Its errors are evidence's.
type View interface {
	// Resolve returns where path leads, every link resolved.
	Resolve(path string) (string, error)
	// Read returns at most limit+1 bytes of the regular file at a
	// resolved path, following no link.
	Read(path string, limit int) ([]byte, error)
	Close() error
}

// noView is why nothing is read when no view of the command is at hand
// (a review of a command that is not run, as `review eval` does).
const noView = "not read: evidence is read only as the command sees it, and there is no sandbox of it to read with"

// InspectScripts reads the scripts command invokes: files it names that
// an interpreter or a leading "./" would run, and, to depth 4, the
// scripts those source or run. cwd resolves relative names. Every file
// is read through the command's own view, which open starts at the
// first file to read (nil: nothing is read at all); what the command
// could not read is not read. denied says which paths are never read,
// not even asked for (secrets, sandboxd's own state), as named and
// where they lead. What is left out is listed in skipped, with why.
func InspectScripts(command, cwd string, denied func(path string) bool, open func() (View, error)) (scripts []Script, skipped []string) {
	seen := map[string]bool{}
	budget := maxScriptBytes
	var view View
	var viewErr error
	defer func() {
		if view != nil {
			view.Close()
		}
	}()
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
			if view == nil && viewErr == nil {
				if open == nil {
					viewErr = errors.New(noView)
				} else if view, viewErr = open(); viewErr != nil {
					viewErr = errors.New("not read: the command's view could not be opened")
				}
			}
			if viewErr != nil {
				skipped = append(skipped, p+": "+viewErr.Error())
				continue
			}
			real, err := view.Resolve(p)
			if err != nil {
				skipped = append(skipped, p+": "+unread(err))
				continue
			}
			if real != p && denied(real) {
				// A link in the workspace to a secret (a cloned repository
				// can carry one): never followed.
				skipped = append(skipped, p+": a link to a protected file, never read")
				continue
			}
			b, err := view.Read(real, budget)
			if err != nil {
				skipped = append(skipped, p+": "+unread(err))
				continue
			}
			if len(b) > budget {
				b = b[:budget]
				skipped = append(skipped, p+": shown only in part")
			}
			content := strings.ToValidUTF8(string(b), "?")
			budget -= len(b)
			scripts = append(scripts, Script{Path: p, Content: content})
			walk(content, filepath.Dir(p), depth+1)
		}
	}
	walk(command, cwd, 1)
	return scripts, skipped
}

// unread says why a file was not read, in sandboxd's words (never the
// reader's).
func unread(err error) string {
	switch {
	case errors.Is(err, evidence.ErrNotFound):
		return "not there as the command sees it"
	case errors.Is(err, evidence.ErrDenied):
		return "the command may not read it; not read"
	case errors.Is(err, evidence.ErrNotRegular):
		return "not a regular file"
	case errors.Is(err, evidence.ErrChanged):
		return "changed while it was read; not shown"
	}
	return "could not be read as the command sees it"
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
