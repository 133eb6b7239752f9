package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// shotsDir is where the page's screenshots go: out of the repository.
const shotsDir = "/var/lib/sandboxd-shots"

// browser is a headless Chromium of Debian's chromium package, with a
// fresh profile: a context to run chromedp actions in.
func browser(t *testing.T, id identity) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (apt-get install chromium): the approvals page is not driven in a browser")
	}
	// The browser runs as the person whose page it opens: the page serves
	// only its session's own user's browser (the kernel's word on the
	// connection's owner).
	profile := t.TempDir()
	exe := path
	if id.uid != os.Getuid() {
		os.Chmod(filepath.Dir(profile), 0o755)
		os.Chown(profile, id.uid, id.gid)
		exe = filepath.Join(filepath.Dir(profile), "chromium-as-"+strconv.Itoa(id.uid))
		script := fmt.Sprintf("#!/bin/sh\nexec setpriv --reuid=%d --regid=%d --clear-groups -- %s \"$@\"\n", id.uid, id.gid, path)
		if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(exe),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.UserDataDir(profile),
		chromedp.Flag("window-size", "1200,900"), chromedp.Env("HOME="+profile))
	ctx, cancel := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// pageLink is a one-time link to the approvals page for e, as the
// daemon gives it over its socket.
func (e *env) pageLink(socket, token string) string {
	e.t.Helper()
	// A program holding the user's token, with no terminal, gets no link:
	// it is not the person at the terminal.
	r := e.asIdentity(nil, "curl", "-s", "-X", "POST", "--unix-socket", socket, "-H", "Authorization: Bearer "+token, "http://sandboxd/v1/approvals/link")
	if !strings.Contains(r.stdout, "needs_a_terminal") || strings.Contains(r.stdout, "/login?code=") {
		e.t.Fatalf("a link was issued to a program with no terminal: %s", r.stdout)
	}
	// `sandboxd approve --page` at a terminal: the daemon writes the link
	// there, and only there.
	tm := newFramedTerminal(e.t, e)
	out := e.sandboxdOpts(runOpts{tty: tm.slave, env: []string{"SANDBOXD_SOCKET=" + socket}, noReport: true}, "approve", "--page")
	if out.code != 0 || strings.Contains(out.stdout+out.stderr, "/login?code=") {
		e.t.Fatalf("approve --page:\n%s", out)
	}
	text := tm.settled()
	i := strings.Index(text, "http://")
	if i < 0 {
		e.t.Fatalf("no link on the terminal: %q", text)
	}
	link := text[i:]
	if j := strings.IndexAny(link, "\r\n "); j >= 0 {
		link = link[:j]
	}
	return link
}

// text is the page's main text in ctx.
func text(t *testing.T, ctx context.Context) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// do runs the steps in ctx or fails.
func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// click clicks the element sel selects, which submits a form, and
// waits for the page that answers.
func click(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	do(t, ctx, chromedp.Click(chromedp.CSS(sel)))
	for range 50 {
		time.Sleep(200 * time.Millisecond)
		if _, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body"))); err == nil {
			return
		}
	}
	t.Fatalf("no page came after clicking %s", sel)
}

