package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// execLines posts an exec request for the env's identity and returns
// the NDJSON lines of the answer, and its report (nil: none).
func (e *env) execLines(socket, token string, q map[string]any) ([]map[string]any, map[string]any) {
	e.t.Helper()
	q["env"], q["cwd"], q["umask"] = []string{"HOME=" + e.home, "PATH=/usr/bin:/bin", "FAKE_REVIEW_KEY=fake-review-key"}, e.ws, 0o22
	body, _ := json.Marshal(q)
	r := e.asIdentity(nil, "curl", "-sN", "--unix-socket", socket, "-H", "Authorization: Bearer "+token,
		"--data-binary", string(body), "http://sandboxd/v1/exec")
	var lines []map[string]any
	var rep map[string]any
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) != nil {
			e.t.Fatalf("not an NDJSON line: %q (stderr %q)", l, r.stderr)
		}
		lines = append(lines, m)
		if m["type"] == "report" {
			rep, _ = m["report"].(map[string]any)
			if msg, _ := m["error"].(string); msg != "" {
				rep["error"] = msg
			}
		}
	}
	return lines, rep
}

// heldGrants are the grants a report's retry offers.
func heldGrants(rep map[string]any) []any {
	r, _ := rep["retry"].(map[string]any)
	g, _ := r["grants"].([]any)
	return g
}

