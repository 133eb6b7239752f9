package agentinstall

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
	"github.com/sandboxd/sandboxd/statedir"
)

var update = flag.Bool("update", false, "rewrite the results in testdata/merge/*.txtar")

// The sandboxd the golden cases install, and the one a moved install
// names: neither needs to exist for install.
const (
	goldenSandboxd = "/opt/sandboxd/bin/sandboxd"
	movedSandboxd  = "/usr/local/bin/sandboxd"
)

// testEnv is an Env under root, the home root/home with its XDG
// defaults.
func testEnv(root string) Env {
	home := filepath.Join(root, "home")
	return Env{
		Sandboxd:  goldenSandboxd,
		Layout:    statedir.For(filepath.Join(home, ".config"), filepath.Join(home, ".local", "state")),
		Home:      home,
		ClaudeDir: filepath.Join(home, ".claude"),
		CodexHome: filepath.Join(home, ".codex"),
	}
}

// TestMerge runs each case of testdata/merge: the archive's comment
// starts with "steps:" and the steps (install AGENT, install-moved AGENT,
// install-dry AGENT, uninstall AGENT, uninstall-dry AGENT, and user N:
// the user writes the files of the sections user-N/home/...); the files
// under home/ are the user's before ($ROOT is the test's directory). After each step N the archive holds
// want-N-STEP (what it printed, or its error) and after-N/home/... (every
// file under the home but sandboxd's state, the test's directory
// written $ROOT). -update rewrites those sections. A comment line
// "exact-restore" also checks that the last step leaves every file as it
// was, byte for byte, and no record.
func TestMerge(t *testing.T) {
	cases, _ := filepath.Glob("testdata/merge/*.txtar")
	if len(cases) == 0 {
		t.Fatal("no cases in testdata/merge")
	}
	for _, c := range cases {
		t.Run(strings.TrimSuffix(filepath.Base(c), ".txtar"), func(t *testing.T) { runMergeCase(t, c) })
	}
}

func runMergeCase(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ar := txtar.Parse(b)
	root := t.TempDir()
	e := testEnv(root)
	out := &txtar.Archive{Comment: ar.Comment}
	var inputs []txtar.File
	for _, f := range ar.Files {
		if strings.HasPrefix(f.Name, "home/") {
			inputs = append(inputs, f)
			writeTestFile(t, filepath.Join(root, f.Name), bytes.ReplaceAll(f.Data, []byte("$ROOT"), []byte(root)))
		}
		if strings.HasPrefix(f.Name, "user-") {
			out.Files = append(out.Files, f)
		}
	}
	out.Files = append(inputs, out.Files...)
	steps, exact := caseSteps(t, ar.Comment)
	for i, step := range steps {
		res := strings.ReplaceAll(runStep(e, step), root, "$ROOT")
		if n, ok := strings.CutPrefix(step, "user "); ok {
			res = userEdit(t, ar, root, n)
		}
		n := strings.Fields(step)[0]
		out.Files = append(out.Files, txtar.File{Name: "want-" + itoa(i+1) + "-" + n, Data: []byte(res)})
		for _, f := range snapshot(t, root) {
			f.Name = "after-" + itoa(i+1) + "/" + f.Name
			out.Files = append(out.Files, f)
		}
	}
	if exact {
		got := snapshot(t, root)
		if !slices.EqualFunc(got, inputs, func(a, b txtar.File) bool { return a.Name == b.Name && bytes.Equal(a.Data, b.Data) }) {
			t.Errorf("the files are not as they were before install")
		}
		if _, err := os.Stat(e.Layout.Install(strings.Fields(steps[0])[1])); err == nil {
			t.Errorf("the install record is still there")
		}
	}
	got := txtar.Format(out)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(got, b) {
		t.Errorf("%s differs (go test -update rewrites it); got:\n%s", path, got)
	}
}

func caseSteps(t *testing.T, comment []byte) (steps []string, exact bool) {
	for _, l := range strings.Split(string(comment), "\n") {
		if s, ok := strings.CutPrefix(l, "steps:"); ok {
			for _, st := range strings.Split(s, ",") {
				steps = append(steps, strings.TrimSpace(st))
			}
		}
		exact = exact || strings.TrimSpace(l) == "exact-restore"
	}
	if len(steps) == 0 {
		t.Fatal("the case names no steps")
	}
	return steps, exact
}

// userEdit is step "user N": the user writes each file of the
// archive's user-N/home/... sections.
func userEdit(t *testing.T, ar *txtar.Archive, root, n string) string {
	for _, f := range ar.Files {
		if name, ok := strings.CutPrefix(f.Name, "user-"+n+"/"); ok {
			writeTestFile(t, filepath.Join(root, name), bytes.ReplaceAll(f.Data, []byte("$ROOT"), []byte(root)))
		}
	}
	return ""
}

// runStep runs one step and says what it printed, as the CLI would.
func runStep(e Env, step string) string {
	f := strings.Fields(step)
	verb, agent := f[0], f[1]
	if verb == "user" {
		return ""
	}
	var changes []Change
	var err error
	switch verb {
	case "install", "install-dry":
		changes, err = Install(agent, e, Options{DryRun: verb == "install-dry"})
	case "install-moved":
		e.Sandboxd = movedSandboxd
		changes, err = Install(agent, e, Options{})
	case "uninstall", "uninstall-dry":
		changes, err = Uninstall(agent, e, Options{DryRun: verb == "uninstall-dry"})
	default:
		return "unknown step " + verb + "\n"
	}
	var b strings.Builder
	for _, c := range changes {
		if c.File != "" {
			b.WriteString(e.shown(c.File) + ": ")
		}
		b.WriteString(c.Did + "\n")
	}
	if err != nil {
		b.WriteString("error: " + publicMessage(err) + "\n")
	}
	return b.String()
}

// snapshot is every file under root/home but sandboxd's state, sorted,
// with root written $ROOT.
func snapshot(t *testing.T, root string) []txtar.File {
	var out []txtar.File
	home := filepath.Join(root, "home")
	state := filepath.Join(home, ".local", "state")
	filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if p == state {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(root, p)
			out = append(out, txtar.File{Name: rel, Data: bytes.ReplaceAll(b, []byte(root), []byte("$ROOT"))})
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func writeTestFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
