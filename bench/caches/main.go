// Command caches measures what reusing the host's tool caches read-only
// (as the lower layers of the private caches' overlays) gives the first
// build in a new workspace: `go build ./...` of a module with a few
// standard-library-heavy packages, each run in a NEW workspace (so a
// fresh private cache) with the host's build cache warm, side by side
// with bare `go build` in a new directory with the same warm cache; and
// `npm ci --offline` of a lock file whose packages are in the host's npm
// cache, sandboxed and bare. Runs are interleaved so that all see the
// same machine. With -aged, the host's cache entries are made two hours
// old before every go run: go then refreshes each entry it uses
// (os.Chtimes), which bare go does in place and the overlay by copying
// the entry up into the private layer (metacopy is not available in a
// user namespace). With -cold, one sandboxed build runs with an empty
// host cache: what every new workspace cost before. It prints Markdown
// tables for docs/BENCHMARKS.md.
//
//	go run ./bench/caches -n 10 [-aged] [-cold] [-npm 20] [-dir .] [-sandboxd bin/sandboxd]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/bench/internal/stats"
)

func main() {
	n := flag.Int("n", 10, "runs per command")
	bin := flag.String("sandboxd", "bin/sandboxd", "the sandboxd binary")
	dir := flag.String("dir", ".", "directory to make the throw-away homes and workspaces in (not /tmp: the sandbox has its own)")
	aged := flag.Bool("aged", false, "also measure go with host cache entries two hours old")
	cold := flag.Bool("cold", false, "also run one sandboxed build with an empty host cache")
	npmPkgs := flag.Int("npm", 20, "packages in the npm case (0: none)")
	flag.Parse()
	if err := run(*n, *bin, *dir, *aged, *cold, *npmPkgs); err != nil {
		fmt.Fprintln(os.Stderr, "caches:", err)
		os.Exit(1)
	}
}

type contender struct {
	name string
	// cmd starts the i-th run in a new workspace.
	cmd  func(ws string) *exec.Cmd
	took []time.Duration
}

// bench is one benchmark's scratch space.
type bench struct {
	root, home, bin string
	env             []string
	seq             int
}

func run(n int, bin, dir string, aged, cold bool, npmPkgs int) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	root, err := os.MkdirTemp(dir, ".bench-caches-")
	if err != nil {
		return err
	}
	root, _ = filepath.Abs(root)
	defer os.RemoveAll(root)
	b := &bench{root: root, home: filepath.Join(root, "home"), bin: bin}
	b.env = []string{"HOME=" + b.home, "PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
		"GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOPROXY=off", "npm_config_update_notifier=false"}
	if err := os.MkdirAll(b.home, 0o700); err != nil {
		return err
	}
	if err := b.goBench(n, aged, cold); err != nil {
		return err
	}
	if npmPkgs > 0 {
		return b.npmBench(n, npmPkgs)
	}
	return nil
}

// goModule is the module built: five packages over net/http,
// crypto/tls, html/template, go/types, database/sql and archive/zip.
var goModule = map[string]string{
	"go.mod":       "module example.com/bench\n\ngo 1.22\n",
	"main.go":      "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/bench/web\"\n\t\"example.com/bench/tpl\"\n\t\"example.com/bench/check\"\n\t\"example.com/bench/store\"\n)\n\nfunc main() { fmt.Println(web.Handler != nil, tpl.T != nil, check.Config != nil, store.Open) }\n",
	"web/web.go":   "package web\n\nimport (\n\t\"crypto/tls\"\n\t\"net/http\"\n)\n\nvar Handler http.Handler = http.NewServeMux()\n\nvar TLS = &tls.Config{}\n",
	"tpl/tpl.go":   "package tpl\n\nimport \"html/template\"\n\nvar T = template.Must(template.New(\"x\").Parse(\"{{.}}\"))\n",
	"check/c.go":   "package check\n\nimport (\n\t\"go/importer\"\n\t\"go/types\"\n)\n\nvar Config = &types.Config{Importer: importer.Default()}\n",
	"store/s.go":   "package store\n\nimport (\n\t\"archive/zip\"\n\t\"database/sql\"\n)\n\nfunc Open() (*sql.DB, *zip.Reader) { return nil, nil }\n",
	"store/doc.go": "// Package store is a benchmark's.\npackage store\n",
}

// newWorkspace writes files into a fresh directory.
func (b *bench) newWorkspace(files map[string]string) (string, error) {
	b.seq++
	ws := filepath.Join(b.root, fmt.Sprintf("ws-%d", b.seq))
	for name, body := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	return ws, nil
}

func (b *bench) command(ws string, argv ...string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = ws, b.env
	return cmd
}

// sandboxed runs argv under sandboxd in the workspace.
func (b *bench) sandboxed(ws string, argv ...string) *exec.Cmd {
	return b.command(ws, append([]string{b.bin, "run", "--workspace", ws, "--"}, argv...)...)
}

