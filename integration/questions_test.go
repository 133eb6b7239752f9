package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// daemonToken is e's token for the daemon at socket (written on demand).
func (e *env) daemonToken(socket string) string {
	e.t.Helper()
	e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + socket}}, "serve", "status").mustSucceed(e.t)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(socket), "tokens", fmt.Sprint(e.id.uid)))
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// execStream is one exec through the daemon, made by curl as e's
// identity: each NDJSON line of the answer as it comes, and the report
// line last (the channel closes when the answer ends).
func (e *env) execStream(socket, token string, req map[string]any) <-chan map[string]any {
	e.t.Helper()
	req["env"] = []string{"HOME=" + e.home, "PATH=/usr/bin:/bin", "FAKE_REVIEW_KEY=fake-review-key"}
	req["cwd"], req["umask"] = e.ws, 0o22
	body, _ := json.Marshal(req)
	cmd := exec.Command("curl", "-sN", "--unix-socket", socket, "-H", "Authorization: Bearer "+token,
		"-H", "Content-Type: application/x-ndjson", "--data-binary", "@-", "http://sandboxd/v1/exec")
	cmd.Dir, cmd.Env = e.ws, []string{"PATH=/usr/bin:/bin", "HOME=" + e.home}
	cmd.Stdin = strings.NewReader(string(body) + "\n")
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if os.Geteuid() == 0 && e.id.uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid), Groups: []uint32{}}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	lines := make(chan map[string]any, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l map[string]any
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				lines <- l
			}
		}
		cmd.Wait()
	}()
	e.t.Cleanup(func() { cmd.Process.Kill() })
	return lines
}

// nextQuestion waits for the stream's next question line: its question.
func nextQuestion(t *testing.T, lines <-chan map[string]any) map[string]any {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the exec ended without a question")
			}
			if l["type"] == "question" {
				q, _ := l["question"].(map[string]any)
				return q
			}
			if l["type"] == "report" {
				t.Fatalf("the exec ended without a question: %v", l)
			}
		case <-timeout:
			t.Fatal("no question came")
		}
	}
}

// reportOf waits for the stream's report line.
func reportOf(t *testing.T, lines <-chan map[string]any) map[string]any {
	t.Helper()
	timeout := time.After(90 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the exec ended without a report")
			}
			if l["type"] == "report" {
				r, _ := l["report"].(map[string]any)
				return r
			}
		case <-timeout:
			t.Fatal("no report came")
		}
	}
}

// answer posts an answer to question id as e's identity: the status.
func (e *env) answer(socket, token, id, body string) (int, string) {
	e.t.Helper()
	r := e.asIdentity(nil, "curl", "-s", "-w", "\n%{http_code}", "--unix-socket", socket, "-H", "Authorization: Bearer "+token,
		"--data-binary", body, "http://sandboxd/v1/questions/"+id+"/answer")
	i := strings.LastIndex(r.stdout, "\n")
	var code int
	fmt.Sscan(r.stdout[i+1:], &code)
	return code, r.stdout[:max(i, 0)]
}

// lastBoundary is a report's last boundary: decision and source.
func lastBoundary(rep map[string]any) string {
	bs, _ := rep["boundaries"].([]any)
	if len(bs) == 0 {
		return "none"
	}
	b, _ := bs[len(bs)-1].(map[string]any)
	return fmt.Sprint(b["decision"], " ", b["source"])
}

// Questions for a person through the daemon, answered by an API client
// (source client): the model's deny of a medium-risk write is deferred
// to the client, whose allow lands (the retry writes the file); a
// critical one and one in a lockdown cannot be allowed through the API
// (the file stays absent, the lockdown stays on, and no endpoint resets
// a session); another uid neither lists nor answers it; of two racing
// answers one wins; an unanswered question expires and denies.
func TestDaemonQuestions(t *testing.T) {
	d := spawnDaemon(t, "--question-wait", "4s")
	t.Cleanup(func() { d.cmd.Process.Signal(syscall.SIGTERM); <-d.exited })
	ids := identities(t)
	for i, id := range ids {
		t.Run(id.name, func(t *testing.T) {
			e := newEnv(t, id)
			other := newEnv(t, ids[(i+1)%len(ids)])
			testQuestions(t, e, other, d.socket)
		})
	}
}

