package guardrails

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docs/ARCHITECTURE.md's package map is a table whose rows name one or
// more packages (first cell, each in backquotes) and, in the last cell,
// the packages of ours each imports: one list for all, or one list per
// package separated by ";", in the first cell's order. "none" is the
// empty list. A name ending in "/..." stands for a folder of programs
// (bench) and is not checked. The map is true when every row's lists
// are what the code imports and every package of ours with production
// code has a row.

// mapRow is one row of the package map.
type mapRow struct {
	pkgs    []string   // relative to the module
	imports [][]string // one list per package (or one for all)
}

// mapHeader is the package map's header row.
const mapHeader = "| Package | Owns | Imports of ours |"

// readMap reads the package map's rows from the document's text: the
// table under mapHeader.
func readMap(doc string) []mapRow {
	row := regexp.MustCompile("^\\| (`[^|]+`) \\|[^|]*\\| ([^|]*) \\|$")
	_, table, _ := strings.Cut(doc, "\n"+mapHeader+"\n")
	table, _, _ = strings.Cut(table, "\n\n")
	var rows []mapRow
	for _, line := range strings.Split(table, "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var r mapRow
		for _, name := range strings.Split(m[1], ",") {
			r.pkgs = append(r.pkgs, strings.Trim(strings.TrimSpace(name), "`"))
		}
		for _, list := range strings.Split(m[2], ";") {
			list = strings.TrimSpace(list)
			if strings.HasPrefix(list, "`") { // "`bench/latency`: ...": a program's own
				continue
			}
			var items []string
			if list != "none" {
				items = splitList(list)
			}
			r.imports = append(r.imports, items)
		}
		rows = append(rows, r)
	}
	return rows
}

// checkMap compares the map with the graph.
func checkMap(g graph, rows []mapRow) []string {
	const rule = "docs/ARCHITECTURE.md's package map names each package of ours and what it imports"
	var out []string
	seen := map[string]bool{}
	for _, r := range rows {
		if len(r.imports) != 1 && len(r.imports) != len(r.pkgs) {
			out = append(out, fmt.Sprintf("rule %q: the row of %s has %d import lists for %d packages", rule, strings.Join(r.pkgs, ", "), len(r.imports), len(r.pkgs)))
			continue
		}
		for i, name := range r.pkgs {
			if strings.HasSuffix(name, "/...") {
				continue
			}
			seen[name] = true
			p := g[module+"/"+name]
			if p == nil || !hasCode(p) {
				out = append(out, fmt.Sprintf("rule %q: the map names %s, which is no package of ours", rule, name))
				continue
			}
			want := r.imports[min(i, len(r.imports)-1)]
			got := directOurs(p)
			if !slices.Equal(sortedCopy(want), got) {
				out = append(out, fmt.Sprintf("rule %q: %s imports %s, the map says %s", rule, name, listOrNone(got), listOrNone(sortedCopy(want))))
			}
		}
	}
	for _, p := range sortedOurs(g) {
		rel := short(p)
		if hasCode(g[p]) && !seen[rel] && !strings.HasPrefix(rel, "bench/") {
			out = append(out, fmt.Sprintf("rule %q: %s has no row", rule, rel))
		}
	}
	return out
}

// hasCode reports whether a package has production files.
func hasCode(p *pkg) bool { return len(p.GoFiles)+len(p.CgoFiles) > 0 }

// directOurs lists the packages of ours p imports directly, sorted.
func directOurs(p *pkg) []string {
	var out []string
	for _, imp := range p.Imports {
		if isOurs(imp) {
			out = append(out, short(imp))
		}
	}
	slices.Sort(out)
	return out
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func TestArchitectureMap(t *testing.T) {
	g := loadGraph(t)
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := readMap(string(b))
	if len(rows) < 10 {
		t.Fatalf("docs/ARCHITECTURE.md: %d rows of the package map read; has its table changed form?", len(rows))
	}
	for _, msg := range checkMap(g, rows) {
		t.Error(msg)
	}
}

// TestArchitectureMapCatches proves the map's check fires on a row that
// is wrong each way and on a package without a row.
func TestArchitectureMapCatches(t *testing.T) {
	m := func(rel string) string { return module + "/" + rel }
	g := graph{}
	add := func(p string, imports ...string) {
		g[p] = &pkg{ImportPath: p, Name: "x", GoFiles: []string{"x.go"}, Imports: imports}
	}
	add(m("broker"), m("grants"), m("pathtree"), "strings")
	add(m("grants"))
	add(m("pathtree"))
	add(m("unlisted"))
	add(m("bench/launch"), m("grants"))
	doc := strings.Join([]string{
		"# Map", "",
		mapHeader,
		"|---|---|---|",
		"| `broker` | decides | grants, ruletext |",
		"| `grants`, `pathtree` | grants; paths | none |",
		"| `ghost` | nothing | none |",
		"| `bench/...` | programs | none; `bench/latency`: grants |",
		"",
		"| Command | What | Exit |",
		"| `doctor` | checks | 1 |",
	}, "\n")
	all := strings.Join(checkMap(g, readMap(doc)), "\n")
	for _, want := range []string{
		"broker imports grants, pathtree, the map says grants, ruletext",
		"the map names ghost, which is no package of ours",
		"unlisted has no row",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no violation %q\ngot:\n%s", want, all)
		}
	}
	for _, quiet := range []string{"grants imports", "pathtree imports", "bench", "doctor"} {
		if strings.Contains(all, quiet) {
			t.Errorf("a row that holds is reported (%s):\n%s", quiet, all)
		}
	}
}
