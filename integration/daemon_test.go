package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startDaemon starts `sandboxd serve` as root on a socket of the test's
// own, and stops it (SIGTERM) when the test ends: it must exit 0 and
// take its socket with it.
func startDaemon(t *testing.T) string {
	s, _ := startDaemonLog(t)
	return s
}

// startDaemonLog is startDaemon that also returns the daemon's log; args
// are more of serve's flags.
func startDaemonLog(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	d := spawnDaemon(t, args...)
	t.Cleanup(func() {
		d.stop(t)
		if _, err := os.Lstat(d.socket); err == nil {
			t.Errorf("the daemon left its socket behind")
		}
	})
	return d.socket, d.log
}

// testDaemon is a running `sandboxd serve -v` of a test's own.
type testDaemon struct {
	cmd    *exec.Cmd
	socket string
	log    *syncBuffer
	exited chan error // its Wait's result
}

// spawnDaemon starts `sandboxd serve` as root on a socket in a directory
// of the test's own, with args, and waits until it listens; the caller
// stops it.
func spawnDaemon(t *testing.T, args ...string) *testDaemon {
	t.Helper()
	return spawnDaemonAt(t, "", nil, args...)
}

// spawnDaemonAt is spawnDaemon on socket ("": a new one), with env added
// to the daemon's environment (a failpoint).
func spawnDaemonAt(t *testing.T, socket string, env []string, args ...string) *testDaemon {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sandboxd serve runs as root")
	}
	if socket == "" {
		dir, err := os.MkdirTemp(baseDir, "daemon-")
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o755)
		t.Cleanup(func() { removeAll(dir) })
		socket = filepath.Join(dir, "run", "sandboxd.sock")
	}
	d := &testDaemon{socket: socket, log: &syncBuffer{}, exited: make(chan error, 1)}
	if !slices.Contains(args, "--audit-dir") {
		// The test's own machine log, kept across a restart on the same
		// socket, never the machine's /var/log/sandboxd.
		base := filepath.Dir(filepath.Dir(socket))
		args = append([]string{"--audit-dir", filepath.Join(base, "audit"), "--audit-key", filepath.Join(base, "audit.key")}, args...)
	}
	d.cmd = exec.Command(binary, append([]string{"serve", "-v", "--socket", d.socket}, args...)...)
	d.cmd.Dir, d.cmd.Env = "/", append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}, env...)
	d.cmd.Stderr = d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.exited <- d.cmd.Wait() }()
	t.Cleanup(func() { d.cmd.Process.Kill() }) // one a failed test left running
	// Listening, not merely there: a killed daemon leaves its socket.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", d.socket); err == nil {
			c.Close()
			return d
		}
		if time.Now().After(deadline) {
			d.cmd.Process.Kill()
			t.Fatalf("the daemon never listened\n%s", d.log.String())
		}
	}
}

// asIdentity runs argv as the env's identity, with its home, in its
// workspace.
func (e *env) asIdentity(env []string, argv ...string) result {
	e.t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = e.ws
	cmd.Env = append([]string{"HOME=" + e.home, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if os.Geteuid() == 0 && e.id.uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid), Groups: []uint32{}}
	}
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if x, ok := err.(*exec.ExitError); ok {
		r.code = x.ExitCode()
	} else if err != nil {
		e.t.Fatalf("%v: %v", argv, err)
	}
	return r
}

