package persist

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The Settings rules read untrusted files: each parser is fuzzed for
// crashes and determinism, and the two whose tools are installed here
// (npm's ini decoder, Mercurial's config parser) are compared with the
// real parser on their seeds and on generated inputs.

var iniSeeds = []string{
	"registry=https://r/\nscript-shell=/x\n",
	"script_shell=/x", "Script-Shell = /x", "\ufeffscript-shell=/x", "\u00a0script-shell\u00a0=/x",
	"\"script\\u002dshell\"=/x", "'script-shell'=/x", "'[\"script-shell\"]'=/x", "'[\"a\",\"b\"]'=x",
	"script-shell#c=/x", "script-shell;c=/x", "script-shell\\;c=/x", "script-shell\\#=/x", "a\\\\=b",
	"k=v;comment", "k=v\\;kept", "k=\"quoted ; value\"", "k='single'", "k='\"both\"'", "k=\"\\\"esc\\\"\"",
	"k", "k=", "=v", "  =v", "[s]\nk=v", "[s.t]\nk=v", "k=v\n[k.x]\ny=z", "[]\nk=v", "[__proto__]\nk=v",
	"__proto__=x", "k[]=a\nk[]=b", "k=a\nk[]=b", "k[]=a\nk=b", "[]=x", "k[] = a",
	"a=1\rb=2\r\nc=3\n\r\nd=4", "k=v\u2028w", "k\u2028=v", "k=true", "k=false", "k=null", "k=\"true\"",
	"'123'=x", "'1e21'=x", "'0.5'=x", "'null'=x", "'true'=x", "\"\"=x", "''=x", "'=x", "\"=x",
	"k=\"unterminated", "k='unterminated", "  # indented comment\nk=v", "\t;c\nk=v", "k=v\xff\xfe",
	"${K}=/x", "k=${V}",
}

// iniTop is what npm takes from an ini file: the top-level keys that are
// not sections, with ini's values (true, false, null and lists decoded).
func iniTop(ents []iniEntry) map[string]any {
	out := map[string]any{}
	for _, e := range ents {
		if e.sectioned || e.key == "__proto__" {
			continue
		}
		var v any = e.value
		switch e.value {
		case "true":
			v = true
		case "false":
			v = false
		case "null":
			v = nil
		}
		if e.array {
			if _, ok := out[e.key].([]any); !ok {
				if old, had := out[e.key]; had {
					out[e.key] = []any{old}
				} else {
					out[e.key] = []any{}
				}
			}
		}
		if a, ok := out[e.key].([]any); ok {
			out[e.key] = append(a, v)
		} else {
			out[e.key] = v
		}
	}
	return out
}

// genINI makes n inputs from pieces an attacker would combine.
func genINI(n int) []string {
	return genFrom(1, n, 12, []string{"script-shell", "k", "=", "==", "\"", "'", ";", "#", "\\", "[", "]", "[]", " ", "\t", "\r", "\n",
		"\r\n", "\ufeff", "\u00a0", "\u2028", "\\u002d", "true", "null", "/x", ".", "__proto__", "${K}", "[\"a\"]"})
}

// genFrom makes n inputs of up to most+1 pieces each, from a fixed seed.
func genFrom(seed int64, n, most int, pieces []string) []string {
	r := rand.New(rand.NewSource(seed))
	out := make([]string, n)
	for i := range out {
		var b strings.Builder
		for j := r.Intn(most); j >= 0; j-- {
			b.WriteString(pieces[r.Intn(len(pieces))])
		}
		out[i] = b.String()
	}
	return out
}

