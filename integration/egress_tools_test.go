package integration

import (
	"archive/zip"
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Everyday tools through the egress proxy, unmodified: they find it
// through the variables sandboxd sets, and reach origins the test
// starts, allowed by a rule naming the origin's address and port. Each
// checks what the tool fetched (content, files in the workspace) and
// that the origin was really asked.

// TestEgressCurl: curl over plain HTTP and over HTTPS (a CONNECT tunnel;
// the origin's certificate is verified end to end, so the proxy does not
// intercept TLS).
func TestEgressCurl(t *testing.T) {
	t.Parallel()
	egNeed(t, "curl")
	forEach(t, func(t *testing.T, e *env) {
		oh := egNewOrigin(t, "127.0.0.1:0", false, nil)
		ots := egNewOrigin(t, "127.0.0.1:0", true, nil)
		ca := ots.caFile(t, e)
		pol := egPolicy(t, e, []string{oh.addr, ots.addr}, nil, nil, "")
		r := e.sandboxd("run", "--policy", pol, "-c", fmt.Sprintf(
			"curl -sS -m 10 http://%s/plain; curl -sS -m 10 --cacert %s https://%s/tls; echo END\n", oh.addr, ca, ots.addr))
		netRan(t, r)
		if !strings.Contains(r.stdout, oh.body) || !strings.Contains(r.stdout, ots.body) {
			t.Errorf("curl did not get both origins' answers\n%s", r)
		}
		oh.mustHits(t, 1, r)
		ots.mustHits(t, 1, r)
		for _, o := range []*egOrigin{oh, ots} {
			if b := egMustAllow(t, r, o.addr, 1); b != nil && b["source"] != "policy" {
				t.Errorf("boundary %v: want source policy", b)
			}
		}
	})
}

// egHostGit runs git on the host in dir.
func egHostGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=Host", "-c", "user.email=host@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("host git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// egGitServer is a git smart-HTTP origin over TLS (git http-backend
// behind net/http/cgi) serving repo.git, whose main holds hello.txt.
type egGitServer struct {
	o          *egOrigin
	root, work string
	ca, first  string
}

func egNewGitServer(t *testing.T, e *env) *egGitServer {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Skipf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Skipf("git http-backend is not installed: %v", err)
	}
	g := &egGitServer{root: filepath.Join(e.dir, "git-origin"), first: "FIRST-" + randHex(6)}
	g.work = filepath.Join(g.root, "work")
	if err := os.MkdirAll(g.work, 0o755); err != nil {
		t.Fatal(err)
	}
	egHostGit(t, g.root, "init", "-q", "--bare", "-b", "main", "repo.git")
	egHostGit(t, g.work, "init", "-q", "-b", "main")
	g.commit(t, "hello.txt", g.first)
	h := &cgi.Handler{Path: backend, Root: "/", Dir: g.root,
		Env: []string{"GIT_PROJECT_ROOT=" + g.root, "GIT_HTTP_EXPORT_ALL=1", "HOME=" + g.root, "GIT_CONFIG_NOSYSTEM=1"}}
	g.o = egNewOrigin(t, "127.0.0.1:0", true, h)
	g.ca = g.o.caFile(t, e)
	return g
}

// commit adds a file with content on the origin's main.
func (g *egGitServer) commit(t *testing.T, name, content string) {
	t.Helper()
	os.WriteFile(filepath.Join(g.work, name), []byte(content+"\n"), 0o644)
	egHostGit(t, g.work, "add", name)
	egHostGit(t, g.work, "commit", "-q", "-m", name)
	egHostGit(t, g.work, "push", "-q", filepath.Join(g.root, "repo.git"), "main")
}

// TestEgressGit: git clone and then git fetch over HTTPS from a real
// smart-HTTP server (git http-backend behind net/http/cgi, over TLS),
// with git's CA file from the caller's environment; the cloned and the
// fetched files are in the workspace afterwards.
func TestEgressGit(t *testing.T) {
	t.Parallel()
	egNeed(t, "git")
	forEach(t, func(t *testing.T, e *env) {
		g := egNewGitServer(t, e)
		o := g.o
		second := "SECOND-" + randHex(6)
		pol := egPolicy(t, e, []string{o.addr}, nil, nil, "")
		gitEnv := []string{"GIT_SSL_CAINFO=" + g.ca}

		r := e.sandboxdOpts(runOpts{env: gitEnv}, "run", "--policy", pol, "-c", fmt.Sprintf(
			"test -n \"$GIT_SSL_CAINFO\" || echo NO_CAINFO\ngit clone -q https://%s/repo.git clone && cat clone/hello.txt; echo END\n", o.addr))
		netRan(t, r)
		if strings.Contains(r.stdout, "NO_CAINFO") {
			t.Fatalf("GIT_SSL_CAINFO did not reach the command (the env filter dropped it)\n%s", r)
		}
		if !strings.Contains(r.stdout, g.first) {
			t.Fatalf("git clone through the proxy failed\n%s\n%s", r, o.summary())
		}
		if b, err := os.ReadFile(filepath.Join(e.ws, "clone", "hello.txt")); err != nil || string(b) != g.first+"\n" {
			t.Fatalf("the clone is not in the workspace: %q %v\n%s", b, err, r)
		}
		if o.count() == 0 {
			t.Fatalf("the git server was never asked")
		}
		egMustAllow(t, r, o.addr, 1)

		g.commit(t, "second.txt", second)
		before := o.count()
		r = e.sandboxdOpts(runOpts{env: gitEnv}, "run", "--policy", pol, "-c",
			"cd clone && git fetch -q origin && git merge -q --ff-only origin/main && cat second.txt; echo END\n")
		netRan(t, r)
		if !strings.Contains(r.stdout, second) {
			t.Fatalf("git fetch through the proxy failed\n%s\n%s", r, o.summary())
		}
		if b, err := os.ReadFile(filepath.Join(e.ws, "clone", "second.txt")); err != nil || string(b) != second+"\n" {
			t.Fatalf("the fetched file is not in the workspace: %q %v\n%s", b, err, r)
		}
		if o.count() == before {
			t.Fatalf("git fetch never asked the server")
		}
	})
}

// TestEgressGitCallerConfigCount: a caller whose environment carries
// git's own GIT_CONFIG_COUNT/GIT_CONFIG_KEY_n/GIT_CONFIG_VALUE_n entries
// (a documented git mechanism) can still clone through the proxy: the
// proxy's http.proxy entry must not leave git with a count naming a key
// that is not there.
func TestEgressGitCallerConfigCount(t *testing.T) {
	t.Parallel()
	egNeed(t, "git")
	forEach(t, func(t *testing.T, e *env) {
		g := egNewGitServer(t, e)
		pol := egPolicy(t, e, []string{g.o.addr}, nil, nil, "")
		r := e.sandboxdOpts(runOpts{env: []string{"GIT_SSL_CAINFO=" + g.ca,
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.abbrev", "GIT_CONFIG_VALUE_0=12"}}, "run", "--policy", pol, "-c",
			fmt.Sprintf("git clone -q https://%s/repo.git clone && cat clone/hello.txt; echo END\n", g.o.addr))
		netRan(t, r)
		if !strings.Contains(r.stdout, g.first) {
			t.Errorf("with the caller's GIT_CONFIG_COUNT=1, git clone through the proxy failed\n%s\n%s", r, g.o.summary())
		}
	})
}

// TestEgressNpm: npm install of a package (made with npm pack on the
// host) from a registry the test serves over plain HTTP, with a fresh
// cache: the package lands in the workspace's node_modules.
func TestEgressNpm(t *testing.T) {
	t.Parallel()
	egNeed(t, "npm", "node")
	forEach(t, func(t *testing.T, e *env) {
		name := "egress-npm-" + randHex(3)
		token := "NPM-" + randHex(6)
		src := filepath.Join(e.dir, "npm-src", name)
		e.writeFile(filepath.Join(src, "package.json"), fmt.Sprintf(`{"name": %q, "version": "1.0.0", "main": "index.js", "license": "MIT", "description": "egress test"}`, name), 0o644)
		e.writeFile(filepath.Join(src, "index.js"), fmt.Sprintf("module.exports = %q;\n", token), 0o644)
		out := filepath.Join(e.dir, "npm-out")
		os.MkdirAll(out, 0o755)
		pack := exec.Command("npm", "pack", "--silent", "--pack-destination", out)
		pack.Dir = src
		pack.Env = append(os.Environ(), "npm_config_cache="+filepath.Join(e.dir, "npm-host-cache"), "npm_config_update_notifier=false", "HOME="+e.dir)
		if b, err := pack.CombinedOutput(); err != nil {
			t.Fatalf("npm pack: %v\n%s", err, b)
		}
		tgzName := name + "-1.0.0.tgz"
		tgz, err := os.ReadFile(filepath.Join(out, tgzName))
		if err != nil {
			t.Fatal(err)
		}
		s512 := sha512.Sum512(tgz)
		s1 := sha1.Sum(tgz)
		var packument []byte
		tarPath := "/" + name + "/-/" + tgzName
		o := egNewOrigin(t, "127.0.0.1:0", false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/" + name:
				w.Header().Set("Content-Type", "application/json")
				w.Write(packument)
			case tarPath:
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Write(tgz)
			default:
				http.NotFound(w, r)
			}
		}))
		version := map[string]any{"name": name, "version": "1.0.0", "main": "index.js",
			"dist": map[string]any{"tarball": "http://" + o.addr + tarPath,
				"integrity": "sha512-" + base64.StdEncoding.EncodeToString(s512[:]), "shasum": hex.EncodeToString(s1[:])}}
		packument, _ = json.Marshal(map[string]any{"name": name, "dist-tags": map[string]string{"latest": "1.0.0"},
			"versions": map[string]any{"1.0.0": version}})
		pol := egPolicy(t, e, []string{o.addr}, nil, nil, "")
		r := e.sandboxdOpts(runOpts{timeout: 90e9}, "run", "--policy", pol, "-c", fmt.Sprintf(
			"npm install --registry http://%s/ --cache ./.npm-fresh-cache --no-audit --no-fund --no-update-notifier --loglevel=error %s && node -e 'console.log(require(%q))'; echo END\n", o.addr, name, name))
		netRan(t, r)
		if !strings.Contains(r.stdout, token) {
			t.Errorf("npm install through the proxy failed\n%s\n%s", r, o.summary())
		}
		if b, err := os.ReadFile(filepath.Join(e.ws, "node_modules", name, "package.json")); err != nil || !strings.Contains(string(b), name) {
			t.Errorf("node_modules/%s/package.json is not in the workspace: %v\n%s", name, err, r)
		}
		if !o.sawPath(tarPath) {
			t.Errorf("the registry never served the tarball: %s", o.summary())
		}
		egMustAllow(t, r, o.addr, 1)
	})
}