func (b *bench) goBench(n int, aged, cold bool) error {
	build := []string{"go", "build", "./..."}
	if cold {
		// Before host caches were reused: the private cache starts
		// empty. The host cache is still empty now.
		ws, err := b.newWorkspace(goModule)
		if err != nil {
			return err
		}
		t := time.Now()
		if out, err := b.sandboxed(ws, build...).CombinedOutput(); err != nil {
			return fmt.Errorf("cold build: %v\n%s", err, out)
		}
		fmt.Printf("sandboxed `go build ./...`, new workspace, empty host cache (before): %s\n\n", ms(time.Since(t)))
	}
	// Warm the host cache as a user's is: one bare build.
	ws, err := b.newWorkspace(goModule)
	if err != nil {
		return err
	}
	if out, err := b.command(ws, build...).CombinedOutput(); err != nil {
		return fmt.Errorf("warm-up: %v\n%s", err, out)
	}
	cs := []*contender{
		{name: "bare `go build ./...`, new directory", cmd: func(ws string) *exec.Cmd { return b.command(ws, build...) }},
		{name: "`sandboxd run -- go build ./...`, new workspace", cmd: func(ws string) *exec.Cmd { return b.sandboxed(ws, build...) }},
	}
	if err := b.measure(n, cs, goModule, nil); err != nil {
		return err
	}
	table("go build, warm host cache (entries used within the hour)", cs)
	if !aged {
		return nil
	}
	for _, c := range cs {
		c.took = nil
	}
	if err := b.measure(n, cs, goModule, b.ageGoCache); err != nil {
		return err
	}
	table("go build, warm host cache, entries two hours old", cs)
	return nil
}

// ageGoCache makes every host cache entry two hours old.
func (b *bench) ageGoCache() error {
	old := time.Now().Add(-2 * time.Hour)
	return filepath.WalkDir(filepath.Join(b.home, ".cache", "go-build"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chtimes(p, old, old)
	})
}

// measure runs each contender n times, interleaved, each run in a new
// workspace; before, if set, runs before every run.
func (b *bench) measure(n int, cs []*contender, files map[string]string, before func() error) error {
	for i := 0; i < n; i++ {
		for _, c := range cs {
			ws, err := b.newWorkspace(files)
			if err != nil {
				return err
			}
			if before != nil {
				if err := before(); err != nil {
					return err
				}
			}
			cmd := c.cmd(ws)
			t := time.Now()
			out, err := cmd.CombinedOutput()
			took := time.Since(t)
			if err != nil {
				return fmt.Errorf("%s: %v\n%s", c.name, err, out)
			}
			c.took = append(c.took, took)
			os.RemoveAll(ws)
		}
	}
	return nil
}

// npmBench packs count small packages into the host's npm cache and
// installs them from a lock file, offline.
func (b *bench) npmBench(n, count int) error {
	lock := map[string]any{"": nil}
	deps := map[string]string{}
	for i := 0; i < count; i++ {
		name := fmt.Sprintf("sbx-bench-%02d", i)
		pkg, err := b.newWorkspace(map[string]string{
			"package.json": fmt.Sprintf(`{"name":%q,"version":"1.0.0","main":"index.js"}`, name),
			"index.js":     strings.Repeat(fmt.Sprintf("module.exports.v%d = %q;\n", i, name), 200),
		})
		if err != nil {
			return err
		}
		integrity, err := b.packAndCache(pkg)
		if err != nil {
			return err
		}
		deps[name] = "1.0.0"
		lock["node_modules/"+name] = map[string]string{"version": "1.0.0", "integrity": integrity,
			"resolved": "https://registry.npmjs.org/" + name + "/-/" + name + "-1.0.0.tgz"}
	}
	lock[""] = map[string]any{"name": "ws", "version": "1.0.0", "dependencies": deps}
	pj, _ := json.Marshal(map[string]any{"name": "ws", "version": "1.0.0", "dependencies": deps})
	pl, _ := json.Marshal(map[string]any{"name": "ws", "version": "1.0.0", "lockfileVersion": 3, "requires": true, "packages": lock})
	files := map[string]string{"package.json": string(pj), "package-lock.json": string(pl)}
	ci := []string{"npm", "ci", "--offline", "--no-audit", "--no-fund"}
	cs := []*contender{
		{name: "bare `npm ci --offline`", cmd: func(ws string) *exec.Cmd { return b.command(ws, ci...) }},
		{name: "`sandboxd run -- npm ci --offline`, new workspace", cmd: func(ws string) *exec.Cmd { return b.sandboxed(ws, ci...) }},
	}
	if err := b.measure(n, cs, files, nil); err != nil {
		return err
	}
	table(fmt.Sprintf("npm ci --offline, %d packages from the host's npm cache", count), cs)
	return nil
}

// packAndCache packs the package in dir and adds it to the host's npm
// cache; it returns the tarball's integrity.
func (b *bench) packAndCache(dir string) (string, error) {
	out, err := b.command(dir, "npm", "pack", "--json", "--silent").Output()
	if err != nil {
		return "", fmt.Errorf("npm pack: %v", err)
	}
	var packed []struct{ Filename, Integrity string }
	if i := strings.Index(string(out), "["); i < 0 || json.Unmarshal(out[i:], &packed) != nil || len(packed) != 1 {
		return "", fmt.Errorf("npm pack: %s", out)
	}
	if out, err := b.command(dir, "npm", "cache", "add", "./"+packed[0].Filename).CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm cache add: %v\n%s", err, out)
	}
	return packed[0].Integrity, nil
}

func table(title string, cs []*contender) {
	bare := stats.Median(cs[0].took)
	fmt.Printf("%s\n\n| command | runs | median | p10 | p90 | median / bare |\n|---|---|---|---|---|---|\n", title)
	for _, c := range cs {
		m := stats.Median(c.took)
		fmt.Printf("| %s | %d | %s | %s | %s | %.2f |\n", c.name, len(c.took), ms(m),
			ms(stats.Pct(c.took, 10)), ms(stats.Pct(c.took, 90)), float64(m)/float64(bare))
	}
	fmt.Println()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d.Microseconds())/1000) }