// nodeINI decodes each input with npm's own ini package.
func nodeINI(t testing.TB, inputs []string) []map[string]any {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	// npm's own copy of ini: where npm installed itself, or Debian's.
	var cands []string
	if root, err := exec.Command("npm", "root", "-g").Output(); err == nil {
		cands = append(cands, filepath.Join(strings.TrimSpace(string(root)), "npm", "node_modules", "ini"))
	}
	cands = append(cands, "/usr/lib/node_modules/npm/node_modules/ini", "/usr/share/nodejs/ini")
	ini := ""
	for _, c := range cands {
		if _, err := os.Stat(c); err == nil {
			ini = c
			break
		}
	}
	if ini == "" {
		t.Skipf("npm's ini package is not installed (looked in %v)", cands)
	}
	enc := make([]string, len(inputs))
	for i, s := range inputs {
		enc[i] = base64.StdEncoding.EncodeToString([]byte(s))
	}
	in, _ := json.Marshal(enc)
	script := `const ini = require(process.argv[1]); let s = ""; process.stdin.on("data", d => s += d).on("end", () => {
		const out = JSON.parse(s).map(b => { let o; try { o = ini.decode(Buffer.from(b, "base64").toString("utf8")); } catch (e) { return null; } const r = {};
			for (const k of Object.keys(o)) { if (o[k] === null || typeof o[k] !== "object" || Array.isArray(o[k])) r[k] = o[k]; } return r; });
		process.stdout.write(JSON.stringify(out)); });`
	cmd := exec.Command(node, "-e", script, ini)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var out []map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestINIAgreesWithNode: for the seeds and generated inputs, the keys and
// values sandboxd reads from an .npmrc are npm's own.
func TestINIAgreesWithNode(t *testing.T) {
	inputs := append(append([]string{}, iniSeeds...), genINI(3000)...)
	want := nodeINI(t, inputs)
	for i, s := range inputs {
		if want[i] == nil {
			continue // ini itself throws on it: npm runs nothing
		}
		got := iniTop(parseINI([]byte(s)))
		// JSON both ways, as node printed it.
		b, _ := json.Marshal(got)
		var norm map[string]any
		json.Unmarshal(b, &norm)
		// Every setting npm sees, sandboxd sees with its value. (It may
		// see more: a dotted section's name replaces a key of the same
		// first part in npm, and sandboxd keeps both.)
		for k, v := range want[i] {
			if mine, ok := norm[k]; !ok || !reflect.DeepEqual(mine, v) {
				t.Errorf("ini %q: npm reads %q = %v, sandboxd %v (%v)\n sandboxd %v\n      npm %v", s, k, v, mine, ok, norm, want[i])
			}
		}
	}
}

func FuzzINI(f *testing.F) {
	for _, s := range iniSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, c := parseINI(b), parseINI(b)
		if !reflect.DeepEqual(a, c) {
			t.Fatalf("parseINI(%q) is not deterministic", b)
		}
		if _, err := npmrcSettings(b, nil); err != nil {
			t.Fatalf("npmrcSettings(%q): %v (npm reads every file)", b, err)
		}
	})
}

var hgSeeds = []string{
	"[paths]\ndefault = https://x/r\n", "[hooks]\npre-status = touch x\n", "[hooks] junk\npre-status=x",
	"[ hooks ]\nx=y", "[Hooks]\nx=y", "[a]b]\nx=y", "[ui]\nusername = a\n  [hooks]\n  pre-status = x",
	"[ui]\nusername = a\n# c\n  more", "[ui]\nusername = a\n;c\n\tmore\n", "[ui]\rusername=x\r[hooks]\rpre-status=x\r",
	"[ui]\r\nusername=x\r\n", "\xef\xbb\xbf[ui]\nusername=x", "[ui]\n\xef\xbb\xbfusername=x", "%include x\n",
	"%include  x y \n", "%unset x\n", "%unset a=b\n", "[ui]\n%unset username", " x = y", "x\n", "[ui\n", "=x", "x=",
	"[a]\nk = v ; c", "[a]\nk\t=\tv\t", "[a]\nk\v= v", "[a]\n\vk = v", "[a]\nk = \v", "[a]\nk = v\f\n", "[a]\n \n",
	"[a]\nk=v\n \t \nm=n", "[a]\nk = v\n\v cont\n", "[a]\nk =\n cont", "[x]\na=b\n[x]\na=c", "[a]\n[b]\n[]\n",
	"[extensions]\nfoo = !\nbar = /x.py\n", "[a]\nk=v\x80\n",
}

// hgParse parses each input with Mercurial's own config parser (%include
// lines read nothing) and returns, per input, its final items or an
// error.
func hgParse(t testing.TB, inputs []string) []struct {
	Items [][3]string
	Err   bool
} {
	t.Helper()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import mercurial.config").Run(); err != nil {
		t.Skip("Mercurial's python package is not installed (Debian: mercurial)")
	}
	enc := make([]string, len(inputs))
	for i, s := range inputs {
		enc[i] = base64.StdEncoding.EncodeToString([]byte(s))
	}
	in, _ := json.Marshal(enc)
	script := `import sys, json, base64
from mercurial import config, error
out = []
for b in json.load(sys.stdin):
    c = config.config()
    try:
        c.parse(b"x", base64.b64decode(b), include=lambda *a, **k: None)
        items = []
        for s in c.sections():
            for k, v in c.items(s):
                items.append([base64.b64encode(s).decode(), base64.b64encode(k).decode(), base64.b64encode(v).decode()])
        out.append({"Items": items, "Err": False})
    except error.ConfigError:
        out.append({"Items": None, "Err": True})
json.dump(out, sys.stdout)`
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	var out []struct {
		Items [][3]string
		Err   bool
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		for j, it := range out[i].Items {
			for k := range it {
				d, _ := base64.StdEncoding.DecodeString(it[k])
				out[i].Items[j][k] = string(d)
			}
		}
	}
	return out
}