// shot saves a full screenshot of ctx's page as name in shotsDir.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	b, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(shotsDir, 0o755)
	p := filepath.Join(shotsDir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

// freePort is a loopback port nothing listens on now.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// The approvals page end to end, in headless Chromium, for the
// unprivileged user: the one-time link signs in once; a boundary of an
// exec that relays nothing and passed no terminal appears as a card (a
// live page session makes the person reachable), a click approves it,
// the retry writes the file, and the history shows who answered; a
// second answer is refused; a redirect reaches the agent as an
// instruction; a <script> in a path is text; a POST from another origin
// of loopback and a foreign Host are refused; root's session sees none
// of the user's questions; a run cannot reach the page.
func TestApprovalsPage(t *testing.T) {
	addr := freePort(t)
	d := spawnDaemon(t, "--question-wait", "90s", "--approvals-addr", addr)
	t.Cleanup(func() { d.cmd.Process.Signal(syscall.SIGTERM); <-d.exited })
	ids := identities(t)
	e, root := newEnv(t, ids[len(ids)-1]), newEnv(t, ids[0])
	ctx := browser(t, e.id)
	fm := newFakeModel(t, func(body string) (string, string, string, string) {
		return "deny", "medium", "unknown", "the user did not ask for this <script>alert('rationale')</script>"
	})
	e.writeFile(filepath.Join(e.home, ".config", "sandboxd", "policy.toml"), "[review]\nmodel = \"fake-model\"\nbase_url = \""+fm.url+"\"\napi_key_env = \"FAKE_REVIEW_KEY\"\n", 0o644)
	tok := e.daemonToken(d.socket)
	link := e.pageLink(d.socket, tok)

	do(t, ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("nav")))
	if loc, _ := chromedp.Run(ctx, chromedp.Location()); loc != "http://"+addr+"/" {
		t.Fatalf("the link did not lead to the clean address: %s", loc)
	}
	do(t, ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("body")))
	if s := text(t, ctx); !strings.Contains(s, "used already") {
		t.Fatalf("the link worked twice: %s", s)
	}

	out := e.mkdir("out", 0o755)
	run := func(target string) <-chan map[string]any {
		return e.execStream(d.socket, tok, map[string]any{"argv": []string{"bash", "-c", "echo written > '" + target + "'"},
			"retries": 2, "session": "page-" + randHex(4)})
	}
	waitCard := func(ctx context.Context) {
		do(t, ctx, chromedp.Navigate("http://"+addr+"/"))
		deadline := time.Now().Add(60 * time.Second)
		for !strings.Contains(text(t, ctx), "Approve once") {
			if time.Now().After(deadline) {
				t.Fatal("no card appeared")
			}
			time.Sleep(300 * time.Millisecond)
			do(t, ctx, chromedp.Navigate("http://"+addr+"/"))
		}
	}

	// Approve once: the retry writes the file; the history says who.
	target := filepath.Join(out, "approved.txt")
	lines := run(target)
	waitCard(ctx)
	if s := text(t, ctx); !strings.Contains(s, "Project\n"+e.ws) && !strings.Contains(s, "Project "+e.ws) && !strings.Contains(s, e.ws+"\nDirectory") {
		t.Errorf("the card does not name the run's project %s: %s", e.ws, s)
	}
	shot(t, ctx, "approvals-pending.png")
	click(t, ctx, "button.allow")
	t.Logf("after the click: %s", text(t, ctx))
	rep, events := reportAndEvents(t, lines)
	// The run's client was told a question waited on the page (it may
	// notify its person), never the page's link.
	if !strings.Contains(events, `"question_waiting"`) || !strings.Contains(events, "denied unless answered by") || strings.Contains(events, "http://") {
		t.Fatalf("the events of a run whose question waited on the page: %s", events)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "written\n" || rep["exit_code"] != float64(0) || lastBoundary(rep) != "allow page" {
		t.Fatalf("the page's allow did not land: %q %v, %s, report %v", b, err, lastBoundary(rep), rep)
	}
	do(t, ctx, chromedp.Navigate("http://"+addr+"/history"), chromedp.WaitVisible(chromedp.CSS("table")))
	if s := text(t, ctx); !strings.Contains(s, "allowed once") || !strings.Contains(s, "this page") || !strings.Contains(s, "approved.txt") {
		t.Fatalf("the history: %s", s)
	}
	shot(t, ctx, "approvals-history.png")

	testIntents(t, ctx, e, d.socket, tok, addr, out)
	testSecondAnswer(t, ctx, addr, out, run, waitCard)
	testRedirect(t, ctx, out, run, waitCard)
	testScriptPath(t, ctx, e, out, run, waitCard)
	testForeign(t, ctx, e, d.socket, tok, addr, out, run, waitCard)

	// Root's session sees none of the user's questions.
	rootTok := root.daemonToken(d.socket)
	rctx := browser(t, root.id)
	run(filepath.Join(out, "users-own.txt"))
	waitCard(ctx)
	do(t, rctx, chromedp.Navigate(root.pageLink(d.socket, rootTok)), chromedp.WaitVisible(chromedp.CSS("nav")))
	if s := text(t, rctx); !strings.Contains(s, "Nothing waits") || strings.Contains(s, "users-own.txt") {
		t.Fatalf("another uid's page shows the question: %s", s)
	}
	do(t, rctx, chromedp.Navigate("http://"+addr+"/history"))
	if s := text(t, rctx); strings.Contains(s, "approved.txt") {
		t.Fatalf("another uid's history shows the question: %s", s)
	}
	waitCard(ctx)
	click(t, ctx, "button.deny")
	// Its report is not waited for: the fake model denies every write,
	// so the run may ask again; the deny itself was taken.
	if s := text(t, ctx); !strings.Contains(s, "Nothing waits") {
		t.Fatalf("the deny was not taken: %s", s)
	}

	// A run cannot reach the page: its port is the daemon's own.
	// (Its output is read in the run: a file written would be another
	// boundary, asked on the page.)
	r := reportOf(t, e.execStream(d.socket, tok, map[string]any{"argv": []string{"bash", "-c", "curl -s -m 5 http://" + addr + "/ | grep -q 'sandboxd approvals' && exit 7; exit 0"}}))
	if r["exit_code"] != float64(0) {
		t.Fatalf("a run reached the page: %v", r)
	}
}