// curl asks the daemon as the env's identity: the HTTP status and body.
func (e *env) curl(socket, method, path, token string) (int, string) {
	e.t.Helper()
	args := []string{"curl", "-s", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", socket, "-X", method}
	if token != "" {
		args = append(args, "-H", "Authorization: Bearer "+token)
	}
	r := e.asIdentity(nil, append(args, "http://sandboxd"+path)...)
	i := strings.LastIndex(r.stdout, "\n")
	var code int
	fmt.Sscan(r.stdout[i+1:], &code)
	return code, r.stdout[:max(i, 0)]
}

// The kernel says who calls: each identity is taken for itself, its
// token file is its own (0400), and only its own token opens the API.
func TestDaemonIdentifiesCallers(t *testing.T) {
	socket := startDaemon(t)
	forEach(t, func(t *testing.T, e *env) {
		r := e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + socket}}, "serve", "status")
		want := fmt.Sprintf("you are: uid %d, gid %d", e.id.uid, e.id.gid)
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("serve status: want %q\n%s", want, r)
		}
		tokenFile := filepath.Join(filepath.Dir(socket), "tokens", fmt.Sprint(e.id.uid))
		st, err := os.Lstat(tokenFile)
		if err != nil || st.Mode().Perm() != 0o400 || int(st.Sys().(*syscall.Stat_t).Uid) != e.id.uid {
			t.Fatalf("token file %s: %v %v", tokenFile, st, err)
		}
		tok, _ := os.ReadFile(tokenFile)
		if code, body := e.curl(socket, "GET", "/v1/health", ""); code != 401 || !strings.Contains(body, `"code":"bad_token"`) {
			t.Errorf("no token: %d %s", code, body)
		}
		if code, body := e.curl(socket, "GET", "/v1/health", strings.TrimSpace(string(tok))); code != 200 || !strings.Contains(body, fmt.Sprintf(`"uid":%d`, e.id.uid)) {
			t.Errorf("own token: %d %s", code, body)
		}
		if code, body := e.curl(socket, "GET", "/v1/nothing", strings.TrimSpace(string(tok))); code != 404 || !json.Valid([]byte(body)) {
			t.Errorf("unknown endpoint: %d %s", code, body)
		}
		if code, body := e.curl(socket, "DELETE", "/v1/health", strings.TrimSpace(string(tok))); code != 405 || !json.Valid([]byte(body)) {
			t.Errorf("wrong method: %d %s", code, body)
		}
	})
	// Another user's token opens nothing: root's, presented by the
	// unprivileged user.
	ids := identities(t)
	root, user := newEnv(t, ids[0]), newEnv(t, ids[1])
	root.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + socket}}, "serve", "status")
	rootTok, _ := os.ReadFile(filepath.Join(filepath.Dir(socket), "tokens", "0"))
	if code, body := user.curl(socket, "GET", "/v1/health", strings.TrimSpace(string(rootTok))); code != 401 {
		t.Errorf("the user got in with root's token: %d %s", code, body)
	}
}

// A socket the client cannot trust gets nothing: one the user made
// (SANDBOXD_SOCKET may name anything), and one of root's in a directory
// the user may write.
func TestDaemonSocketTrust(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make root's socket")
	}
	forEach(t, func(t *testing.T, e *env) {
		if e.id.root() {
			return
		}
		planted := filepath.Join(e.mkdir("planted", 0o755), "sandboxd.sock")
		heard := filepath.Join(e.dir, "heard")
		e.writeFile(heard, "", 0o666)
		l := exec.Command("socat", "-u", "UNIX-LISTEN:"+planted+",fork", "CREATE:"+heard)
		l.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid), Groups: []uint32{}}}
		l.Dir, l.Env = e.dir, []string{"PATH=/usr/bin:/bin"}
		if err := l.Start(); err != nil {
			t.Skip("socat: ", err)
		}
		defer func() { l.Process.Kill(); l.Wait() }()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(planted); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("socat never listened")
			}
		}
		r := e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + planted}}, "serve", "status")
		if r.code == 0 || !strings.Contains(r.stderr, "is not trusted") {
			t.Errorf("a planted socket was used\n%s", r)
		}
		time.Sleep(200 * time.Millisecond)
		if b, _ := os.ReadFile(heard); len(b) != 0 {
			t.Errorf("the planted socket heard %q", b)
		}
	})
}

