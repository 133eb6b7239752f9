package integration

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The first hour (issue 25): everyday workloads the corpus had not
// covered, run as a new user would, in a home made the way `useradd -m`
// makes one (a copy of /etc/skel: no ~/.config, no ~/.gitconfig, nothing
// cached) and in the identity's real home. Each does what it does bare
// and reports zero boundaries; the control reports exactly one.

// firstHourCases are the workloads; each script makes its own files.
func firstHourCases() []corpusCase {
	goTimeout := 150 * time.Second
	git := "export GIT_AUTHOR_NAME=C GIT_AUTHOR_EMAIL=c@example.com GIT_COMMITTER_NAME=C GIT_COMMITTER_EMAIL=c@example.com\n"
	return []corpusCase{
		{
			name:  "venv-editable-pytest",
			needs: func() string { return havePytest() + haveVenv() },
			script: `set -e
mkdir -p src/mypkg tests
printf '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n[project]\nname = "mypkg"\nversion = "0.1.0"\n[tool.setuptools.packages.find]\nwhere = ["src"]\n' > pyproject.toml
echo 'def double(x): return 2 * x' > src/mypkg/__init__.py
printf 'from mypkg import double\ndef test_double():\n    assert double(21) == 42\n' > tests/test_double.py
python3 -m venv --system-site-packages .venv
. .venv/bin/activate
pip install -q --no-index --no-build-isolation -e .
python -m pytest -q -p no:cacheprovider tests
python -c 'import mypkg; print("EDITABLE", mypkg.__file__)'`,
			timeout: 120 * time.Second,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "1 passed", "EDITABLE "+filepath.Join(dir, "src", "mypkg", "__init__.py"))
				wantExec(t, filepath.Join(dir, ".venv", "bin", "python"))
			},
		},
		{
			name:  "pip-wheel-target",
			needs: func() string { return lookTool("python3")() + havePip() },
			script: `set -e
mkdir -p src/tiny
printf '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n[project]\nname = "tiny"\nversion = "1.0"\n' > pyproject.toml
echo 'VALUE = 41 + 1' > src/tiny/__init__.py
python3 -m pip wheel -q --no-deps --no-build-isolation --no-index -w dist .
python3 -m pip install -q --no-index --no-deps --target lib dist/tiny-1.0-*.whl
PYTHONPATH=lib python3 -c 'import tiny; print("TINY", tiny.VALUE)'`,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "TINY 42")
				wantFile(t, filepath.Join(dir, "lib", "tiny", "__init__.py"), "VALUE")
			},
		},
		{
			// npm pack, then npm install and npm ci against a registry
			// served from inside the run (its own loopback).
			name:  "npm-pack-ci-registry",
			needs: func() string { return lookTool("node")() + lookTool("npm")() },
			script: `set -e
mkdir -p dep reg app
echo '{ "name": "localdep", "version": "1.0.0", "main": "index.js" }' > dep/package.json
echo 'module.exports = () => "localdep works";' > dep/index.js
(cd dep && npm pack --silent --pack-destination ../reg >/dev/null)
python3 - <<'X'
import hashlib, base64, json
b = open("reg/localdep-1.0.0.tgz", "rb").read()
doc = {"name": "localdep", "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": {
  "name": "localdep", "version": "1.0.0", "main": "index.js",
  "dist": {"tarball": "http://127.0.0.1:18474/localdep-1.0.0.tgz",
           "shasum": hashlib.sha1(b).hexdigest(),
           "integrity": "sha512-" + base64.b64encode(hashlib.sha512(b).digest()).decode()}}}}
open("reg/localdep", "w").write(json.dumps(doc))
X
(cd reg && exec python3 -m http.server 18474 --bind 127.0.0.1 >/dev/null 2>&1) & srv=$!
trap 'kill $srv' EXIT
for i in $(seq 100); do python3 -c 'import socket; socket.create_connection(("127.0.0.1", 18474), 1)' 2>/dev/null && break; sleep 0.1; done
cd app
echo '{ "name": "app", "version": "1.0.0", "private": true }' > package.json
npm install --registry http://127.0.0.1:18474/ localdep
rm -rf node_modules
npm ci --registry http://127.0.0.1:18474/
node -e 'console.log(require("localdep")())'`,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "localdep works")
				wantFile(t, filepath.Join(dir, "app", "package-lock.json"), `"node_modules/localdep"`)
				wantFile(t, filepath.Join(dir, "app", "node_modules", "localdep", "index.js"), "localdep works")
			},
		},
		{
			// npm's defaults: its own update check and advisory report
			// would connect to registry.npmjs.org.
			name:  "npm-install-tarball",
			needs: func() string { return lookTool("node")() + lookTool("npm")() },
			script: `set -e
mkdir -p x app
echo '{ "name": "x", "version": "1.0.0", "main": "index.js" }' > x/package.json
echo 'module.exports = 7;' > x/index.js
(cd x && npm pack --silent >/dev/null)
cd app && echo '{ "name": "app", "version": "1.0.0", "private": true }' > package.json
npm install ../x/x-1.0.0.tgz
node -e 'console.log("X=" + require("x"))'`,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "X=7")
				wantFile(t, filepath.Join(dir, "app", "node_modules", "x", "index.js"), "module.exports = 7")
			},
		},
		{
			// pnpm's store is outside every writable root by default.
			name:  "pnpm-install",
			needs: func() string { return lookTool("node")() + lookTool("pnpm")() },
			script: `set -e
mkdir -p x app
echo '{ "name": "x", "version": "1.0.0", "main": "index.js" }' > x/package.json
echo 'module.exports = 7;' > x/index.js
cd app && echo '{ "name": "app", "version": "1.0.0", "private": true, "dependencies": {"x": "file:../x"} }' > package.json
pnpm install --reporter=silent
node -e 'console.log("X=" + require("x"))'`,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "X=7")
				wantFile(t, filepath.Join(dir, "app", "pnpm-lock.yaml"), "file:../x")
			},
		},
		{
			// A fixup squashed into the root commit: git names its
			// built-in empty tree, which it never stores.
			name: "git-stash-autosquash",
			script: git + `set -e
git init -q -b main r && cd r
echo 1 > a && git add a && git commit -qm one
echo 2 > b && git add b && git commit -qm two
echo 1b >> a && git commit -qam "fixup! one"
echo wip > c && git add c && git stash -q
GIT_SEQUENCE_EDITOR=: git rebase -q -i --autosquash --root
git stash pop -q
git log --format=%s`,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "two\none\n")
				repo := filepath.Join(dir, "r")
				if out, err := e.gitOut(repo, "-c", "safe.directory=*", "log", "--format=%s"); err != nil || out != "two\none\n" {
					t.Errorf("host git log %q %v, want the squashed history", out, err)
				}
				wantFile(t, filepath.Join(repo, "a"), "1\n1b\n")
				wantFile(t, filepath.Join(repo, "c"), "wip")
			},
		},
		{
			name: "git-am-bisect",
			script: git + `set -e
git init -q -b main r && cd r
for i in 1 2 3 4 5 6; do echo $i > n; git add n; git commit -qm "n$i"; done
git format-patch -q -2 -o ../patches
git reset -q --hard HEAD~2
git am -q ../patches/*.patch
git bisect start HEAD HEAD~5 >/dev/null
git bisect run sh -c 'test "$(cat n)" -lt 4' > ../bisect.log
git bisect reset >/dev/null 2>&1
grep "is the first bad commit" ../bisect.log
git log --format=%s -1`,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "is the first bad commit", "n6")
				wantFile(t, filepath.Join(dir, "bisect.log"), "n4")
				if out, err := e.gitOut(filepath.Join(dir, "r"), "-c", "safe.directory=*", "rev-list", "--count", "HEAD"); err != nil || strings.TrimSpace(out) != "6" {
					t.Errorf("host: %q commits %v, want 6", out, err)
				}
			},
		},
		{
			name:  "git-ssh-signed-commit",
			needs: lookTool("ssh-keygen"),
			script: git + `set -e
ssh-keygen -q -t ed25519 -N '' -C signer -f signkey
echo "c@example.com $(cat signkey.pub)" > allowed
git init -q -b main r && cd r
echo x > x && git add x
git -c gpg.format=ssh -c user.signingkey=../signkey.pub commit -q -S -m signed
git -c gpg.ssh.allowedSignersFile=../allowed verify-commit HEAD 2>&1`,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, `Good "git" signature for c@example.com`)
				if out, err := e.gitOut(filepath.Join(dir, "r"), "-c", "safe.directory=*", "cat-file", "commit", "HEAD"); err != nil || !strings.Contains(out, "BEGIN SSH SIGNATURE") {
					t.Errorf("host: the commit is not signed: %q %v", out, err)
				}
			},
		},
		{
			// A dependency fetched into the module cache from a file
			// proxy, then tested with the race detector from there.
			name: "go-test-race-modcache",
			script: `set -e
mkdir -p proxy/example.com/dep/@v depsrc app
printf 'module example.com/dep\n\ngo 1.22\n' > depsrc/go.mod
printf 'package dep\n\nimport "sync"\n\nfunc Count(n int) int {\n\tvar mu sync.Mutex\n\tvar wg sync.WaitGroup\n\tc := 0\n\tfor i := 0; i < n; i++ {\n\t\twg.Add(1)\n\t\tgo func() { defer wg.Done(); mu.Lock(); c++; mu.Unlock() }()\n\t}\n\twg.Wait()\n\treturn c\n}\n' > depsrc/dep.go
printf 'package dep\n\nimport "testing"\n\nfunc TestCount(t *testing.T) {\n\tif Count(20) != 20 {\n\t\tt.Fatal("count")\n\t}\n}\n' > depsrc/dep_test.go
python3 - <<'X'
import zipfile, json
z = zipfile.ZipFile("proxy/example.com/dep/@v/v1.0.0.zip", "w")
for f in ("go.mod", "dep.go", "dep_test.go"):
    z.write("depsrc/" + f, "example.com/dep@v1.0.0/" + f)
z.close()
open("proxy/example.com/dep/@v/v1.0.0.mod", "w").write(open("depsrc/go.mod").read())
open("proxy/example.com/dep/@v/v1.0.0.info", "w").write(json.dumps({"Version": "v1.0.0", "Time": "2024-01-01T00:00:00Z"}))
open("proxy/example.com/dep/@v/list", "w").write("v1.0.0\n")
X
cd app
printf 'module example.com/app\n\ngo 1.22\n\nrequire example.com/dep v1.0.0\n' > go.mod
printf 'package app\n\nimport (\n\t"testing"\n\n\t"example.com/dep"\n)\n\nfunc TestCount(t *testing.T) {\n\tif dep.Count(50) != 50 {\n\t\tt.Fatal("count")\n\t}\n}\n' > app_test.go
export GOPROXY=file://$PWD/../proxy GOSUMDB=off GOFLAGS=-mod=mod
go test -race -count=1 ./...
go test -race -count=1 example.com/dep`,
			timeout: goTimeout,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "ok  \texample.com/app", "ok  \texample.com/dep")
				wantFile(t, filepath.Join(dir, "app", "go.sum"), "example.com/dep v1.0.0")
			},
		},
		{
			name: "go-vet",
			script: `set -e
printf 'module example.com/v\n\ngo 1.22\n' > go.mod
printf 'package v\n\nimport "fmt"\n\nfunc F() { fmt.Println("ok") }\n' > v.go
printf 'package v\n\nimport "fmt"\n\nfunc G() { fmt.Printf("%%d\\n", "x") }\n' > bad.go.txt
go vet ./... && echo VET-OK
mkdir bad && cp bad.go.txt bad/bad.go && ! go vet ./bad 2>vet.err && cat vet.err`,
			timeout: goTimeout,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "VET-OK", "wrong type")
			},
		},
		{
			name:   "top",
			needs:  lookTool("top"),
			script: "top -b -n 1 > top.txt && head -n 5 top.txt",
			check: func(t *testing.T, e *env, dir string, r result) {
				wantFile(t, filepath.Join(dir, "top.txt"), "load average", "PID")
			},
		},
		{
			name:  "sqlite",
			needs: lookTool("sqlite3"),
			script: `set -e
sqlite3 app.db 'create table t(x); insert into t values (1),(2),(3);'
sqlite3 app.db 'pragma journal_mode=wal; insert into t values (4); select "SUM", sum(x) from t;'
python3 -c 'import sqlite3; c = sqlite3.connect("py.db"); c.execute("pragma journal_mode=wal"); c.execute("create table t(x)"); c.execute("insert into t values (5)"); c.commit(); print("PY", c.execute("select sum(x) from t").fetchone()[0])'`,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "SUM|10", "PY 5")
				out, err := exec.Command("sqlite3", filepath.Join(dir, "app.db"), "select count(*) from t").CombinedOutput()
				if err != nil || strings.TrimSpace(string(out)) != "4" {
					t.Errorf("host: the database holds %q rows (%v), want 4", out, err)
				}
			},
		},
		{
			name:  "inotify",
			needs: lookTool("inotifywait"),
			script: `set -e
mkdir -p watched
inotifywait -q -m -e close_write --format '%f' watched > events.txt & w=$!
# Written until the watcher, however late it starts, has seen it.
for i in $(seq 200); do echo hi > watched/f.txt; [ -s events.txt ] && break; sleep 0.1; done
kill $w; wait $w 2>/dev/null || true
python3 - <<'X'
import ctypes, os, select
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
assert fd >= 0, ctypes.get_errno()
assert libc.inotify_add_watch(fd, b"watched", 0x100) >= 0  # IN_CREATE
open("watched/g.txt", "w").close()
assert select.select([fd], [], [], 5)[0]
print("PYINOTIFY", os.read(fd, 4096)[16:].rstrip(b"\0").decode())
X
cat events.txt`,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "PYINOTIFY g.txt", "f.txt")
			},
		},
		{
			// A TLS server and two clients on the run's own loopback.
			name:  "tls-openssl",
			needs: func() string { return lookTool("openssl")() + lookTool("curl")() },
			script: `set -e
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem -out cert.pem -days 1 -subj /CN=localhost -addext subjectAltName=DNS:localhost 2>/dev/null
openssl s_server -quiet -accept 127.0.0.1:18475 -cert cert.pem -key key.pem -www >/dev/null 2>&1 & s=$!
trap 'kill $s' EXIT
for i in $(seq 100); do curl -s --noproxy '*' --cacert cert.pem https://localhost:18475/ -o page.html && break; sleep 0.1; done
echo | openssl s_client -connect 127.0.0.1:18475 -servername localhost -CAfile cert.pem -verify_return_error 2>/dev/null | grep -m1 "Verify return code"`,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "Verify return code: 0 (ok)")
				wantFile(t, filepath.Join(dir, "page.html"), "s_server")
			},
		},
		{
			name: "archive",
			script: `set -e
mkdir -p tree/sub && seq 1 500 > tree/sub/nums && echo hello > tree/a
tar czf tree.tgz tree && mkdir out && tar xzf tree.tgz -C out
cp tree/sub/nums nums && gzip -k nums && gunzip -c nums.gz > nums.copy
sha256sum tree/sub/nums nums.copy | awk '{print $1}' | uniq | wc -l
diff -r tree out/tree && echo ARCHIVE-OK`,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "ARCHIVE-OK")
				wantFile(t, filepath.Join(dir, "out", "tree", "a"), "hello")
			},
		},
		{
			name: "text-tools",
			script: `set -e
mkdir -p src && for i in 1 2 3; do printf 'alpha %s\nbeta %s\n' $i $i > src/f$i.txt; done
find src -name '*.txt' -print0 | xargs -0 grep -l alpha | sort
cp src/f1.txt f1.orig && sed -i 's/alpha/ALPHA/' src/f1.txt
diff -u f1.orig src/f1.txt > change.patch || true
cp f1.orig f1.new && patch -s f1.new < change.patch
awk '{n[$1]++} END {for (k in n) print k, n[k]}' src/*.txt | sort
cmp f1.new src/f1.txt && echo TEXT-OK`,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "src/f3.txt", "ALPHA 1", "beta 3", "TEXT-OK")
				wantFile(t, filepath.Join(dir, "src", "f1.txt"), "ALPHA 1")
			},
		},
		{
			// What a newcomer runs to see where they are.
			name: "system-inspection",
			script: `set -e
uname -a; id; uptime; nproc; free -m | head -2; df -h / | tail -1; ps aux | head -3; ps -ef --forest | wc -l
cat /proc/meminfo | head -1; ls /sys/class/net; head -1 /etc/os-release; getent passwd root >/dev/null
ulimit -a | head -2; env | grep -c = ; command -v lscpu >/dev/null && lscpu | head -2
echo SYSINFO-OK`,
			check: func(t *testing.T, e *env, dir string, r result) {
				wantOut(t, "stdout", r.stdout, "SYSINFO-OK", "Mem:")
			},
		},
	}
}