// A second answer after the first is refused: two tabs show the card,
// one approves, the other's deny is refused with a sentence.
func testSecondAnswer(t *testing.T, ctx context.Context, addr, out string, run func(string) <-chan map[string]any, waitCard func(context.Context)) {
	tab, cancel := chromedp.NewContext(ctx)
	defer cancel()
	lines := run(filepath.Join(out, "twice.txt"))
	waitCard(ctx)
	do(t, tab, chromedp.Navigate("http://"+addr+"/"), chromedp.WaitVisible(chromedp.CSS("button.allow")))
	click(t, tab, "button.allow")
	click(t, ctx, "button.deny")
	if s := text(t, ctx); !strings.Contains(s, "answered already") {
		t.Fatalf("a second answer was not refused: %s", s)
	}
	if rep := reportOf(t, lines); lastBoundary(rep) != "allow page" {
		t.Fatalf("the first answer did not win: %s", lastBoundary(rep))
	}
}

// A redirect is a deny whose reason is the person's instruction: the
// agent reads it in the report's boundary, which the client (sandboxd
// run, render.go) prints on its stderr as every denial's reason.
func testRedirect(t *testing.T, ctx context.Context, out string, run func(string) <-chan map[string]any, waitCard func(context.Context)) {
	target := filepath.Join(out, "redirected.txt")
	lines := run(target)
	waitCard(ctx)
	const say = "write it to ./elsewhere instead"
	do(t, ctx, chromedp.SendKeys(chromedp.CSS("textarea[name=note]"), say))
	click(t, ctx, "button.redirect")
	rep := reportOf(t, lines)
	if _, err := os.Lstat(target); err == nil {
		t.Fatal("a redirect wrote the file")
	}
	bs, _ := json.Marshal(rep["boundaries"])
	if !strings.Contains(string(bs), `"rationale":"not allowed; the person redirects you instead: `+say+`","source":"page"`) {
		t.Fatalf("the instruction did not reach the agent: boundaries %s", bs)
	}
}

// A <script> in a path (and in the model's rationale) is shown as text.
func testScriptPath(t *testing.T, ctx context.Context, e *env, out string, run func(string) <-chan map[string]any, waitCard func(context.Context)) {
	e.mkdir(filepath.Join("out", "<script>alert(1)<"), 0o755)
	lines := run(filepath.Join(out, "<script>alert(1)</script>.txt"))
	waitCard(ctx)
	if s := text(t, ctx); !strings.Contains(s, "<script>alert(1)</script>.txt") || !strings.Contains(s, "<script>alert('rationale')</script>") {
		t.Fatalf("the path is not shown as text: %s", s)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int]("document.querySelectorAll('script').length")); err != nil || n != 0 {
		t.Fatalf("the page holds %d script elements (%v)", n, err)
	}
	click(t, ctx, "button.deny")
	reportOf(t, lines)
}

// A POST from another origin of loopback (same site, so the SameSite
// cookie goes with it) and a request for a foreign Host are refused,
// and the question stays open.
func testForeign(t *testing.T, ctx context.Context, e *env, socket, token, addr, out string, run func(string) <-chan map[string]any, waitCard func(context.Context)) {
	lines := run(filepath.Join(out, "foreign.txt"))
	waitCard(ctx)
	id, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.querySelector('input[name=id]').value"))
	if err != nil {
		t.Fatal(err)
	}
	// Another user's program (this test's, root's) with the user's link:
	// refused, as its cookie would be (browsers send it to every port of
	// loopback), and the link is spent.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(e.pageLink(socket, token))
	if err != nil || resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Fatalf("another user's program signed in with the user's link: %v %v", resp, err)
	}
	// Another origin on loopback, with a real session's cookie of the
	// user's own: the cookie goes with a same-site request, the Origin
	// gives it away.
	jar := filepath.Join(e.mkdir("jar", 0o700), "cookies")
	e.asIdentity(nil, "curl", "-s", "-o", "/dev/null", "-c", jar, e.pageLink(socket, token))
	r := e.asIdentity(nil, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-b", jar, "-H", "Origin: http://127.0.0.1:1",
		"-H", "Sec-Fetch-Site: same-site", "--data-urlencode", "id="+id, "--data-urlencode", "action=allow", "http://"+addr+"/answer")
	if r.stdout != "403" {
		t.Fatalf("a cross-origin POST with the user's cookie: %q", r.stdout)
	}
	r = e.asIdentity(nil, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-b", jar, "http://"+addr+"/")
	if r.stdout != "200" {
		t.Fatalf("the user's own signed-in program was refused (the test proves nothing): %q", r.stdout)
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Host = "attacker.example"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("a foreign Host: %v %v", resp, err)
	}
	waitCard(ctx)
	click(t, ctx, "button.deny")
	if rep := reportOf(t, lines); lastBoundary(rep) != "deny page" {
		t.Fatalf("the question did not stay open for the person: %s", lastBoundary(rep))
	}
}