// From inside a sandbox neither factor is reachable: the daemon never
// hears from a run (connecting to its socket is a hard deny, so the
// caller's token file is never made), and a token file made outside
// cannot be read inside.
func TestDaemonUnreachableFromSandbox(t *testing.T) {
	socket := startDaemon(t)
	forEach(t, func(t *testing.T, e *env) {
		vars := []string{"SANDBOXD_SOCKET=" + socket}
		tokenFile := filepath.Join(filepath.Dir(socket), "tokens", fmt.Sprint(e.id.uid))
		// Run here: a run through the daemon has its client ask for the
		// token file, which this test looks for.
		r := e.sandboxdOpts(runOpts{env: vars}, "run", "--no-daemon", "-c", "curl -s -X POST --unix-socket "+socket+" http://sandboxd/v1/token; echo curl=$?")
		if strings.Contains(r.stdout, `"path"`) || !strings.Contains(r.stdout, "curl=") {
			t.Errorf("the daemon answered a run\n%s", r)
		}
		if _, err := os.Lstat(tokenFile); err == nil {
			t.Errorf("the daemon heard from inside the sandbox: the token file exists")
		}
		if r := e.sandboxdOpts(runOpts{env: vars}, "serve", "status"); r.code != 0 {
			t.Fatalf("serve status\n%s", r)
		}
		tok, err := os.ReadFile(tokenFile)
		if err != nil || len(tok) < 32 {
			t.Fatalf("no token: %v", err)
		}
		r = e.sandboxdOpts(runOpts{env: vars}, "run", "--no-daemon", "-c", "cat "+tokenFile+"; echo cat=$?")
		if strings.Contains(r.stdout+r.stderr, strings.TrimSpace(string(tok))) || !strings.Contains(r.stdout, "cat=") {
			t.Errorf("the token was read inside the sandbox\n%s", r)
		}
	})
}

// reportCore is what must match between a run through the daemon and
// the same run embedded: the status, the attempts, the workspace and
// every boundary as decided.
func reportCore(r result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit %v attempts %v timed_out %v workspace %v\n", r.report["exit_code"], r.report["attempts"], r.report["timed_out"], r.report["workspace"])
	bs, _ := r.report["boundaries"].([]any)
	for _, x := range bs {
		m, _ := x.(map[string]any)
		fmt.Fprintf(&b, "boundary %v %v %v%v %v %v\n", m["attempt"], m["operation"], m["path"], m["destination"], m["decision"], m["source"])
	}
	return b.String()
}

// sandboxd run --daemon behaves as the embedded run: the same output,
// exit status, report and effects, for each identity, with the daemon
// acting with the caller's rights only.
func TestDaemonExecMatchesEmbedded(t *testing.T) {
	socket, dlog := startDaemonLog(t)
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", dlog.String())
		}
	}()
	forEach(t, func(t *testing.T, e *env) {
		outside := e.mkdir("outside", 0o755)
		cases := []struct {
			name  string
			args  []string
			stdin string
		}{
			{"output and status", []string{"-c", "echo out; echo err >&2; exit 3"}, ""},
			{"stdin", []string{"-c", "cat; echo done"}, "from stdin\n"},
			{"workspace write", []string{"-c", "echo w > w.txt; cat w.txt"}, ""},
			{"write outside", []string{"-c", "echo x > " + filepath.Join(outside, "x")}, ""},
			{"secret", []string{"-c", "cat ~/.ssh/id_rsa"}, ""},
			{"timeout", []string{"--timeout", "1s", "-c", "sleep 30"}, ""},
			{"not found", []string{"--", "sandboxd-no-such-command"}, ""},
			{"git", []string{"-c", "rm -rf r && git init -q r && cd r && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m x && git log --oneline | wc -l"}, ""},
			{"network boundary", []string{"-c", "curl -s -m 5 -o /dev/null http://" + hostListener(t) + "/; echo curl=$?"}, ""},
		}
		for _, tc := range cases {
			os.Remove(filepath.Join(e.ws, "w.txt"))
			vars := []string{"SANDBOXD_SOCKET=" + socket}
			embedded := e.sandboxdOpts(runOpts{env: vars, stdin: tc.stdin}, append([]string{"run", "--no-daemon"}, tc.args...)...)
			os.Remove(filepath.Join(e.ws, "w.txt"))
			daemon := e.sandboxdOpts(runOpts{env: vars, stdin: tc.stdin}, append([]string{"run", "--daemon"}, tc.args...)...)
			e.noCanary(t, daemon)
			if embedded.code != daemon.code || embedded.stdout != daemon.stdout || embedded.stderr != daemon.stderr || reportCore(embedded) != reportCore(daemon) {
				t.Errorf("%s: embedded and through the daemon differ\n--- embedded\n%s\n%s--- daemon\n%s\n%s", tc.name, embedded, reportCore(embedded), daemon, reportCore(daemon))
			}
			if _, err := os.Lstat(filepath.Join(outside, "x")); err == nil {
				t.Fatalf("%s: the write outside landed", tc.name)
			}
		}
		// What the daemon wrote for the caller is the caller's.
		e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + socket}}, "run", "--daemon", "-c", "echo w > owned.txt").mustSucceed(t)
		st, err := os.Lstat(filepath.Join(e.ws, "owned.txt"))
		if err != nil || int(st.Sys().(*syscall.Stat_t).Uid) != e.id.uid {
			t.Errorf("a file the daemon wrote for uid %d: %v %v", e.id.uid, st, err)
		}
	})
}