// haveVenv says why python3 -m venv cannot make a venv with pip here.
func haveVenv() string {
	out, err := exec.Command("python3", "-c", "import ensurepip, venv").CombinedOutput()
	if err != nil {
		return "python3 -m venv with pip is not available (Debian: python3-venv): " + strings.TrimSpace(string(out))
	}
	return ""
}

// havePip says why python3 -m pip is missing.
func havePip() string {
	if out, err := exec.Command("python3", "-m", "pip", "--version").CombinedOutput(); err != nil {
		return "python3 -m pip is not available (Debian: python3-pip): " + strings.TrimSpace(string(out))
	}
	return ""
}

// freshHomeEnv is an identity's world whose home is made the way
// `useradd -m` makes one (Debian: a copy of /etc/skel, mode 0755 from
// UMASK 022, owned by the account): no ~/.config, no ~/.gitconfig,
// nothing cached.
func freshHomeEnv(t *testing.T, id identity) *env {
	t.Helper()
	e := newEnvBare(t, id)
	e.home = e.mkdir("home", 0o755)
	skel := "/etc/skel"
	filepath.WalkDir(skel, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == skel {
			return nil
		}
		dst := filepath.Join(e.home, strings.TrimPrefix(p, skel+"/"))
		info, err := d.Info()
		if err != nil {
			return nil
		}
		switch {
		case d.IsDir():
			os.Mkdir(dst, info.Mode().Perm())
			e.chown(dst)
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err == nil {
				e.writeFile(dst, string(b), info.Mode().Perm())
			}
		}
		return nil
	})
	if _, err := os.Lstat(filepath.Join(e.home, ".config")); err == nil {
		t.Fatalf("/etc/skel holds .config: this machine's fresh homes are not the case this test is about")
	}
	return e
}

