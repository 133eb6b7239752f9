package approvals

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/daemon"
)

const addr = "127.0.0.1:8765"

// clock is a settable time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// fixture is a page over a real queue.
type fixture struct {
	t   *testing.T
	qs  *daemon.Questions
	pg  *Page
	h   http.Handler
	clk *clock
	// peer, when not negative, is the uid of every request's browser.
	peer int
}

func newFixture(t *testing.T) *fixture {
	clk := &clock{t: time.Now()}
	qs := daemon.NewQuestions(time.Minute, 8)
	pg, err := New(Config{Addr: addr, Queue: qs, Now: clk.now, PeerUID: func(r *http.Request) (int, error) {
		return strconv.Atoi(r.Header.Get(peerHeader))
	}})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, qs: qs, pg: pg, h: pg.Handler(), clk: clk, peer: -1}
}

// peerHeader carries, in a test, the uid whose browser sends a request
// (the page asks the kernel's socket tables for it).
const peerHeader = "X-Test-Peer-Uid"

// browserUID is the uid whose browser sends a request: f.peer when set
// (another user's program), else the user the request's cookie or
// link is for.
func (f *fixture) browserUID(target, cookie string) int {
	if f.peer >= 0 {
		return f.peer
	}
	f.pg.mu.Lock()
	defer f.pg.mu.Unlock()
	if s, ok := f.pg.sessions[cookie]; ok {
		return s.uid
	}
	if u, err := url.Parse(target); err == nil {
		if l, ok := f.pg.links[u.Query().Get("code")]; ok {
			return l.uid
		}
	}
	return 0
}

// do serves one request: host, origin and cookie as given.
func (f *fixture) do(method, target, host, origin, cookie string, form url.Values) *httptest.ResponseRecorder {
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	r := httptest.NewRequest(method, target, body)
	r.Host = host
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	if cookie != "" {
		r.AddCookie(&http.Cookie{Name: cookieName, Value: cookie})
	}
	r.Header.Set(peerHeader, strconv.Itoa(f.browserUID(target, cookie)))
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

// signIn issues uid a link and spends it: the session cookie and its
// CSRF token.
func (f *fixture) signIn(uid int) (cookie, csrf string) {
	f.t.Helper()
	link, _, err := f.pg.Link(uid)
	if err != nil {
		f.t.Fatal(err)
	}
	u, _ := url.Parse(link)
	w := f.do("GET", u.RequestURI(), addr, "", "", nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/" {
		f.t.Fatalf("the link: %d %q", w.Code, w.Header().Get("Location"))
	}
	sc := w.Header().Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(sc, want) {
			f.t.Fatalf("the cookie %q lacks %s", sc, want)
		}
	}
	cookie = strings.TrimPrefix(strings.SplitN(sc, ";", 2)[0], cookieName+"=")
	f.pg.mu.Lock()
	csrf = f.pg.sessions[cookie].csrf
	f.pg.mu.Unlock()
	return cookie, csrf
}

// ask puts q in uid's queue and waits for its answer in the background.
func (f *fixture) ask(uid int, q daemon.Question) (string, <-chan daemon.Answer) {
	tk, err := f.qs.Ask(uid, q)
	if err != nil {
		f.t.Fatal(err)
	}
	got := make(chan daemon.Answer, 1)
	ctx, cancel := context.WithCancel(context.Background())
	f.t.Cleanup(cancel)
	go func() {
		a, _, _ := tk.Wait(ctx)
		got <- a
	}()
	return tk.Question().ID, got
}