// A client that goes away ends its run: no process of it survives.
func TestDaemonExecEndsWithClient(t *testing.T) {
	socket := startDaemon(t)
	forEach(t, func(t *testing.T, e *env) {
		marker := "daemon-gone-" + randHex(6)
		r := e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + socket}, killed: true, noReport: true, started: func(p *os.Process) {
			for deadline := time.Now().Add(20 * time.Second); len(processesWith(marker)) == 0 && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			p.Signal(syscall.SIGKILL)
		}}, "run", "--daemon", "-c", "(sleep 300; echo "+marker+") & sleep 300; echo "+marker)
		if r.code == 0 {
			t.Fatalf("the killed client exited 0\n%s", r)
		}
		noSurvivors(t, marker)
	})
}

// SIGTERM ends the daemon's runs (no process survives; the client gets
// its report: killed) and the daemon exits 0; kill -9 of the daemon
// mid-run leaves no process of the run either.
func TestDaemonStops(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxd serve runs as root")
	}
	ids := identities(t)
	e := newEnv(t, ids[len(ids)-1])
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			td := spawnDaemon(t)
			d, socket, exited := td.cmd, td.socket, td.exited
			marker := "daemon-stop-" + randHex(6)
			// Once the command's processes run (not counting the client,
			// whose command line names the marker too), stop the daemon.
			started := func(client *os.Process) {
				for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
					if n := len(slices.DeleteFunc(processesWith(marker), func(pid int) bool { return pid == client.Pid })); n >= 2 {
						break
					}
				}
				d.Process.Signal(sig)
			}
			r := e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + socket}, noReport: true, started: started},
				"run", "--daemon", "-c", "(sleep 300; echo "+marker+") & sleep 300; echo "+marker)
			noSurvivors(t, marker)
			if r.code == 0 || strings.Contains(r.stdout, marker) {
				t.Errorf("the run went on\n%s", r)
			}
			select {
			case err := <-exited:
				if sig == syscall.SIGTERM && err != nil {
					t.Errorf("the daemon ended with %v on SIGTERM", err)
				}
			case <-time.After(15 * time.Second):
				d.Process.Kill()
				t.Fatalf("the daemon did not end on %v", sig)
			}
			if sig == syscall.SIGTERM && r.code != 128+9 && r.code != 128+15 {
				t.Errorf("the client was not told the run was killed (exit %d)\n%s", r.code, r)
			}
			if sig == syscall.SIGKILL && !strings.Contains(r.stderr, "ended before the run's report") {
				t.Errorf("the client was not told the daemon went mid-run\n%s", r)
			}
		})
	}
}