// realHomeEnv is an identity's world with its own home from the password
// database, used as it is: nothing is planted there (sandboxd keeps its
// private caches under it, as for any run).
func realHomeEnv(t *testing.T, id identity) *env {
	t.Helper()
	u, err := user.LookupId(fmt.Sprint(id.uid))
	if err != nil {
		t.Skipf("skipped: no account for uid %d: %v", id.uid, err)
	}
	if st, err := os.Stat(u.HomeDir); err != nil || !st.IsDir() {
		t.Skipf("skipped: %s's home %s is missing: %v", u.Username, u.HomeDir, err)
	}
	if strings.HasPrefix(u.HomeDir+"/", "/tmp/") || strings.HasPrefix(u.HomeDir+"/", "/var/tmp/") {
		t.Skipf("skipped: %s's home %s is under a directory the sandbox makes private", u.Username, u.HomeDir)
	}
	e := newEnvBare(t, id)
	e.home = u.HomeDir
	return e
}

// forFirstHour runs f per identity and home: the fresh home with the
// copy-on-write layer (the default), the real home with
// --no-transaction, so both workspace modes are covered. The four share
// nothing (each identity has its own real home) and run in parallel.
func forFirstHour(t *testing.T, f func(t *testing.T, e *env)) {
	t.Helper()
	for _, home := range []string{"fresh", "real"} {
		t.Run(home, func(t *testing.T) {
			t.Parallel()
			for _, id := range identities(t) {
				t.Run(id.name, func(t *testing.T) {
					t.Parallel()
					var e *env
					if home == "fresh" {
						e = freshHomeEnv(t, id)
					} else {
						e = realHomeEnv(t, id)
						e.runArgs = []string{"--no-transaction"}
					}
					f(t, e)
				})
			}
		})
	}
}