// With retry "client", the daemon holds an attempt whose boundaries were
// all allowed: nothing of it lands until the client presents the grants,
// and then exactly the retry's changes land. A replayed presentation
// runs nothing; a declined retry keeps the first attempt's changes and
// grants nothing; another user's presentation of the grants runs
// nothing and ends the hold.
func TestDaemonClientRetry(t *testing.T) {
	socket, dlog := startDaemonLog(t)
	defer func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", dlog.String())
		}
	}()
	fm := newFakeModel(t, func(string) (string, string, string, string) { return "allow", "low", "high", "a build output" })
	token := func(e *env) string {
		e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + socket}}, "serve", "status").mustSucceed(t)
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(socket), "tokens", fmt.Sprint(e.id.uid)))
		return strings.TrimSpace(string(b))
	}
	setup := func(e *env) (string, string) {
		e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), "[review]\nmodel = \"fake-model\"\nbase_url = \""+fm.url+"\"\napi_key_env = \"FAKE_REVIEW_KEY\"\n", 0o644)
		return token(e), e.mkdir("outside", 0o755)
	}
	request := func(outside, name string) map[string]any {
		cmd := fmt.Sprintf("echo run >> %s.count; echo out > %s", name, filepath.Join(outside, name))
		return map[string]any{"argv": []string{"bash", "-c", cmd}, "command": cmd, "retry": "client", "retries": 1, "session": "s1"}
	}
	lines := func(path string) int {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0
		}
		return strings.Count(string(b), "\n")
	}
	forEach(t, func(t *testing.T, e *env) {
		tok, outside := setup(e)
		q := request(outside, "a")
		_, rep := e.execLines(socket, tok, q)
		grants := heldGrants(rep)
		if rep == nil || len(grants) != 1 || fmt.Sprint(rep["attempts"]) != "1" {
			t.Fatalf("first attempt: %v", rep)
		}
		if lines(filepath.Join(e.ws, "a.count")) != 0 || lines(filepath.Join(outside, "a")) != 0 {
			t.Fatal("a held attempt's changes landed before its retry")
		}
		q["grants"] = grants
		_, rep = e.execLines(socket, tok, q)
		if rep == nil || fmt.Sprint(rep["attempts"]) != "2" || fmt.Sprint(rep["exit_code"]) != "0" || rep["retry"] != nil {
			t.Fatalf("the retry: %v", rep)
		}
		if lines(filepath.Join(e.ws, "a.count")) != 1 || lines(filepath.Join(outside, "a")) != 1 {
			t.Fatalf("after the retry: count %d, outside %d lines (want 1 and 1)", lines(filepath.Join(e.ws, "a.count")), lines(filepath.Join(outside, "a")))
		}
		_, rep = e.execLines(socket, tok, q)
		if rep == nil || fmt.Sprint(rep["exit_code"]) != "125" || lines(filepath.Join(e.ws, "a.count")) != 1 {
			t.Fatalf("a replayed presentation: %v, count %d", rep, lines(filepath.Join(e.ws, "a.count")))
		}

		// Declined: the first attempt's changes land, the grant is gone.
		q = request(outside, "b")
		_, rep = e.execLines(socket, tok, q)
		grants = heldGrants(rep)
		code, out := e.daemonPost(socket, tok, "/v1/retries/decline", e.home, map[string]any{"grants": grants})
		if code != 400 {
			t.Errorf("a decline with a context: %d %v", code, out)
		}
		code, out = e.rawPost(socket, tok, "/v1/retries/decline", map[string]any{"grants": grants})
		if code != 200 {
			t.Fatalf("decline: %d %v", code, out)
		}
		if lines(filepath.Join(e.ws, "b.count")) != 1 || lines(filepath.Join(outside, "b")) != 0 {
			t.Fatalf("after a decline: count %d, outside %d lines (want 1 and 0)", lines(filepath.Join(e.ws, "b.count")), lines(filepath.Join(outside, "b")))
		}
		q["grants"] = grants
		if _, rep = e.execLines(socket, tok, q); fmt.Sprint(rep["exit_code"]) != "125" || lines(filepath.Join(outside, "b")) != 0 {
			t.Fatalf("a declined retry's grants still ran: %v", rep)
		}
		if code, _ := e.rawPost(socket, tok, "/v1/retries/decline", map[string]any{"grants": grants}); code != 409 {
			t.Errorf("declined twice: %d", code)
		}

		// Presented for another command: nothing runs, the hold ends.
		q = request(outside, "c")
		_, rep = e.execLines(socket, tok, q)
		other := request(outside, "c2")
		other["grants"] = heldGrants(rep)
		if _, rep = e.execLines(socket, tok, other); fmt.Sprint(rep["exit_code"]) != "125" || lines(filepath.Join(outside, "c2")) != 0 {
			t.Fatalf("grants presented for another command: %v", rep)
		}
		q["grants"] = other["grants"]
		if _, rep = e.execLines(socket, tok, q); fmt.Sprint(rep["exit_code"]) != "125" || lines(filepath.Join(outside, "c")) != 0 {
			t.Fatalf("the hold outlived a presentation for another command: %v", rep)
		}
		if lines(filepath.Join(e.ws, "c.count")) != 1 {
			t.Errorf("the ended hold's first attempt was not committed")
		}
	})

	// Root's held grants, presented by the unprivileged user for a
	// command of the same text in a session of the same name.
	ids := identities(t)
	if len(ids) < 2 {
		return
	}
	root, user := newEnv(t, ids[0]), newEnv(t, ids[1])
	rtok, routside := setup(root)
	utok, _ := setup(user)
	q := request(routside, "d")
	_, rep := root.execLines(socket, rtok, q)
	uq := request(routside, "d")
	uq["grants"] = heldGrants(rep)
	if _, urep := user.execLines(socket, utok, uq); fmt.Sprint(urep["exit_code"]) != "125" {
		t.Fatalf("the user's presentation of root's grants: %v", urep)
	}
	q["grants"] = uq["grants"]
	if _, rep = root.execLines(socket, rtok, q); fmt.Sprint(rep["exit_code"]) != "125" || lines(filepath.Join(routside, "d")) != 0 {
		t.Fatalf("root's hold outlived another user's presentation: %v", rep)
	}
}

// rawPost posts body as it is (no context added) and decodes the answer.
func (e *env) rawPost(socket, token, path string, q map[string]any) (int, map[string]any) {
	e.t.Helper()
	body, _ := json.Marshal(q)
	r := e.asIdentity(nil, "curl", "-s", "-w", "\n%{http_code}", "--unix-socket", socket, "-H", "Authorization: Bearer "+token,
		"--data-binary", string(body), "http://sandboxd"+path)
	i := strings.LastIndex(r.stdout, "\n")
	var code int
	fmt.Sscan(r.stdout[i+1:], &code)
	var out map[string]any
	json.Unmarshal([]byte(r.stdout[:max(i, 0)]), &out)
	return code, out
}