// hgFinal is what hg keeps of parsed entries: the last value of each
// (section, key), %unset removing it; sections in order of first sight.
func hgFinal(ents []hgEntry) [][3]string {
	type sk struct{ s, k string }
	val := map[sk]string{}
	var order []sk
	for _, e := range ents {
		id := sk{e.section, e.key}
		switch {
		case e.include:
		case e.unset:
			delete(val, id)
		default:
			if _, ok := val[id]; !ok {
				order = append(order, id)
			}
			val[id] = e.value
		}
	}
	var out [][3]string
	for _, id := range order {
		if v, ok := val[id]; ok {
			out = append(out, [3]string{id.s, id.k, v})
		}
	}
	return out
}

func genHgrc(n int) []string {
	return genFrom(2, n, 14, []string{"[", "]", "[hooks]", "[ui]", "k", "pre-status", "=", " ", "\t", "\v", "\f", "\r", "\n", "\r\n",
		";", "#", "%include", "%unset", "!", "\xef\xbb\xbf", "x"})
}

// TestHgrcAgreesWithMercurial: what sandboxd reads from an hgrc (which
// settings, which values, whether hg refuses the file) is what hg reads.
func TestHgrcAgreesWithMercurial(t *testing.T) {
	inputs := append(append([]string{}, hgSeeds...), genHgrc(3000)...)
	want := hgParse(t, inputs)
	for i, s := range inputs {
		ents, err := parseHgrc([]byte(s))
		if (err != nil) != want[i].Err {
			t.Errorf("hgrc %q: sandboxd error %v, hg error %v", s, err, want[i].Err)
			continue
		}
		if err != nil {
			continue
		}
		got := hgFinal(ents)
		w := want[i].Items
		sortItems := func(x [][3]string) [][3]string {
			y := append([][3]string(nil), x...)
			for a := range y {
				for b := a + 1; b < len(y); b++ {
					if fmt.Sprint(y[b]) < fmt.Sprint(y[a]) {
						y[a], y[b] = y[b], y[a]
					}
				}
			}
			return y
		}
		if len(got) != len(w) || (len(got) > 0 && !reflect.DeepEqual(sortItems(got), sortItems(w))) {
			t.Errorf("hgrc %q:\n sandboxd %q\n       hg %q", s, got, w)
		}
	}
}

func FuzzHgrc(f *testing.F) {
	for _, s := range hgSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, errA := parseHgrc(b)
		c, errC := parseHgrc(b)
		if (errA == nil) != (errC == nil) || !reflect.DeepEqual(a, c) {
			t.Fatalf("parseHgrc(%q) is not deterministic", b)
		}
	})
}

// FuzzSettings: every Settings rule takes any bytes without a crash, and
// decides the same twice.
func FuzzSettings(f *testing.F) {
	for _, s := range append(append([]string{}, iniSeeds...), hgSeeds...) {
		f.Add([]byte(s))
	}
	for _, s := range []string{"yarnPath: x\n", "? [yarnPath]\n: x\n", "a: &a [*a]\n", "a: &a\n  b: *a\n", "<<: {x: 1}\n",
		"[toolchain]\npath = \"/x\"\n", "toolchain = { path = \"/x\" }\n", "[build]\nrustflags = [\"-C\", \"linker=x\"]\n",
		"stable\n", "/x\n", "[a]\nb = [[1], {c = 2}]\n", "---\na: 1\n---\nb: 2\n", "# yarn lockfile v1\nyarnPath \"x\"\n"} {
		f.Add([]byte(s))
	}
	env := settingsEnv{c: NewChecker(Config{Workspace: "/w", Final: Host{}, Before: Host{}, Names: NewMatcher(Builtin())}), dir: "/w"}
	var rules []Name
	for _, n := range Builtin() {
		if n.Kind == Settings {
			rules = append(rules, n)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, n := range rules {
			a, errA := n.Settings(b, env)
			c, errC := n.Settings(b, env)
			if (errA == nil) != (errC == nil) || !reflect.DeepEqual(a, c) {
				t.Fatalf("%s rule on %q is not deterministic", n.Pattern, b)
			}
		}
	})
}