func testQuestions(t *testing.T, e, other *env, socket string) {
	fm := newFakeModel(t, func(body string) (string, string, string, string) {
		switch {
		case strings.Contains(body, "critical.txt"):
			return "deny", "critical", "unknown", "looks like a start-up file"
		case strings.Contains(body, "medium.txt"), strings.Contains(body, "race.txt"), strings.Contains(body, "expire.txt"):
			return "deny", "medium", "unknown", "the user did not ask for this"
		}
		return "deny", "low", "unknown", "no"
	})
	e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), "[review]\nmodel = \"fake-model\"\nbase_url = \""+fm.url+"\"\napi_key_env = \"FAKE_REVIEW_KEY\"\n", 0o644)
	tok, otherTok := e.daemonToken(socket), other.daemonToken(socket)
	out := e.mkdir("out", 0o755)
	run := func(name string, extra map[string]any) (string, <-chan map[string]any) {
		target := filepath.Join(out, name)
		req := map[string]any{"argv": []string{"bash", "-c", "echo written > " + target}, "retries": 2, "questions": true, "session": "q-" + randHex(4)}
		for k, v := range extra {
			req[k] = v
		}
		return target, e.execStream(socket, tok, req)
	}
	written := func(target string) bool { _, err := os.Lstat(target); return err == nil }

	// Medium: the client's allow stands; the retry writes the file.
	target, lines := run("medium.txt", nil)
	q := nextQuestion(t, lines)
	id := fmt.Sprint(q["id"])
	if m, _ := q["model"].(map[string]any); m["risk_level"] != "medium" || !strings.HasSuffix(fmt.Sprint(q["path"]), "medium.txt") {
		t.Fatalf("the question does not carry what was asked and the model's deny: %v", q)
	}
	if code, body := other.curl(socket, "GET", "/v1/questions", otherTok); code != 200 || strings.Contains(body, id) {
		t.Errorf("another uid lists the question: %d %s", code, body)
	}
	if code, body := e.curl(socket, "GET", "/v1/questions", tok); code != 200 || !strings.Contains(body, id) {
		t.Errorf("the caller does not list its question: %d %s", code, body)
	}
	if code, _ := other.answer(socket, otherTok, id, `{"allow":true}`); code != 404 {
		t.Errorf("another uid answered: %d", code)
	}
	if code, body := e.answer(socket, tok, id, `{"allow":true,"note":"yes, write it"}`); code != 200 {
		t.Fatalf("the answer: %d %s", code, body)
	}
	rep := reportOf(t, lines)
	if b, err := os.ReadFile(target); err != nil || string(b) != "written\n" || rep["exit_code"] != float64(0) {
		t.Fatalf("the client's allow did not land: %q %v, report %v", b, err, rep)
	}
	bs, _ := rep["boundaries"].([]any)
	if b, _ := bs[0].(map[string]any); len(bs) == 0 || b["source"] != "client" || b["decision"] != "allow" {
		t.Errorf("the allow is not recorded as the client's: %v", bs)
	}

	// Critical: refused through the API; the client may still deny.
	target, lines = run("critical.txt", nil)
	id = fmt.Sprint(nextQuestion(t, lines)["id"])
	if code, body := e.answer(socket, tok, id, `{"allow":true}`); code != 403 || !strings.Contains(body, "critical") {
		t.Errorf("a client allowed a critical boundary: %d %s", code, body)
	}
	if code, _ := e.answer(socket, tok, id, `{"allow":false,"note":"no"}`); code != 200 {
		t.Errorf("the client's deny: %d", code)
	}
	if rep := reportOf(t, lines); written(target) || lastBoundary(rep) != "deny client" {
		t.Errorf("critical: written %v, %s", written(target), lastBoundary(rep))
	}

	// Lockdown: no model judges, so the client can allow nothing, and
	// nothing in the API lifts it.
	sess := "locked-" + randHex(4)
	e.sandboxd("run", "--session", sess, "--reviewer", "off", "-c", "echo x > /etc/sbx-a; echo x > /etc/sbx-b; echo x > /etc/sbx-c; echo x > /etc/sbx-d")
	status := func() int { return e.sandboxdOpts(runOpts{noReport: true}, "session", "status", sess).code }
	if status() != 1 {
		t.Fatal("the session did not lock down")
	}
	for _, p := range []string{"/v1/sessions/" + sess + "/reset", "/v1/sessions/" + sess, "/v1/sessions/reset", "/v1/sessions/" + sess + "/unlock"} {
		for _, m := range []string{"POST", "DELETE", "PUT", "PATCH"} {
			if m == "POST" && p == "/v1/sessions/"+sess {
				// It reads the session (its body a Context); it lifts nothing.
				e.daemonPost(socket, tok, p, e.home, map[string]any{"session": sess})
				continue
			}
			if code, _ := e.curl(socket, m, p, tok); code/100 != 4 {
				t.Errorf("%s %s: %d", m, p, code)
			}
		}
	}
	if status() != 1 {
		t.Fatal("the API lifted the lockdown")
	}
	target, lines = run("locked.txt", map[string]any{"session": sess})
	id = fmt.Sprint(nextQuestion(t, lines)["id"])
	if code, _ := e.answer(socket, tok, id, `{"allow":true}`); code != 403 {
		t.Errorf("a client allowed in a lockdown: %d", code)
	}
	e.answer(socket, tok, id, `{"allow":false}`)
	if rep := reportOf(t, lines); written(target) || status() != 1 {
		t.Errorf("lockdown: written %v, status %d, %s", written(target), status(), lastBoundary(rep))
	}

	// Two answers race: one is taken, the other refused as answered.
	target, lines = run("race.txt", nil)
	id = fmt.Sprint(nextQuestion(t, lines)["id"])
	codes := make([]int, 2)
	var wg sync.WaitGroup
	for i, body := range []string{`{"allow":true}`, `{"allow":false}`} {
		wg.Add(1)
		go func() { defer wg.Done(); codes[i], _ = e.answer(socket, tok, id, body) }()
	}
	wg.Wait()
	rep = reportOf(t, lines)
	if !(codes[0] == 200 && codes[1] == 409 || codes[0] == 409 && codes[1] == 200) {
		t.Errorf("racing answers: %v", codes)
	}
	if won := codes[0] == 200; written(target) != won {
		t.Errorf("race: the allow won %v, written %v (%s)", won, written(target), lastBoundary(rep))
	}

	// Nobody answers: the question expires, and the model's deny stands.
	target, lines = run("expire.txt", nil)
	id = fmt.Sprint(nextQuestion(t, lines)["id"])
	rep = reportOf(t, lines)
	if written(target) || lastBoundary(rep) != "deny reviewer" {
		t.Errorf("expiry: written %v, %s", written(target), lastBoundary(rep))
	}
	if code, _ := e.answer(socket, tok, id, `{"allow":true}`); code != 409 && code != 404 {
		t.Errorf("an answer after expiry: %d", code)
	}
}