// The one-time link signs the browser in once, to a clean address; a
// spent, unknown or expired link does not; a session ends when idle and
// at sign-out; without a session nothing is shown.
func TestSignIn(t *testing.T) {
	f := newFixture(t)
	link, exp, err := f.pg.Link(1000)
	if err != nil || !strings.HasPrefix(link, "http://"+addr+"/login?code=") || exp.Sub(f.clk.t) != DefaultLinkTTL {
		t.Fatalf("the link: %q %v %v", link, exp, err)
	}
	u, _ := url.Parse(link)
	if w := f.do("GET", u.RequestURI(), addr, "", "", nil); w.Code != http.StatusSeeOther {
		t.Fatalf("first use: %d", w.Code)
	}
	if w := f.do("GET", u.RequestURI(), addr, "", "", nil); w.Code != http.StatusForbidden || w.Header().Get("Set-Cookie") != "" {
		t.Fatalf("second use: %d %q", w.Code, w.Header().Get("Set-Cookie"))
	}
	if w := f.do("GET", "/login?code="+strings.Repeat("a", 64), addr, "", "", nil); w.Code != http.StatusForbidden {
		t.Fatalf("an unknown code: %d", w.Code)
	}
	stale, _, _ := f.pg.Link(1000)
	f.clk.t = f.clk.t.Add(DefaultLinkTTL)
	u, _ = url.Parse(stale)
	if w := f.do("GET", u.RequestURI(), addr, "", "", nil); w.Code != http.StatusForbidden {
		t.Fatalf("an expired link: %d", w.Code)
	}
	if w := f.do("GET", "/", addr, "", "", nil); w.Code != http.StatusUnauthorized || strings.Contains(w.Body.String(), "Approve once") {
		t.Fatalf("no session: %d", w.Code)
	}
	cookie, csrf := f.signIn(1000)
	if !f.pg.Live(1000) || f.pg.Live(1001) {
		t.Fatal("Live does not name the signed-in uid only")
	}
	if w := f.do("GET", "/", addr, "", cookie, nil); w.Code != http.StatusOK {
		t.Fatalf("the session: %d", w.Code)
	}
	f.clk.t = f.clk.t.Add(DefaultIdleTTL)
	if w := f.do("GET", "/", addr, "", cookie, nil); w.Code != http.StatusUnauthorized || f.pg.Live(1000) {
		t.Fatalf("an idle session: %d", w.Code)
	}
	cookie, csrf = f.signIn(1000)
	if w := f.do("POST", "/logout", addr, "http://"+addr, cookie, url.Values{"csrf": {csrf}}); w.Code != http.StatusOK {
		t.Fatalf("sign-out: %d", w.Code)
	}
	if w := f.do("GET", "/", addr, "", cookie, nil); w.Code != http.StatusUnauthorized {
		t.Fatalf("after sign-out: %d", w.Code)
	}
}

// Every answer carries the security headers; a foreign Host, a POST from
// another origin (another port of loopback too) or without the
// session's token is refused, and the question stays open.
func TestRequestChecks(t *testing.T) {
	f := newFixture(t)
	cookie, csrf := f.signIn(1000)
	id, _ := f.ask(1000, daemon.Question{Surface: "filesystem", Operation: "write_file", Path: "/w/x"})
	w := f.do("GET", "/", addr, "", cookie, nil)
	for k, v := range map[string]string{
		"Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
		"X-Content-Type-Options":  "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
	} {
		if got := w.Header().Get(k); got != v {
			t.Errorf("%s: %q", k, got)
		}
	}
	for _, host := range []string{"localhost:8765", "127.0.0.1:8765"} {
		if w := f.do("GET", "/", host, "", cookie, nil); w.Code != http.StatusOK {
			t.Errorf("host %s: %d", host, w.Code)
		}
	}
	for _, host := range []string{"evil.example:8765", "127.0.0.1:9999", "localhost", ""} {
		if w := f.do("GET", "/", host, "", cookie, nil); w.Code != http.StatusMisdirectedRequest || w.Header().Get("Content-Security-Policy") == "" {
			t.Errorf("host %q: %d", host, w.Code)
		}
	}
	allow := url.Values{"csrf": {csrf}, "id": {id}, "action": {"allow"}}
	for _, origin := range []string{"", "http://evil.example", "http://127.0.0.1:3000", "null"} {
		if w := f.do("POST", "/answer", addr, origin, cookie, allow); w.Code != http.StatusForbidden {
			t.Errorf("origin %q: %d", origin, w.Code)
		}
	}
	r := httptest.NewRequest("POST", "/answer", strings.NewReader(allow.Encode()))
	r.Host = addr
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("Origin", "http://"+addr)
	r.Header.Set("Sec-Fetch-Site", "cross-site")
	r.AddCookie(&http.Cookie{Name: cookieName, Value: cookie})
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, r)
	if rec.Code != http.StatusForbidden {
		t.Errorf("Sec-Fetch-Site cross-site: %d", rec.Code)
	}
	for _, site := range []string{"same-site", "cross-site", "none", ""} {
		r := httptest.NewRequest("POST", "/answer", strings.NewReader(allow.Encode()))
		r.Host = addr
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "null")
		if site != "" {
			r.Header.Set("Sec-Fetch-Site", site)
		}
		r.AddCookie(&http.Cookie{Name: cookieName, Value: cookie})
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, r)
		if rec.Code != http.StatusForbidden {
			t.Errorf("Origin null, Sec-Fetch-Site %q: %d", site, rec.Code)
		}
	}
	if w := f.do("POST", "/answer", addr, "http://"+addr, cookie, url.Values{"csrf": {"x"}, "id": {id}, "action": {"allow"}}); w.Code != http.StatusForbidden {
		t.Errorf("a wrong token: %d", w.Code)
	}
	if len(f.qs.Pending(1000)) != 1 {
		t.Fatal("a refused request answered the question")
	}
}

