package persist

import (
	"path"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	m := NewMatcher(Names([]string{"deploy/run.sh", ".git", ".envrc"}))
	for _, tc := range []struct {
		rel     string
		pattern string // "" when nothing matches
		kind    Kind
		at      int
	}{
		{".envrc", ".envrc", Protect, 0},
		{"a/b/.envrc", ".envrc", Protect, 2},
		{".vscode/tasks.json", ".vscode", Protect, 0},
		{"pkg/.vscode/settings.json", ".vscode", Protect, 1},
		{".devcontainer.json", ".devcontainer.json", Asked, 0},
		{"web/app.code-workspace", "*.code-workspace", Protect, 1},
		{"lefthook.yml", "lefthook.*", Hooked, 0},
		{".config/lefthook.yaml", ".config/lefthook.*", Hooked, 0},
		{"mise.local.toml", "mise.*.toml", Protect, 0},
		{"x/mise/config.toml", "mise/config*.toml", Protect, 1},
		{"mise/config.local.toml", "mise/config*.toml", Protect, 0},
		{"hk.local.pkl", "hk.local.pkl", Hooked, 0},
		{".npmrc", ".npmrc", Settings, 0},
		{"web/.yarnrc.yml", ".yarnrc.yml", Settings, 1},
		{"crates/x/.cargo/config.toml", ".cargo/config.toml", Settings, 2},
		{"rust-toolchain", "rust-toolchain", Settings, 0},
		{"rust-toolchain.toml", "rust-toolchain.toml", Settings, 0},
		{".hg/hgrc", ".hg/hgrc*", Settings, 0},
		{"sub/.pdbrc", ".pdbrc", Protect, 1},
		{".irbrc", ".irbrc", Protect, 0},
		{".mvn/jvm.config", ".mvn/jvm.config", Protect, 0},
		{".mvn/wrapper/maven-wrapper.properties", "", 0, 0},
		{"lib/libfoo.so.1-gdb.py", "*-gdb.py", Protect, 1},
		{".pnpmfile.cjs", ".pnpmfile.cjs", Protect, 0},
		{".tool-versions", ".tool-versions", Settings, 0},
		{"x/mise/other.toml", "", 0, 0},
		{".github/hooks/pre.json", ".github/hooks", Protect, 0},
		{".github/workflows/ci.yml", "", 0, 0},
		{".github/copilot-instructions.md", ".github/copilot-instructions.md", Instruction, 0},
		{"AGENTS.md", "AGENTS.md", Instruction, 0},
		{"docs/CLAUDE.md", "CLAUDE.md", Instruction, 1},
		{".clinerules", ".clinerules", Instruction, 0},
		{".clinerules/hooks/x", ".clinerules/hooks", Protect, 0}, // a hook inside the listed folder
		{".claude/CLAUDE.md", ".claude", Protect, 0},             // inside a protected folder
		{"deploy/run.sh", "deploy/run.sh", Protect, 0},
		{"x/deploy/run.sh", "deploy/run.sh", Protect, 1},
		{"deploy/other.sh", "", 0, 0},
		{".git/config", "", 0, 0}, // git's own rules, not a name
		{"src/main.go", "", 0, 0},
		{".envrc.bak", "", 0, 0},
		{"agents.md", "", 0, 0},
	} {
		n, at, ok := m.Match(tc.rel)
		switch {
		case ok != (tc.pattern != ""):
			t.Errorf("Match(%q) = %q, %v; want %q", tc.rel, n.Pattern, ok, tc.pattern)
		case ok && (n.Pattern != tc.pattern || n.Kind != tc.kind || at != tc.at):
			t.Errorf("Match(%q) = %q kind %d at %d; want %q kind %d at %d", tc.rel, n.Pattern, n.Kind, at, tc.pattern, tc.kind, tc.at)
		}
	}
}

// Every built-in name says who runs it and when, and is a valid pattern.
func TestBuiltinNames(t *testing.T) {
	seen := map[string]bool{}
	for _, n := range Builtin() {
		if n.Tool == "" || n.When == "" {
			t.Errorf("%s: no tool or time", n.Pattern)
		}
		if (n.Kind == Settings) != (n.Settings != nil) || n.Kind == Settings && (n.Refuses == "" || n.Source == "") {
			t.Errorf("%s: a Settings name needs its rule, what it refuses and its source (and only it has a rule)", n.Pattern)
		}
		if seen[n.Pattern] {
			t.Errorf("%s listed twice", n.Pattern)
		}
		seen[n.Pattern] = true
		for _, elem := range strings.Split(n.Pattern, "/") {
			if _, err := path.Match(elem, ""); err != nil || elem == "" || elem == "." || elem == ".." {
				t.Errorf("%s: bad element %q", n.Pattern, elem)
			}
		}
	}
	for _, must := range []string{".envrc", ".vscode", ".devcontainer", ".devcontainer.json", ".mcp.json", ".claude", ".cursor",
		"*.code-workspace", ".husky", ".pre-commit-config.yaml", "lefthook.*", ".bashrc", ".zshrc", ".gitmodules", ".sandboxd.toml"} {
		if !seen[must] {
			t.Errorf("%s is not a built-in name", must)
		}
	}
}

func TestInPackageTree(t *testing.T) {
	for rel, want := range map[string]bool{
		"node_modules/x/.vscode/tasks.json":           true,
		"web/node_modules/x/.husky/pre-commit":        true,
		".venv/lib/python3.11/site-packages/x/.envrc": true,
		"vendor/github.com/x/y/.envrc":                true,
		"src/.vscode/tasks.json":                      false,
		".vscode/node_modules/x":                      false, // the name comes first
		"node_modules_backup/x/.vscode/tasks.json":    false,
		"notvendor/x/.envrc":                          false,
	} {
		m := NewMatcher(Builtin())
		_, at, ok := m.Match(rel)
		if !ok {
			t.Fatalf("%s matches no name", rel)
		}
		if _, got := InPackageTree(rel, at); got != want {
			t.Errorf("InPackageTree(%q) = %v, want %v", rel, got, want)
		}
	}
}