// A session's state through the API is the caller's own: the model's
// denials in it, its breaker tripping; another user naming the same
// session sees their own, empty one.
func TestDaemonSessionState(t *testing.T) {
	socket := startDaemon(t)
	fm := newFakeModel(t, func(string) (string, string, string, string) { return "deny", "high", "low", "not for this task" })
	ids := identities(t)
	envs := make([]*env, len(ids))
	for i, id := range ids {
		envs[i] = newEnv(t, id)
	}
	e := envs[0]
	e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), "[review]\nmodel = \"fake-model\"\nbase_url = \""+fm.url+"\"\napi_key_env = \"FAKE_REVIEW_KEY\"\n", 0o644)
	token := func(e *env) string {
		e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + socket}}, "serve", "status").mustSucceed(t)
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(socket), "tokens", fmt.Sprint(e.id.uid)))
		return strings.TrimSpace(string(b))
	}
	tok := token(e)
	state := func(e *env, tok, name string) (int, map[string]any) {
		return e.daemonPost(socket, tok, "/v1/sessions/"+name, e.home, map[string]any{})
	}
	if code, st := state(e, tok, "s1"); code != 200 || st["locked"] != false || len(st["recent_denials"].([]any)) != 0 {
		t.Fatalf("a new session: %d %v", code, st)
	}
	for i := range 3 {
		target := filepath.Join(e.dir, fmt.Sprintf("f%d", i))
		e.daemonPost(socket, tok, "/v1/review", e.home, map[string]any{"surface": "filesystem", "operation": "make_reg", "path": target, "command": "touch " + target, "session": "s1"})
	}
	code, st := state(e, tok, "s1")
	if d, _ := st["recent_denials"].([]any); code != 200 || st["locked"] != true || len(d) != 3 || fmt.Sprint(st["headroom"]) != "0" {
		t.Fatalf("after three model denials: %d %v", code, st)
	}
	if code, _ := state(e, tok, "a/b"); code != 404 {
		t.Errorf("a name with a slash: %d", code)
	}
	if len(envs) > 1 {
		u := envs[1]
		if code, st := state(u, token(u), "s1"); code != 200 || st["locked"] != false || len(st["recent_denials"].([]any)) != 0 {
			t.Fatalf("another user's session of the same name: %d %v", code, st)
		}
		if code, _ := u.daemonPost(socket, token(u), "/v1/sessions/s1", e.home, map[string]any{}); code != 403 {
			t.Errorf("another user naming root's home: %d", code)
		}
	}
}

// sandboxd run goes through the daemon by itself when its socket is there
// and trusted (--no-daemon keeps it here; an untrusted socket is said and
// passed over), and relays signals as an embedded run does: one SIGINT
// reaches the command, which may trap it; two end its whole tree.
func TestDaemonRunChoosesItAndRelaysSignals(t *testing.T) {
	socket, dlog := startDaemonLog(t)
	runs := func() int { return strings.Count(dlog.String(), "msg=workspace") }
	forEach(t, func(t *testing.T, e *env) {
		vars := []string{"SANDBOXD_SOCKET=" + socket}
		before := runs()
		r := e.sandboxdOpts(runOpts{env: vars}, "run", "-c", "echo hi")
		if r.code != 0 || r.stdout != "hi\n" || runs() != before+1 {
			t.Fatalf("with the socket there, the run did not go through the daemon (%d runs there)\n%s", runs()-before, r)
		}
		r = e.sandboxdOpts(runOpts{env: vars}, "run", "--no-daemon", "-c", "echo hi")
		if r.code != 0 || runs() != before+1 {
			t.Fatalf("--no-daemon went through the daemon\n%s", r)
		}
		fake := filepath.Join(e.mkdir("planted", 0o755), "sandboxd.sock")
		e.writeFile(fake, "", 0o644)
		r = e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + fake}}, "run", "-c", "echo hi")
		if r.code != 0 || r.stdout != "hi\n" || !strings.Contains(r.stderr, "not using the daemon") {
			t.Fatalf("an untrusted socket: not said, or the run did not stay here\n%s", r)
		}
		// Once: the command traps it and goes on to its end. Twice: the
		// second ends the whole tree, though the command traps both.
		for _, times := range []int{1, 2} {
			results := map[string]result{}
			for _, mode := range []string{"--no-daemon", "--daemon"} {
				marker := fmt.Sprintf("7.%d%d", times, time.Now().UnixNano()%1000)
				started := func(p *os.Process) {
					// The command's sleep itself: the client's and bash's
					// command lines name it too, and bash's exists before
					// its trap is set.
					for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
						if slices.ContainsFunc(processesWith("sleep "+marker), func(pid int) bool {
							b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
							return string(b) == "sleep\x00"+marker+"\x00"
						}) {
							break
						}
					}
					for range times {
						p.Signal(syscall.SIGINT)
						time.Sleep(300 * time.Millisecond)
					}
				}
				script := "trap 'echo trapped' INT; sleep " + marker + " & wait $!; echo after"
				if times == 2 {
					script = "trap 'echo trapped' INT; while :; do sleep " + marker + " & wait $!; done"
				}
				results[mode] = e.sandboxdOpts(runOpts{env: vars, noReport: true, started: started}, "run", mode, "-c", script)
				noSurvivors(t, "sleep "+marker)
			}
			here, there := results["--no-daemon"], results["--daemon"]
			if here.code != there.code || !strings.HasPrefix(there.stdout, "trapped\n") || !strings.HasPrefix(here.stdout, "trapped\n") {
				t.Errorf("SIGINT x%d: here and through the daemon differ, or the command did not get the first\n--- here\n%s--- daemon\n%s", times, here, there)
			}
			if times == 1 && (here.stdout != "trapped\nafter\n" || here.code != 0) {
				t.Errorf("one SIGINT ended the command\n%s", here)
			}
			if times == 2 && here.code == 0 {
				t.Errorf("two SIGINTs did not end the command\n%s", here)
			}
		}
	})
}

