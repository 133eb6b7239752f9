package persist

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/golden"
)

// TestDocumentedNames: the README's lists of protected names and host
// start-up locations, and docs/PERSISTENCE.md's table, are the tables
// here (go test -update rewrites them from the code).
func TestDocumentedNames(t *testing.T) {
	golden.Block(t, "../README.md", "persist-names", readmeNames())
	golden.Block(t, "../README.md", "startup-locations", readmeStartup())
	golden.Block(t, "../docs/PERSISTENCE.md", "names-table", namesTable())
}

func codes(names []Name, kind Kind) string {
	var out []string
	for _, n := range names {
		if n.Kind == kind {
			out = append(out, "`"+n.Pattern+"`")
		}
	}
	return strings.Join(out, ", ")
}

func readmeNames() []byte {
	var b strings.Builder
	names := Builtin()
	fmt.Fprintf(&b, "- **Refused** (no change at or below them is kept): %s.\n", codes(names, Protect))
	b.WriteString("- **Judged setting by setting** (a change that adds or changes one of these is refused whole; any other edit is kept):\n")
	for _, n := range names {
		if n.Kind == Settings {
			fmt.Fprintf(&b, "  - `%s` (%s): %s.\n", n.Pattern, n.Tool, n.Refuses)
		}
	}
	fmt.Fprintf(&b, "- **Hook managers' files**, refused in a repository that runs hooks (a hook installed, or `core.hooksPath` or `hook.*` in its config or yours) and listed elsewhere: %s.\n", codes(names, Hooked))
	fmt.Fprintf(&b, "- **Listed when new, refused when changed** (the tool asks the person before it first runs one; one already chosen may run again without asking): %s.\n", codes(names, Asked))
	fmt.Fprintf(&b, "- **Listed** (instructions an agent reads, or sourced by a few tools: committed and shown to you): %s.\n", codes(names, Instruction))
	return []byte(b.String())
}

func readmeStartup() []byte {
	var out []string
	for _, s := range StartupTable() {
		out = append(out, "`"+s.Pattern+"`")
	}
	return []byte("- " + strings.Join(out, ", ") + ";\n" +
		"- every protected name above (but agent instructions), at any depth: `~/.bashrc`, `~/.gitconfig`, `~/.config/fish`, another project's `.envrc` or `.vscode/`;\n" +
		"- git directories, whatever their name, another repository's own `core.hooksPath`, and what your git config names: its includes, `core.hooksPath`, `init.templateDir`, and the programs its settings run;\n" +
		"- the directories on your `PATH` (a leading `~` expanded, as the shell does), and `~/bin` and `~/.local/bin` (a login shell adds them once they exist), with what their symlinks point at;\n" +
		"- the files your shell start-up files source (`source ~/.nvm/nvm.sh`, `. \"$HOME/.cargo/env\"`);\n" +
		"- each under every spelling: your home and `PATH` directories as given and with their symlinks resolved, and the XDG directories both where `XDG_CONFIG_HOME` and `XDG_DATA_HOME` put them and at their defaults, which systemd and the desktop session read whatever a shell sets.\n")
}

func namesTable() []byte {
	var b strings.Builder
	b.WriteString("| Name | Kind | Tool | When it runs or reads it | Refused | Source |\n|---|---|---|---|---|---|\n")
	kinds := map[Kind]string{Protect: "refused", Settings: "settings", Hooked: "hook manager", Asked: "asked first", Instruction: "listed"}
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, n := range Builtin() {
		refused := "any change"
		switch n.Kind {
		case Settings:
			refused = n.Refuses
		case Hooked:
			refused = "any change, where hooks run"
		case Asked:
			refused = "a change to one that was there"
		case Instruction:
			refused = "nothing (listed)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", n.Pattern, kinds[n.Kind], cell(n.Tool), cell(n.When), cell(refused), cell(n.Source))
	}
	b.WriteString("\nOutside the workspace (the broker's start-up locations, `persist/startup.go`):\n\n| Location | Tool | When | Source |\n|---|---|---|---|\n")
	for _, s := range StartupTable() {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", s.Pattern, cell(s.Tool), cell(s.When), cell(s.Source))
	}
	return []byte(b.String())
}
