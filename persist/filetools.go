package persist

import (
	"slices"
	"strings"
)

// An agent's own file tools (Codex's apply_patch, Claude Code's Edit and
// Write, pi's write and edit) write outside any sandbox, so the commit's
// judgement never sees their changes. In a workspace they may not write a
// file of a name a program on the host runs or loads unasked, nor a
// tool's settings or hook configuration whose changes the commit judges
// setting by setting, nor anything in git's own directory: the agent
// makes such a change with a shell command, in the sandbox, where it is
// judged. This is the one home of that rule; the agents' adapters ask it.

// FileToolsDenied reports whether an agent's own file tools may not
// write a file of name n: everything but instructions (text a tool
// reads) and what a tool asks the person about before it runs it.
func FileToolsDenied(n Name) bool {
	return n.Kind != Instruction && n.Kind != Asked
}

// FileToolsDeniedNames are the names FileToolsDenied refuses, as
// workspace-relative patterns, and git's own directory.
func FileToolsDeniedNames() []string {
	out := []string{".git"}
	for _, n := range Builtin() {
		if FileToolsDenied(n) {
			out = append(out, n.Pattern)
		}
	}
	return out
}

// FileToolRefuses says why an agent's own file tool may not write rel
// (workspace-relative, slash-separated, its links resolved), by the
// names m knows, or refused is false.
func FileToolRefuses(m *Matcher, rel string) (why string, refused bool) {
	if slices.Contains(strings.Split(rel, "/"), ".git") {
		return "it is git's own directory", true
	}
	if n, _, ok := m.Match(rel); ok && FileToolsDenied(n) {
		return n.Why(), true
	}
	return "", false
}