// hostListener is a loopback HTTP server of the test's own, on the host:
// its address. A sandboxed command reaches it only through a boundary.
func hostListener(t *testing.T) string {
	t.Helper()
	return serveLoopback(t, func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("host\n")) })
}

// Two clients presenting one grant race: exactly one wins, for a grant
// from a review (grants/consume) and for a held attempt's (exec).
func TestDaemonGrantRaces(t *testing.T) {
	socket := startDaemon(t)
	fm := newFakeModel(t, func(string) (string, string, string, string) { return "allow", "low", "high", "a build output" })
	e := newEnv(t, identities(t)[0])
	e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), "[review]\nmodel = \"fake-model\"\nbase_url = \""+fm.url+"\"\napi_key_env = \"FAKE_REVIEW_KEY\"\n", 0o644)
	e.sandboxdOpts(runOpts{env: []string{"SANDBOXD_SOCKET=" + socket}}, "serve", "status").mustSucceed(t)
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(socket), "tokens", fmt.Sprint(e.id.uid)))
	tok := strings.TrimSpace(string(b))
	outside := e.mkdir("outside", 0o755)
	race := func(n int, f func() bool) int {
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if f() {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		return int(wins.Load())
	}
	target := filepath.Join(outside, "reviewed")
	q := map[string]any{"surface": "filesystem", "operation": "make_reg", "path": target, "command": "touch " + target, "session": "s1", "grant": true}
	_, out := e.daemonPost(socket, tok, "/v1/review", e.home, q)
	g, _ := out["grant"].(map[string]any)
	if g == nil {
		t.Fatalf("no grant: %v", out)
	}
	delete(q, "grant")
	if wins := race(8, func() bool {
		c := maps.Clone(q)
		c["token"] = g["token"]
		code, _ := e.daemonPost(socket, tok, "/v1/grants/consume", e.home, c)
		return code == 200
	}); wins != 1 {
		t.Errorf("%d of 8 consumers of one grant won", wins)
	}
	cmd := "echo run >> race.count; echo out >> " + filepath.Join(outside, "held")
	req := func() map[string]any {
		return map[string]any{"argv": []string{"bash", "-c", cmd}, "command": cmd, "retry": "client", "retries": 1, "session": "s1"}
	}
	_, rep := e.execLines(socket, tok, req())
	grants := heldGrants(rep)
	if len(grants) != 1 {
		t.Fatalf("no held attempt: %v", rep)
	}
	if wins := race(6, func() bool {
		r := req()
		r["grants"] = grants
		_, rep := e.execLines(socket, tok, r)
		return fmt.Sprint(rep["exit_code"]) == "0"
	}); wins != 1 {
		t.Errorf("%d of 6 retries presenting one held attempt's grants ran", wins)
	}
	if got, _ := os.ReadFile(filepath.Join(outside, "held")); string(got) != "out\n" {
		t.Errorf("the held attempt's retry ran %q times", got)
	}
}
