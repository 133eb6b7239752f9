package persist

import (
	"bufio"
	"bytes"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/gitconfig"
)

// Repository state that git executes later. Read from git's sequencer.c
// and remote.c (v2.39; unchanged in substance through v2.52).

// sequencerDirs are the directories holding an operation in progress
// that `git rebase --continue`, `git cherry-pick --continue` or `git am
// --continue` resumes.
func sequencerDirs() []string { return []string{"rebase-merge", "rebase-apply", "sequencer"} }

// sequencerDir reports one of sequencerDirs.
func sequencerDir(name string) bool { return slices.Contains(sequencerDirs(), name) }

// todoFile reports the sequencer's todo lists (todo_list_parse_insn_buffer).
func todoFile(name string) bool { return name == "git-rebase-todo" || name == "todo" }

// pickLists are the files of an operation in progress that name the
// commits it applies, and has applied: the todo lists and "done".
func pickLists() []string { return []string{"git-rebase-todo", "todo", "done"} }

// gitWatched are the entries of a git directory, beyond hooks and config,
// that make git (or Sapling, on git's repository: .git/sl) run or load
// something later. gitRule judges a change to each; a run without a
// layer binds them read-only when they exist and checks them after the
// run when they appear; a new repository holding one is not kept
// (newRepo).
func gitWatched() []string {
	return append([]string{"config.worktree", "commondir"}, append(sequencerDirs(),
		"remotes", "branches", "objects/info/alternates", "sl")...)
}

// gitNested are the entries of a git directory that hold other git
// directories (submodules, linked worktrees).
func gitNested() []string { return []string{"modules", "worktrees"} }

// builtinStrategy reports the merge strategies git carries itself; any
// other name runs git-merge-<name> from PATH, or a path when it holds a
// "/".
func builtinStrategy(name string) bool {
	switch name {
	case "ort", "recursive", "resolve", "octopus", "ours", "subtree":
		return true
	}
	return false
}

// todoExec returns the first line (1-based) of a todo list that runs a
// shell command: "exec" or "x" after leading blanks, followed by a blank,
// CR or the end of the line (parse_insn_line). Every line is looked at,
// comments included: the comment character is configurable, and a line
// git would reject makes it reject the whole list, so nothing is lost.
func todoExec(b []byte) int {
	n := 0
	for len(b) > 0 {
		n++
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimLeft(line, " \t")
		for _, cmd := range []string{"exec", "x"} {
			rest, ok := bytes.CutPrefix(line, []byte(cmd))
			if ok && (len(rest) == 0 || strings.IndexByte(" \t\r\x00", rest[0]) >= 0) {
				return n
			}
		}
	}
	return 0
}

// customStrategy reports a strategy name git does not carry itself.
func customStrategy(v string) bool {
	v = strings.TrimSpace(v)
	return v != "" && !builtinStrategy(v)
}

// stateRisk checks one file of sequencer state (dir is its directory's
// name, file its own) and says why it would run something.
func stateRisk(dir, file string, content []byte) (string, bool) {
	switch {
	case todoFile(file):
		if n := todoExec(content); n > 0 {
			return dir + "/" + file + " has an exec line (line " + itoa(n) + "): `git " + resumeCmd(dir) + " --continue` would run it", true
		}
	case file == "strategy":
		if customStrategy(string(content)) {
			return dir + "/strategy names a merge strategy git does not carry: `git " + resumeCmd(dir) + " --continue` would run a program for it", true
		}
	case file == "opts":
		ents, err := gitconfig.Parse(content)
		if err != nil {
			return dir + "/opts cannot be parsed (" + reason(err) + ")", true
		}
		for _, e := range ents {
			if e.Section == "options" && e.Key == "strategy" && customStrategy(e.Value) {
				return dir + "/opts names a merge strategy git does not carry: `git " + resumeCmd(dir) + " --continue` would run a program for it", true
			}
		}
	}
	return "", false
}

func resumeCmd(dir string) string {
	switch dir {
	case "rebase-apply":
		return "am"
	case "sequencer":
		return "cherry-pick"
	}
	return "rebase"
}

// remoteURLs reads a legacy remote file: .git/remotes/<name> ("URL:",
// "Push:" and "Pull:" lines; only URL matters) or .git/branches/<name>
// (its first line is "url#branch").
func remoteURLs(kind string, content []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(content))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		if kind == "branches" {
			u, _, _ := strings.Cut(strings.TrimSpace(line), "#")
			return append(out, u)
		}
		if v, ok := strings.CutPrefix(line, "URL:"); ok {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return out
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