// passClient is a client that passes a descriptor with its exec request
// (SCM_RIGHTS, with the request's head), as `sandboxd run` passes its
// terminal: "null" passes /dev/null; "pty" makes one pty its
// controlling terminal and passes another, and says how many bytes
// reached the passed one's master.
const passClient = `
import os, socket, sys, fcntl, termios, time
sock_path, token, mode, req = sys.argv[1:5]
os.setsid()
other = None
if mode == "null":
    fd = os.open("/dev/null", os.O_RDWR)
else:
    m1, s1 = os.openpty()
    fcntl.ioctl(s1, termios.TIOCSCTTY, 0)
    other, fd = os.openpty()
body = req.encode() + b"\n"
head = ("POST /v1/exec HTTP/1.1\r\nHost: sandboxd\r\nAuthorization: Bearer %s\r\nContent-Type: application/x-ndjson\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (token, len(body))).encode()
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect(sock_path)
socket.send_fds(c, [head], [fd])
c.sendall(body)
out = b""
while True:
    b = c.recv(65536)
    if not b:
        break
    out += b
sys.stdout.write(out.decode(errors="replace"))
if other is not None:
    os.set_blocking(other, False)
    try:
        n = len(os.read(other, 65536))
    except BlockingIOError:
        n = 0
    sys.stdout.write("\nPTY-BYTES %d\n" % n)
`