// egWheel is a pure-python wheel for name 1.0 whose module holds value.
func egWheel(t *testing.T, name, value string) []byte {
	t.Helper()
	files := []struct{ path, content string }{
		{name + "/__init__.py", fmt.Sprintf("VALUE = %q\n", value)},
		{name + "-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\nSummary: egress test\n"},
		{name + "-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: sandboxd-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.path)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.content))
		sum := sha256.Sum256([]byte(f.content))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.path, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.content))
	}
	rec := name + "-1.0.dist-info/RECORD"
	fmt.Fprintf(&record, "%s,,\n", rec)
	w, _ := zw.Create(rec)
	w.Write([]byte(record.String()))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestEgressPip: pip install --target from a PEP 503 simple index the
// test serves, of a wheel built by hand: the module lands in the
// workspace.
func TestEgressPip(t *testing.T) {
	t.Parallel()
	egNeed(t, "python3")
	if err := exec.Command("/usr/bin/env", "PATH="+egPath, "python3", "-m", "pip", "--version").Run(); err != nil {
		t.Skipf("pip is not installed for python3: %v", err)
	}
	forEach(t, func(t *testing.T, e *env) {
		name := "egpip" + randHex(3)
		value := "PIP-" + randHex(6)
		whlName := name + "-1.0-py3-none-any.whl"
		whl := egWheel(t, name, value)
		sum := sha256.Sum256(whl)
		o := egNewOrigin(t, "127.0.0.1:0", false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/simple/" + name + "/", "/simple/" + name:
				w.Header().Set("Content-Type", "text/html")
				fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/files/%s#sha256=%s\">%s</a></body></html>\n", whlName, hex.EncodeToString(sum[:]), whlName)
			case "/files/" + whlName:
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Write(whl)
			default:
				http.NotFound(w, r)
			}
		}))
		pol := egPolicy(t, e, []string{o.addr}, nil, nil, "")
		r := e.sandboxd("run", "--policy", pol, "-c", fmt.Sprintf(
			"python3 -m pip install -q --disable-pip-version-check --no-cache-dir --index-url http://%s/simple --target ./vendor %s && cat vendor/%s/__init__.py; echo END\n", o.addr, name, name))
		netRan(t, r)
		if !strings.Contains(r.stdout, value) {
			t.Errorf("pip install through the proxy failed\n%s\n%s", r, o.summary())
		}
		if b, err := os.ReadFile(filepath.Join(e.ws, "vendor", name, "__init__.py")); err != nil || !strings.Contains(string(b), value) {
			t.Errorf("vendor/%s/__init__.py is not in the workspace: %q %v\n%s", name, b, err, r)
		}
		if !o.sawPath("/files/" + whlName) {
			t.Errorf("the index never served the wheel: %s", o.summary())
		}
		egMustAllow(t, r, o.addr, 1)
	})
}