// TestCorpusFirstHour: each workload does what it does bare and reports
// zero boundaries, in a fresh home and in the real one, as root and as
// the unprivileged user.
func TestCorpusFirstHour(t *testing.T) {
	t.Parallel()
	forFirstHour(t, func(t *testing.T, e *env) {
		for _, c := range firstHourCases() {
			t.Run(c.name, func(t *testing.T) {
				c.skipUnlessAvailable(t)
				e := *e
				e.t = t
				r, _ := e.runCase(t, c, "first-hour", "")
				mustBeQuiet(t, r)
			})
		}
	})
}

// TestCorpusFirstHourControl: in a fresh home, the tools that create
// ~/.config on the way to their own state (top, go vet) stay quiet only
// while no other program tries it: `mkdir -p ~/.config/systemd/user` in
// the same run is exactly one boundary, make_dir ~/.config, hard-denied,
// and the directory is absent afterwards; the workloads still work. The
// workloads that met the other classes report exactly one real boundary
// beside them.
func TestCorpusFirstHourControl(t *testing.T) {
	t.Parallel()
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			t.Parallel()
			e := freshHomeEnv(t, id)
			for _, name := range []string{"top", "go-vet"} {
				c := firstHourCaseNamed(name)
				t.Run(name, func(t *testing.T) {
					c.skipUnlessAvailable(t)
					e := *e
					e.t = t
					r, _ := e.runCase(t, c, "control", `mkdir -p ~/.config/systemd/user 2>/dev/null; `)
					target := filepath.Join(e.home, ".config")
					if _, err := os.Lstat(target); err == nil {
						t.Errorf("%s exists after the run", target)
					}
					bs := corpusBoundaries(r)
					if len(bs) != 1 || bs[0]["operation"] != "make_dir" || bs[0]["path"] != target ||
						bs[0]["decision"] != "deny" || bs[0]["source"] != "hard-deny" {
						t.Errorf("want exactly one boundary make_dir %s, hard-denied:\n%s", target, describeBoundaries(bs))
					}
					if n := strings.Count(r.stderr, "sandboxd: denied make_dir "+target+"\n"); n != 1 {
						t.Errorf("want one denial block for %s on stderr, got %d:\n%s", target, n, stderrDenials(r.stderr))
					}
				})
			}
			// Workloads whose false boundaries were other classes (npm's
			// own connections, git's empty tree, pnpm's store) beside one
			// real boundary, tried twice: exactly that one, denied, and
			// the file absent.
			for _, name := range []string{"npm-install-tarball", "git-stash-autosquash", "pnpm-install"} {
				c := firstHourCaseNamed(name)
				t.Run(name+"-and-one-real", func(t *testing.T) {
					c.skipUnlessAvailable(t)
					e := *e
					e.t = t
					target := filepath.Join(e.mkdir("outside", 0o755), "first-hour-"+randHex(4))
					r, _ := e.runCase(t, c, "real", fmt.Sprintf("echo x > %s 2>/dev/null; echo x > %[1]s 2>/dev/null; ", target))
					if _, err := os.Lstat(target); err == nil {
						t.Errorf("%s exists after the run", target)
					}
					bs := corpusBoundaries(r)
					if len(bs) != 1 || bs[0]["operation"] != "make_reg" || bs[0]["path"] != target || bs[0]["decision"] != "deny" {
						t.Errorf("want exactly one boundary make_reg %s, denied:\n%s", target, describeBoundaries(bs))
					}
				})
			}
			// Alone, the same workloads are quiet in the same home.
			for _, name := range []string{"top", "go-vet"} {
				c := firstHourCaseNamed(name)
				t.Run(name+"-alone", func(t *testing.T) {
					c.skipUnlessAvailable(t)
					e := *e
					e.t = t
					r, _ := e.runCase(t, c, "alone", "")
					mustBeQuiet(t, r)
					quiet, _ := r.report["quiet"].([]any)
					if len(quiet) == 0 {
						t.Errorf("the tool's make_dir of ~/.config is not in the report's quiet list: %v", r.report["quiet"])
					}
				})
			}
		})
	}
}

func firstHourCaseNamed(name string) corpusCase {
	for _, c := range firstHourCases() {
		if c.name == name {
			return c
		}
	}
	panic("no first-hour case " + name)
}