// A terminal passed over the socket is the person's only when it is
// the client's controlling terminal: /dev/null and a pty that is not
// are refused (said once, as a warning), nobody is asked and nothing is
// written to them; with `sandboxd run --daemon` under a real controlling
// terminal (script), the question reaches that terminal and a typed "y"
// allows (the retry writes the file).
func TestDaemonTerminal(t *testing.T) {
	socket := startDaemon(t)
	forEach(t, func(t *testing.T, e *env) {
		tok := e.daemonToken(socket)
		out := e.mkdir("out", 0o755)
		for _, mode := range []string{"null", "pty"} {
			target := filepath.Join(out, mode+".txt")
			req, _ := json.Marshal(map[string]any{"argv": []string{"bash", "-c", "echo written > " + target}, "retries": 2,
				"env": []string{"HOME=" + e.home, "PATH=/usr/bin:/bin"}, "cwd": e.ws, "umask": 0o22})
			r := e.asIdentity(nil, "/usr/bin/python3", "-c", passClient, socket, tok, mode, string(req))
			if !strings.Contains(r.stdout, "not your controlling terminal") || strings.Count(r.stdout, `"kind":"warning"`) != 1 {
				t.Errorf("%s: the refused terminal was not said once:\n%s", mode, r)
			}
			if !strings.Contains(r.stdout, `"source":"no-reviewer"`) || !strings.Contains(r.stdout, `"type":"report"`) {
				t.Errorf("%s: somebody was asked, or no report:\n%s", mode, r)
			}
			if mode == "pty" && !strings.Contains(r.stdout, "PTY-BYTES 0") {
				t.Errorf("the pty that is not the client's terminal was written to:\n%s", r)
			}
			if _, err := os.Lstat(target); err == nil {
				t.Errorf("%s: written without anyone's allow", mode)
			}
		}
		// A real controlling terminal: script(1) gives the client one.
		target := filepath.Join(out, "tty.txt")
		cmd := exec.Command("script", "-qfec", binary+" run --daemon -- bash -c 'echo written > "+target+"'", "/dev/null")
		cmd.Dir = e.ws
		cmd.Env = []string{"HOME=" + e.home, "PATH=/usr/bin:/bin", "SANDBOXD_SOCKET=" + socket, "TERM=dumb"}
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		if os.Geteuid() == 0 && e.id.uid != 0 {
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(e.id.uid), Gid: uint32(e.id.gid), Groups: []uint32{}}
		}
		stdin, _ := cmd.StdinPipe()
		var mu sync.Mutex
		var screen strings.Builder
		cmd.Stdout = writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			screen.Write(p)
			return len(p), nil
		})
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		seen := func() string { mu.Lock(); defer mu.Unlock(); return screen.String() }
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(seen(), "Allow exactly this, once?"); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("no question on the terminal:\n%s", seen())
			}
		}
		stdin.Write([]byte("y\n"))
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("sandboxd run --daemon: %v\n%s", err, seen())
			}
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("the run did not end:\n%s", seen())
		}
		if b, err := os.ReadFile(target); err != nil || string(b) != "written\n" {
			t.Errorf("the person's y at the terminal did not land: %q %v\n%s", b, err, seen())
		}
		if !strings.Contains(seen(), "target") && !strings.Contains(seen(), "tty.txt") {
			t.Errorf("the question did not name the boundary:\n%s", seen())
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