// A uid sees and answers only its own questions; an answer on the page
// is source page; the first answer wins and a second is refused with a
// sentence; a critical question needs its phrase; a redirect needs its
// instruction and reaches the asker as one.
func TestAnswers(t *testing.T) {
	f := newFixture(t)
	cookie, csrf := f.signIn(1000)
	other, otherCSRF := f.signIn(1001)
	id, got := f.ask(1000, daemon.Question{Surface: "filesystem", Operation: "write_file", Path: "/w/mine", Command: "touch /w/mine"})
	post := func(cookie string, v url.Values) *httptest.ResponseRecorder {
		return f.do("POST", "/answer", addr, "http://"+addr, cookie, v)
	}
	if w := f.do("GET", "/", addr, "", other, nil); strings.Contains(w.Body.String(), id) || strings.Contains(w.Body.String(), "/w/mine") {
		t.Fatal("another uid sees the question")
	}
	if w := post(other, url.Values{"csrf": {otherCSRF}, "id": {id}, "action": {"allow"}}); w.Code != http.StatusNotFound {
		t.Fatalf("another uid's answer: %d", w.Code)
	}
	if w := f.do("GET", "/", addr, "", cookie, nil); !strings.Contains(w.Body.String(), id) || !strings.Contains(w.Body.String(), "touch /w/mine") {
		t.Fatal("the uid does not see its question")
	}
	if w := post(cookie, url.Values{"csrf": {csrf}, "id": {id}, "action": {"allow"}}); w.Code != http.StatusSeeOther {
		t.Fatalf("the answer: %d %s", w.Code, w.Body)
	}
	if a := <-got; !a.Allow || a.Source != broker.SourcePage {
		t.Fatalf("the asker got %+v", a)
	}
	w := post(cookie, url.Values{"csrf": {csrf}, "id": {id}, "action": {"deny"}})
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "answered already") {
		t.Fatalf("a second answer: %d", w.Code)
	}
	if w := f.do("GET", "/history", addr, "", cookie, nil); !strings.Contains(w.Body.String(), "allowed once") || !strings.Contains(w.Body.String(), "this page") {
		t.Fatalf("the history: %s", w.Body)
	}
	if w := f.do("GET", "/history", addr, "", other, nil); strings.Contains(w.Body.String(), "/w/mine") {
		t.Fatal("another uid's history shows it")
	}

	crit, got := f.ask(1000, daemon.Question{Surface: "filesystem", Operation: "write_file", Path: "/w/crit", Critical: true})
	code := f.qs.BreakGlass(1000, crit)
	if w := f.do("GET", "/", addr, "", cookie, nil); !strings.Contains(w.Body.String(), "BREAK-GLASS "+code) {
		t.Fatal("the card does not show the phrase")
	}
	if w := post(cookie, url.Values{"csrf": {csrf}, "id": {crit}, "action": {"allow"}, "phrase": {"yes"}}); w.Code != http.StatusForbidden {
		t.Fatalf("a wrong phrase: %d", w.Code)
	}
	if w := post(cookie, url.Values{"csrf": {csrf}, "id": {crit}, "action": {"redirect"}}); w.Code != http.StatusBadRequest {
		t.Fatalf("a redirect without instruction: %d", w.Code)
	}
	if w := post(cookie, url.Values{"csrf": {csrf}, "id": {crit}, "action": {"redirect"}, "note": {"use ./out instead"}}); w.Code != http.StatusSeeOther {
		t.Fatalf("a redirect: %d", w.Code)
	}
	if a := <-got; a.Allow || !a.Redirect || a.Note != "use ./out instead" {
		t.Fatalf("the asker got %+v", a)
	}
}