// egModZip is a module zip for path@version holding files.
func egModZip(t *testing.T, path, version string, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, content := range files {
		w, err := zw.Create(path + "@" + version + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(content))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestEgressGoModDownload: go mod download (and a build with the module)
// through a GOPROXY the test serves on a private address of an interface
// it creates (Go's HTTP client never proxies loopback addresses), allowed
// by a rule naming that address and port.
func TestEgressGoModDownload(t *testing.T) {
	// Serial: it uses the shared test address 10.254.254.1, whose interface the test that made it removes.
	egNeed(t, "go")
	priv := egPrivateAddr(t)
	forEach(t, func(t *testing.T, e *env) {
		const mod, ver = "egress.test/m", "v1.0.0"
		token := "GOMOD-" + randHex(6)
		gomod := "module " + mod + "\n\ngo 1.21\n"
		src := fmt.Sprintf("package m\n\nconst Token = %q\n", token)
		zipb := egModZip(t, mod, ver, map[string]string{"go.mod": gomod, "m.go": src})
		base := "/" + mod + "/@v/"
		o := egNewOrigin(t, priv+":0", false, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch strings.TrimPrefix(r.URL.Path, base) {
			case "list":
				fmt.Fprintln(w, ver)
			case ver + ".info":
				fmt.Fprintf(w, `{"Version":%q,"Time":"2024-01-01T00:00:00Z"}`, ver)
			case ver + ".mod":
				w.Write([]byte(gomod))
			case ver + ".zip":
				w.Header().Set("Content-Type", "application/zip")
				w.Write(zipb)
			default:
				http.NotFound(w, r)
			}
		}))
		e.writeFile(filepath.Join(e.ws, "go.mod"), "module egtest\n\ngo 1.21\n\nrequire "+mod+" "+ver+"\n", 0o644)
		e.writeFile(filepath.Join(e.ws, "main.go"), "package main\n\nimport (\n\t\"fmt\"\n\n\t\""+mod+"\"\n)\n\nfunc main() { fmt.Println(\"BUILT\", m.Token) }\n", 0o644)
		pol := egPolicy(t, e, []string{o.addr}, nil, nil, "")
		goEnv := []string{"GOPROXY=http://" + o.addr, "GOSUMDB=off", "GONOSUMDB=*", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local",
			"GOMODCACHE=/tmp/egress-modcache"}
		r := e.sandboxdOpts(runOpts{env: goEnv, timeout: 90e9}, "run", "--policy", pol, "-c",
			"go mod download -json "+mod+"@"+ver+" > dl.json; cat dl.json; dir=$(sed -n 's/^\t\"Dir\": \"\\(.*\\)\",$/\\1/p' dl.json); echo \"DIR=$dir\"; cat \"$dir/m.go\"; go list -f 'LISTED {{.Module.Version}} {{.Dir}}' "+mod+"; echo END\n")
		netRan(t, r)
		var dl struct{ Dir, Error string }
		json.Unmarshal([]byte(r.stdout[:max(strings.Index(r.stdout, "DIR="), 0)]), &dl)
		if dl.Dir == "" || !strings.Contains(r.stdout, "const Token = \""+token+"\"") {
			t.Errorf("go mod download through the proxy did not put the module in the cache (Dir %q, error %q)\n%s\n%s", dl.Dir, dl.Error, r, o.summary())
		}
		if !strings.Contains(r.stdout, "LISTED "+ver+" "+dl.Dir+"\n") {
			t.Errorf("go list does not find the downloaded module\n%s", r)
		}
		if !o.sawPath(base + ver + ".zip") {
			t.Errorf("the GOPROXY never served the zip: %s", o.summary())
		}
		egMustAllow(t, r, o.addr, 1)
	})
}

