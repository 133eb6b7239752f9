package integration

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBoundarySecretRead: a denied read of a secret is reported exactly
// (surface, operation, path), once however often it was tried, with who
// decided; the agent is told on stderr. As root the kernel's audit
// records report it; unprivileged, observed opens judged against the
// policy do, and the report says which detector ran.
func TestBoundarySecretRead(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		secret := filepath.Join(e.home, ".ssh", "id_rsa")
		r := e.sh("cat ~/.ssh/id_rsa; cat ~/.ssh/id_rsa; head -c1 ~/.ssh/id_rsa; echo END")
		if !strings.Contains(r.stdout, "END") {
			t.Fatalf("command did not run\n%s", r)
		}
		e.noCanary(t, r)
		det, _ := r.report["detection"].(map[string]any)
		bs, _ := r.report["boundaries"].([]any)
		if want := map[bool]string{true: "audit+seccomp", false: "seccomp"}[e.id.root()]; det["detector"] != want {
			t.Fatalf("detection: %v, want %s", det, want)
		}
		var hits []map[string]any
		for _, b := range bs {
			m := b.(map[string]any)
			if m["path"] == secret {
				hits = append(hits, m)
			}
		}
		if len(hits) != 1 {
			t.Fatalf("want exactly one boundary for %s, got %v\n%s", secret, bs, r)
		}
		b := hits[0]
		for k, want := range map[string]any{"surface": "filesystem", "operation": "read_file", "decision": "deny", "source": "hard-deny", "attempt": float64(1)} {
			if b[k] != want {
				t.Errorf("boundary %s = %v, want %v", k, b[k], want)
			}
		}
		if !strings.Contains(r.stderr, "sandboxd: denied read_file "+secret) || !strings.Contains(r.stderr, "will be denied too") {
			t.Errorf("no denial block on stderr\n%s", r)
		}
	})
}

// TestBoundaryNothingDenied: a run that crosses nothing reports nothing
// (the run's own probes of its audit domain are not boundaries).
func TestBoundaryNothingDenied(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		r := e.sh(`echo hi > f && cat f && mkdir -p d && mv f d/ && chmod 600 d/f && python3 -c '
import socket, threading
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
threading.Thread(target=lambda: s.accept()[0].sendall(b"x"), daemon=True).start()
c = socket.create_connection(s.getsockname()); print(c.recv(1))
'`).mustSucceed(t)
		if bs, _ := r.report["boundaries"].([]any); len(bs) != 0 {
			t.Fatalf("boundaries for a clean run: %v", bs)
		}
		if strings.Contains(r.stderr, "sandboxd: denied") {
			t.Fatalf("denial block for a clean run\n%s", r)
		}
	})
}

// TestBoundaryDetectOff: with detection off the sandbox holds exactly
// as before (the secret stays unread, the outside file unchanged), and
// nothing is reported, reviewed or retried.
func TestBoundaryDetectOff(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		outside := filepath.Join(e.home, "outside.txt")
		if err := os.WriteFile(outside, []byte("before\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		e.chown(outside)
		unchanged := fileUnchanged(t, outside)
		r := e.sandboxd("run", "--detect", "off", "-c", "cat ~/.ssh/id_rsa; echo x >> "+outside+"; chmod 600 "+outside+"; echo END")
		if !strings.Contains(r.stdout, "END") {
			t.Fatalf("command did not run\n%s", r)
		}
		e.noCanary(t, r)
		unchanged()
		det, _ := r.report["detection"].(map[string]any)
		if det["detector"] != "none" || r.report["attempts"] != float64(1) {
			t.Fatalf("detection %v, attempts %v; want none, 1", det, r.report["attempts"])
		}
		if bs, _ := r.report["boundaries"].([]any); len(bs) != 0 || strings.Contains(r.stderr, "sandboxd: denied") {
			t.Fatalf("boundaries reported with detection off: %v\n%s", bs, r)
		}
	})
}

