package credstore

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/golden"
)

// TestDocumented keeps docs/CREDENTIALS.md's tables in step with the
// class (go test -update rewrites them).
func TestDocumented(t *testing.T) {
	golden.Block(t, "../docs/CREDENTIALS.md", "stores-table", storesTable())
	golden.Block(t, "../docs/CREDENTIALS.md", "names-table", namesTable())
	golden.Block(t, "../docs/CREDENTIALS.md", "clusters-table", clustersTable())
}

func clustersTable() []byte {
	var b strings.Builder
	b.WriteString("| Place | Tool | Documentation |\n|---|---|---|\n")
	for _, s := range ClusterConfigs() {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.At, s.Tool, s.Doc)
	}
	return []byte(b.String())
}

func storesTable() []byte {
	var b strings.Builder
	b.WriteString("| Store | Tool | Documentation |\n|---|---|---|\n")
	for _, s := range Stores() {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.At, s.Tool, s.Doc)
	}
	return []byte(b.String())
}

func namesTable() []byte {
	byClass := map[Class][]string{}
	var classes []Class
	for _, p := range namePatterns() {
		if _, ok := byClass[p.class]; !ok {
			classes = append(classes, p.class)
		}
		var notes []string
		if p.dir {
			notes = append(notes, "directory")
		}
		if p.scope == toolState {
			notes = append(notes, "tool state")
		}
		if p.sniff {
			notes = append(notes, "content")
		}
		if p.parent != "" {
			notes = append(notes, "in `"+p.parent+"/`")
		}
		if p.code {
			notes = append(notes, "not code")
		}
		s := "`" + p.glob + "`"
		if len(notes) > 0 {
			s += " (" + strings.Join(notes, ", ") + ")"
		}
		byClass[p.class] = append(byClass[p.class], s)
	}
	var b strings.Builder
	b.WriteString("| Class | Names |\n|---|---|\n")
	for _, c := range classes {
		fmt.Fprintf(&b, "| %s | %s |\n", c, strings.Join(byClass[c], ", "))
	}
	var not []string
	for name, why := range notStores {
		not = append(not, fmt.Sprintf("`%s` (%s)", name, why))
	}
	sort.Strings(not)
	fmt.Fprintf(&b, "| never | %s |\n", strings.Join(not, ", "))
	return []byte(b.String())
}