// TestEgressDevServerInside: a server the command starts on its own
// loopback, fetched with curl through the proxy (the variables are set):
// the content comes from it (not from the host's server on the same
// port), and no boundary is recorded for it.
func TestEgressDevServerInside(t *testing.T) {
	t.Parallel()
	egNeed(t, "curl", "python3")
	forEach(t, func(t *testing.T, e *env) {
		host := egNewOrigin(t, "127.0.0.1:0", false, nil)
		token := "INSIDE-" + randHex(6)
		r := e.sh(fmt.Sprintf(`mkdir -p site && echo %[1]s > site/index.txt
python3 -m http.server --bind 127.0.0.1 --directory site %[2]s >/dev/null 2>&1 &
# Wait for the server by its socket, not by connecting: a connect to a
# port nothing listens on yet is a boundary when the host listens there.
for i in $(seq 200); do grep -qi ":$(printf %%04X %[2]s) 00000000:0000 0A" /proc/net/tcp && break; sleep 0.05; done
test -n "$http_proxy" && echo PROXY_SET
echo "GOT $(curl -s -m 10 http://127.0.0.1:%[2]s/index.txt)"
echo "GOT6 $(curl -s -m 10 http://localhost:%[2]s/index.txt)"
kill %%1; wait
echo END
`, token, host.port))
		netRan(t, r)
		if !strings.Contains(r.stdout, "PROXY_SET\n") {
			t.Fatalf("the proxy variables are not set inside\n%s", r)
		}
		if !strings.Contains(r.stdout, "GOT "+token+"\n") {
			t.Errorf("curl through the proxy did not reach the command's own server\n%s", r)
		}
		if !strings.Contains(r.stdout, "GOT6 "+token+"\n") {
			t.Errorf("curl to localhost through the proxy did not reach the command's own server\n%s", r)
		}
		host.mustHits(t, 0, r)
		if bs := egNetBoundaries(r); len(bs) != 0 {
			t.Errorf("the command's own server produced boundaries: %v\n%s\negress %v", bs, r, r.report["egress"])
		}
		eg, _ := r.report["egress"].(map[string]any)
		conns, _ := eg["connections"].(map[string]any)
		if n, _ := conns["allow/inside"].(float64); n < 2 {
			t.Errorf("report egress %v: want at least 2 allow/inside connections (curl went through the proxy)", eg)
		}
	})
}