// review decides a boundary before anything runs, for the caller only,
// with the caller's policy: a secret is a hard deny, a write outside
// with no reviewer is denied, the model's allow comes with a grant when
// asked; a request naming another user's home is refused.
func TestDaemonReview(t *testing.T) {
	socket := startDaemon(t)
	forEach(t, func(t *testing.T, e *env) {
		e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + socket}}, "serve", "status").mustSucceed(t)
		tok, _ := os.ReadFile(filepath.Join(filepath.Dir(socket), "tokens", fmt.Sprint(e.id.uid)))
		ask := func(home string, q map[string]any) (int, map[string]any) {
			return e.daemonPost(socket, strings.TrimSpace(string(tok)), "/v1/review", home, q)
		}
		consume := func(q map[string]any) (int, map[string]any) {
			return e.daemonPost(socket, strings.TrimSpace(string(tok)), "/v1/grants/consume", e.home, q)
		}
		decision := func(out map[string]any) string {
			d, _ := out["decision"].(map[string]any)
			return fmt.Sprint(d["outcome"], " ", d["source"])
		}
		if code, out := ask(e.home, map[string]any{"surface": "filesystem", "operation": "read_file", "path": filepath.Join(e.home, ".ssh", "id_rsa")}); code != 200 || decision(out) != "deny hard-deny" {
			t.Errorf("secret: %d %v", code, out)
		}
		outside := filepath.Join(e.dir, "out.txt")
		if code, out := ask(e.home, map[string]any{"surface": "filesystem", "operation": "make_reg", "path": outside, "command": "echo x > " + outside, "grant": true}); code != 200 || decision(out) != "deny no-reviewer" || out["grant"] != nil {
			t.Errorf("outside without a reviewer: %d %v", code, out)
		}
		fm := newFakeModel(t, func(string) (string, string, string, string) { return "allow", "low", "high", "a build output" })
		e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), "[review]\nmodel = \"fake-model\"\nbase_url = \""+fm.url+"\"\napi_key_env = \"FAKE_REVIEW_KEY\"\n", 0o644)
		q := map[string]any{"surface": "filesystem", "operation": "make_reg", "path": outside, "command": "echo x > " + outside, "grant": true, "session": "s1"}
		code, out := ask(e.home, q)
		g, _ := out["grant"].(map[string]any)
		if code != 200 || decision(out) != "allow reviewer" || g == nil || len(fmt.Sprint(g["token"])) < 32 {
			t.Fatalf("a model's allow: %d %v", code, out)
		}
		// The grant is used once, for exactly that request; presented for
		// another, it is refused and gone.
		use := func(change func(map[string]any)) int {
			c := map[string]any{"token": g["token"]}
			for k, v := range q {
				if k != "grant" {
					c[k] = v
				}
			}
			change(c)
			code, _ := consume(c)
			return code
		}
		if code := use(func(c map[string]any) { c["command"] = "echo y > " + outside }); code != 409 {
			t.Errorf("consumed for another command: %d", code)
		}
		if code := use(func(map[string]any) {}); code != 409 {
			t.Errorf("a grant presented for another command was still good: %d", code)
		}
		regrant := func() {
			code, out = ask(e.home, q)
			if g, _ = out["grant"].(map[string]any); code != 200 || g == nil {
				t.Fatalf("no second grant: %d %v", code, out)
			}
		}
		regrant()
		if code := use(func(c map[string]any) { c["session"] = "s2" }); code != 409 {
			t.Errorf("consumed in another session: %d", code)
		}
		regrant()
		if code := use(func(map[string]any) {}); code != 200 {
			t.Errorf("consumed for its request: %d", code)
		}
		if code := use(func(map[string]any) {}); code != 409 {
			t.Errorf("consumed twice: %d", code)
		}
		if _, err := os.Lstat(outside); err == nil {
			t.Error("a review wrote the file")
		}
		// Another user's home is not the caller's to name.
		other := "/root"
		if e.id.root() {
			other = "/home/" + testUser
		}
		if code, out := ask(other, map[string]any{"surface": "filesystem", "operation": "read_file", "path": "/etc/hostname"}); code != 403 {
			t.Errorf("another user's home: %d %v", code, out)
		}
		// Nor does the answer tell a path the caller cannot reach from one
		// that is not there: the daemon looks as the caller.
		if !e.id.root() {
			msg := func(home string) string {
				_, out := ask(home, map[string]any{"surface": "filesystem", "operation": "read_file", "path": "/etc/hostname"})
				m, _ := out["error"].(map[string]any)
				return strings.ReplaceAll(fmt.Sprint(m["message"]), home, "HOME")
			}
			private := filepath.Join(e.dir, "private")
			os.MkdirAll(filepath.Join(private, "inner"), 0o700)
			os.Chmod(private, 0o700) // root's: the caller cannot look inside
			if there, gone := msg(filepath.Join(private, "inner")), msg(filepath.Join(private, "none")); there != gone {
				t.Errorf("HOME inside a directory the caller cannot reach is told apart: %q vs %q", there, gone)
			}
		}
		if code, out := ask(e.home, map[string]any{"surface": "filesystem", "operation": "fly", "path": "/etc/hostname"}); code != 400 {
			t.Errorf("an unknown operation: %d %v", code, out)
		}
	})
	// Root's grant, presented by the unprivileged user for the same
	// boundary in a session of the same name, is refused.
	ids := identities(t)
	root, user := newEnv(t, ids[0]), newEnv(t, ids[1])
	fm := newFakeModel(t, func(string) (string, string, string, string) { return "allow", "low", "high", "fine" })
	root.writeFile(filepath.Join(root.home, ".config", "sandboxd", "policy.toml"), "[review]\nmodel = \"fake-model\"\nbase_url = \""+fm.url+"\"\napi_key_env = \"FAKE_REVIEW_KEY\"\n", 0o644)
	token := func(e *env) string {
		e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + socket}}, "serve", "status").mustSucceed(t)
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(socket), "tokens", fmt.Sprint(e.id.uid)))
		return strings.TrimSpace(string(b))
	}
	target := filepath.Join(root.dir, "shared.txt")
	q := func() map[string]any {
		return map[string]any{"surface": "filesystem", "operation": "make_reg", "path": target, "command": "echo x > " + target, "session": "s1"}
	}
	rq := q()
	rq["grant"] = true
	code, out := root.daemonPost(socket, token(root), "/v1/review", root.home, rq)
	g, _ := out["grant"].(map[string]any)
	if code != 200 || g == nil {
		t.Fatalf("root's review: %d %v", code, out)
	}
	uq := q()
	uq["token"] = g["token"]
	if code, out := user.daemonPost(socket, token(user), "/v1/grants/consume", user.home, uq); code != 409 {
		t.Errorf("the user used root's grant: %d %v", code, out)
	}
}