// Every text from a command, a path or a reviewer is escaped: markup
// shows as text, and terminal escapes and bidirectional overrides as
// visible escapes.
func TestEscaping(t *testing.T) {
	f := newFixture(t)
	cookie, _ := f.signIn(1000)
	evil := "/w/<script>alert(1)</script>\x1b[2J\u202e<b>x"
	f.ask(1000, daemon.Question{Surface: "filesystem", Operation: "write_file", Path: evil, Command: "echo '<img src=x onerror=alert(1)>' \x1b]0;t\x07",
		Cwd: "/w/\"><script>", Model: &broker.Decision{RiskLevel: broker.RiskMedium, Rationale: "<script>r()</script>\x1b[31m"}})
	body := f.do("GET", "/", addr, "", cookie, nil).Body.String()
	for _, bad := range []string{"<script>", "<img", "<b>x", "\x1b", "\u202e", "\x07"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page holds %q raw", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", `\x1b[2J`, `\u202e`, `\x07`, "&lt;img src=x", `&lt;script&gt;r()&lt;/script&gt;\x1b[31m`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

// Only a loopback address and port makes a page.
func TestNewAddr(t *testing.T) {
	for _, a := range []string{"0.0.0.0:80", "192.168.1.1:80", "example.com:80", "127.0.0.1", "127.0.0.1:0", "[::]:80"} {
		if _, err := New(Config{Addr: a}); err == nil {
			t.Errorf("%s was taken", a)
		}
	}
	if _, err := New(Config{Addr: "[::1]:8080"}); err != nil {
		t.Error(err)
	}
}

// Another user's program on loopback that got the cookie (browsers send
// it to every port of loopback), or a link, is refused: only the
// session's own user's browser is served.
func TestAnotherUsersBrowser(t *testing.T) {
	f := newFixture(t)
	cookie, _ := f.signIn(1000)
	f.peer = 1001
	if w := f.do("GET", "/", addr, "", cookie, nil); w.Code != http.StatusForbidden || strings.Contains(w.Body.String(), "Approve once") {
		t.Fatalf("another user's program with the cookie: %d", w.Code)
	}
	link, _, _ := f.pg.Link(1000)
	u, _ := url.Parse(link)
	if w := f.do("GET", u.RequestURI(), addr, "", "", nil); w.Code != http.StatusForbidden || w.Header().Get("Set-Cookie") != "" {
		t.Fatalf("another user's browser spent the link: %d", w.Code)
	}
	f.peer = 1000
	if w := f.do("GET", u.RequestURI(), addr, "", "", nil); w.Code != http.StatusForbidden {
		t.Fatalf("a link another user tried is still good: %d", w.Code)
	}
	if w := f.do("GET", "/", addr, "", cookie, nil); w.Code != http.StatusOK {
		t.Fatalf("the user's own browser: %d", w.Code)
	}
}

// fakeIntents records what the page asks of intents.
type fakeIntents struct {
	previewed, created []string
}

func (f *fakeIntents) List(uid int) []Intent { return nil }
func (f *fakeIntents) Preview(uid int, scope string) (IntentPreview, error) {
	f.previewed = append(f.previewed, scope)
	return IntentPreview{Text: "fs write_file /x/y", Hash: "abc", Allows: []string{"write <b>y</b>"}}, nil
}
func (f *fakeIntents) Create(uid int, session, shown, hash string) (Intent, error) {
	f.created = append(f.created, fmt.Sprint(uid, session, shown, hash))
	return Intent{}, nil
}
func (f *fakeIntents) Revoke(uid int, session, id string) error { return nil }

// An intent is created in two steps: the scope as typed is only shown
// back in its normal form (nothing issued); the confirmation issues that
// text by its hash, for the session's own uid.
func TestIntentTwoSteps(t *testing.T) {
	f := newFixture(t)
	fi := &fakeIntents{}
	f.pg.cfg.Intents = fi
	f.h = f.pg.Handler()
	cookie, csrf := f.signIn(1000)
	w := f.do("POST", "/intents/create", addr, "http://"+addr, cookie, url.Values{"csrf": {csrf}, "session": {"s1"}, "scope": {"fs write_file /x/./y"}})
	if w.Code != http.StatusOK || len(fi.created) != 0 || !strings.Contains(w.Body.String(), "fs write_file /x/y") ||
		!strings.Contains(w.Body.String(), `name="hash" value="abc"`) || strings.Contains(w.Body.String(), "<b>y</b>") {
		t.Fatalf("the preview: %d created %v\n%s", w.Code, fi.created, w.Body.String())
	}
	w = f.do("POST", "/intents/create", addr, "http://"+addr, cookie, url.Values{"csrf": {csrf}, "session": {"s1"}, "shown": {"fs write_file /x/y"}, "hash": {"abc"}})
	if w.Code != http.StatusSeeOther || len(fi.created) != 1 || fi.created[0] != "1000s1fs write_file /x/yabc" {
		t.Fatalf("the confirmation: %d %v", w.Code, fi.created)
	}
}