// reportAndEvents is reportOf, with the exec's events as JSON text.
func reportAndEvents(t *testing.T, lines <-chan map[string]any) (map[string]any, string) {
	t.Helper()
	var events strings.Builder
	seen := make(chan map[string]any, 64)
	go func() {
		defer close(seen)
		for l := range lines {
			if l["type"] == "event" {
				b, _ := json.Marshal(l["event"])
				events.Write(append(b, '\n'))
			}
			seen <- l
			if l["type"] == "report" {
				return
			}
		}
	}()
	rep := reportOf(t, seen)
	return rep, events.String()
}

// testIntents: on the Intents tab a scope as typed is shown back in its
// normal form with what it could allow, and only that is issued; the
// session's command then writes the file with no question (source
// intent); revoked on the page, the next write is asked again.
func testIntents(t *testing.T, ctx context.Context, e *env, socket, token, addr, out string) {
	target := filepath.Join(out, "intent.txt")
	exec1 := func() <-chan map[string]any {
		return e.execStream(socket, token, map[string]any{"argv": []string{"bash", "-c", "echo written > '" + target + "'"},
			"retries": 2, "session": "page-intent"})
	}
	// The daemon learns the session from a run in it (denied: no one answers).
	exec1()
	deadline := time.Now().Add(60 * time.Second)
	do(t, ctx, chromedp.Navigate("http://"+addr+"/"))
	for !strings.Contains(text(t, ctx), "Approve once") && time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		do(t, ctx, chromedp.Navigate("http://"+addr+"/"))
	}
	click(t, ctx, "button.deny")
	do(t, ctx, chromedp.Navigate("http://"+addr+"/intents"), chromedp.WaitVisible(chromedp.CSS("input[name=scope]")),
		chromedp.SetValue(chromedp.CSS("input[name=session]"), "page-intent"),
		chromedp.SetValue(chromedp.CSS("input[name=scope]"), "fs make_reg "+target))
	click(t, ctx, "form.card button")
	if s := text(t, ctx); !strings.Contains(s, "Approve exactly this") || !strings.Contains(s, "fs make_reg "+target) {
		t.Fatalf("the scope was not shown back for approval: %s", s)
	}
	shot(t, ctx, "approvals-intent.png")
	click(t, ctx, "button.allow")
	if s := text(t, ctx); !strings.Contains(s, "page-intent") || !strings.Contains(s, "Revoke") {
		t.Fatalf("the intent is not listed: %s", s)
	}
	os.Remove(target)
	rep := reportOf(t, exec1())
	if b, err := os.ReadFile(target); err != nil || string(b) != "written\n" || lastBoundary(rep) != "allow intent" {
		t.Fatalf("the intent did not allow its file: %v, %s", err, lastBoundary(rep))
	}
	click(t, ctx, "form[action='/intents/revoke'] button")
	if s := text(t, ctx); strings.Contains(s, "Revoke") {
		t.Fatalf("the intent is still listed after its revocation: %s", s)
	}
	os.Remove(target)
	lines := exec1()
	do(t, ctx, chromedp.Navigate("http://"+addr+"/"))
	for !strings.Contains(text(t, ctx), "Approve once") && time.Now().Before(deadline.Add(60*time.Second)) {
		time.Sleep(300 * time.Millisecond)
		do(t, ctx, chromedp.Navigate("http://"+addr+"/"))
	}
	click(t, ctx, "button.deny")
	if rep := reportOf(t, lines); lastBoundary(rep) != "deny page" {
		t.Fatalf("after the revocation the write was not asked again: %s", lastBoundary(rep))
	}
}