// TestBoundaryExact: each way of crossing the boundary is reported with
// its exact surface, operation and path or destination, as root and as
// an unprivileged user, and nothing the workspace allows is reported.
func TestBoundaryExact(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		outside := e.outside("o.txt", "x\n")
		exec := e.mkdir("tools", 0o755)
		e.writeFile(filepath.Join(exec, "run.sh"), "#!/bin/sh\necho hi\n", 0o755)
		l := tcpListener(t, "tcp", "127.0.0.1:0")
		_, port, _ := strings.Cut(l.addr, ":")
		e.sh("git init -q . && git config user.email a@b && git config user.name n")
		r := e.sh(strings.Join([]string{
			"echo x > /etc/sandboxd-it-x",
			"mkdir /usr/sandboxd-it-x",
			"mv " + outside + " ./moved",
			"chmod 600 " + outside,
			"exec 3<>/dev/tcp/93.184.216.34/443",
			"exec 4<>/dev/tcp/127.0.0.1/" + port,
			"echo evil > .git/hooks/pre-commit",
			"touch fine.txt && mkdir -p fine/dir && mv fine.txt fine/dir/",
			"echo END",
		}, "; "))
		if !strings.Contains(r.stdout, "END") {
			t.Fatalf("command did not run\n%s", r)
		}
		l.mustBeSilent(t)
		got := map[string]map[string]any{}
		for _, b := range r.report["boundaries"].([]any) {
			m := b.(map[string]any)
			target, _ := m["path"].(string)
			if target == "" {
				target, _ = m["destination"].(string)
			}
			got[m["surface"].(string)+" "+m["operation"].(string)+" "+target] = m
		}
		for _, want := range []string{
			"filesystem make_reg /etc/sandboxd-it-x",
			"filesystem make_dir /usr/sandboxd-it-x",
			"filesystem rename " + outside,
			"filesystem chmod " + outside,
			"network connect 93.184.216.34:443",
			"network connect 127.0.0.1:" + port,
			// Held in the copy-on-write layer, refused at commit.
			"filesystem persist " + filepath.Join(e.ws, ".git/hooks/pre-commit"),
		} {
			b, ok := got[want]
			if !ok {
				t.Errorf("missing boundary %q; got %v", want, keys(got))
				continue
			}
			if b["decision"] != "deny" {
				t.Errorf("%s: decision %v", want, b["decision"])
			}
		}
		if b := got["filesystem persist "+filepath.Join(e.ws, ".git/hooks/pre-commit")]; b != nil && b["source"] != "hard-deny" {
			t.Errorf("persistence path decided by %v, want hard-deny", b["source"])
		}
		for k := range got {
			if strings.Contains(k, "fine") {
				t.Errorf("a write the workspace allows was reported: %s", k)
			}
		}
	})
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestBoundaryTenThousandDenials: every one of 10 000 distinct denied
// reads in one run is reported, or the report says how many were lost.
func TestBoundaryTenThousandDenials(t *testing.T) {
	// Serial: ten thousand denials fill the kernel audit backlog other runs' detection reads.
	forEach(t, func(t *testing.T, e *env) {
		dir := filepath.Join(e.home, ".ssh", "many")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 10000; i++ {
			os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), []byte(e.canary), 0o600)
		}
		filepath.Walk(filepath.Join(e.home, ".ssh"), func(p string, _ os.FileInfo, _ error) error { e.chown(p); return nil })
		r := e.sh(`python3 -c '
import os
d = os.path.expanduser("~/.ssh/many")
n = 0
for i in range(10000):
    try:
        open(os.path.join(d, str(i))).read()
    except PermissionError:
        n += 1
print("DENIED", n)
'`)
		e.noCanary(t, r)
		if !strings.Contains(r.stdout, "DENIED 10000") {
			t.Fatalf("the reads were not all denied\n%.2000s", r.stdout)
		}
		det, _ := r.report["detection"].(map[string]any)
		lost, _ := det["lost"].(float64)
		n := 0
		for _, b := range boundaries(r) {
			if strings.HasPrefix(b["path"].(string), dir+"/") && b["operation"] == "read_file" {
				n++
			}
		}
		if n != 10000 && lost == 0 {
			t.Fatalf("%d of 10000 denials reported and none said lost (detection %v)", n, det)
		}
		if n != 10000 {
			t.Logf("%d reported, %v lost (the report says so)", n, lost)
		}
	})
}

// TestBoundaryExecDenied: running a program from a denied tree is reported
// as an execute boundary with its path, by either detector.
func TestBoundaryExecDenied(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		tool := filepath.Join(e.home, ".ssh", "tool")
		b, err := os.ReadFile("/bin/true")
		if err != nil {
			t.Fatal(err)
		}
		e.writeFile(tool, string(b), 0o755)
		r := e.sh(tool + "; echo END")
		if !strings.Contains(r.stdout, "END") {
			t.Fatalf("command did not run\n%s", r)
		}
		for _, bd := range boundaries(r) {
			if bd["path"] == tool && bd["operation"] == "execute" && bd["decision"] == "deny" {
				return
			}
		}
		t.Fatalf("no execute boundary for %s: %v\n%s", tool, boundaries(r), r)
	})
}