// daemonPost posts a review-like request for the env's identity (its
// HOME given as home) and decodes the JSON answer.
func (e *env) daemonPost(socket, token, path, home string, q map[string]any) (int, map[string]any) {
	e.t.Helper()
	q["env"], q["cwd"], q["umask"] = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "FAKE_REVIEW_KEY=fake-review-key"}, e.ws, 0o22
	return e.rawPost(socket, token, path, q)
}

// The daemon never takes over a directory it is pointed at: one that a
// user owns or may write is refused, and left as it was.
func TestDaemonRefusesForeignDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxd serve runs as root")
	}
	ids := identities(t)
	e := newEnv(t, ids[len(ids)-1])
	for _, dir := range []string{e.mkdir("theirs", 0o755), e.mkdir("open", 0o777)} {
		if filepath.Base(dir) == "open" {
			os.Chown(dir, 0, 0)
		}
		before := snapshot(t, dir)
		cmd := exec.Command(binary, "serve", "--socket", filepath.Join(dir, "sandboxd.sock"))
		cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/bin:/bin", "HOME=/root"}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "must be a directory of root's that nobody else may write") {
			t.Errorf("serve in %s: %v\n%s", dir, err, out)
		}
		if after := snapshot(t, dir); after != before {
			t.Errorf("serve changed %s:\n%s\n->\n%s", dir, before, after)
		}
	}
}
