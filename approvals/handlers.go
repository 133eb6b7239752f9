package approvals

import (
	"errors"
	"net/http"
	"slices"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/daemon"
)

// maxForm bounds a form's body.
const maxForm = 64 << 10

// csp is every answer's Content-Security-Policy: nothing but the page's
// own style sheet and forms to itself; no script, no frame, no base.
const csp = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Handler serves the page.
func (p *Page) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", p.login)
	mux.HandleFunc("GET /{$}", p.authed(p.pending))
	mux.HandleFunc("GET /history", p.authed(p.history))
	mux.HandleFunc("POST /answer", p.authed(p.answer))
	mux.HandleFunc("POST /logout", p.authed(p.logout))
	mux.HandleFunc("GET /style.css", style)
	if p.cfg.Intents != nil {
		mux.HandleFunc("GET /intents", p.authed(p.intents))
		mux.HandleFunc("POST /intents/create", p.authed(p.createIntent))
		mux.HandleFunc("POST /intents/revoke", p.authed(p.revokeIntent))
	}
	return p.guard(mux)
}

// guard sets the security headers of every answer and refuses a
// request for another Host, or a POST from another origin.
func (p *Page) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if !slices.Contains(p.hosts, r.Host) {
			// Another name pointed at loopback (DNS rebinding) reaches
			// nothing.
			plain(w, http.StatusMisdirectedRequest, "This page answers only at its own address, "+p.cfg.Addr+".")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
			plain(w, http.StatusForbidden, "A request from another origin is refused.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		next.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether a state-changing request comes from the
// page itself: its Origin is exactly the page's (a page on another port
// of loopback is same-site, and SameSite cookies reach us from it, but
// it is another origin), and Sec-Fetch-Site, when sent, says so too. A
// request without Origin is refused: every browser sends one with a
// POST. Under the page's Referrer-Policy no-referrer a browser sends
// "Origin: null" even for its own forms (the Fetch standard); that is
// taken only with Sec-Fetch-Site "same-origin", a header no page can set.
func sameOrigin(r *http.Request) bool {
	s := r.Header.Get("Sec-Fetch-Site")
	switch r.Header.Get("Origin") {
	case "http://" + r.Host:
		return s == "" || s == "same-origin"
	case "null":
		return s == "same-origin"
	}
	return false
}

// authed hands h the request's session; without one it answers 401, and
// a POST without the session's CSRF token 403.
func (p *Page) authed(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := p.sessionOf(r)
		if s == nil {
			p.render(w, http.StatusUnauthorized, view{Tab: "signin"})
			return
		}
		if uid, err := p.cfg.PeerUID(r); err != nil || uid != s.uid {
			// The cookie came from another user's program (browsers send
			// it to every port of loopback), or from nowhere known.
			plain(w, http.StatusForbidden, "This page is signed in for another user than the one whose browser asks.")
			return
		}
		if r.Method == http.MethodPost && !csrfOK(s, r) {
			plain(w, http.StatusForbidden, "The form's token is not this session's: reload the page and try again.")
			return
		}
		h(w, r, s)
	}
}

// login spends a one-time link for a session cookie and redirects to
// the page's clean address, so the code stays in no address bar.
func (p *Page) login(w http.ResponseWriter, r *http.Request) {
	if s := r.Header.Get("Sec-Fetch-Site"); s == "cross-site" || s == "same-site" {
		// Opened from the terminal, a link's fetch site is "none": a site
		// that navigates here is signing the browser in as someone else.
		plain(w, http.StatusForbidden, "A sign-in link opened by another site is refused.")
		return
	}
	peer, err := p.cfg.PeerUID(r)
	if err != nil {
		peer = -1 // spends the link, signs nobody in
	}
	cookie, ok := p.exchange(r.URL.Query().Get("code"), peer)
	if !ok {
		p.render(w, http.StatusForbidden, view{Tab: "signin", Message: "This link was used already, has expired, or is another user's. Run `sandboxd approve --page` at your terminal for a new one."})
		return
	}
	// Secure cannot be set: the page is plain http on loopback, and a
	// browser drops a Secure cookie set over http. HttpOnly keeps it from
	// script, SameSite=Strict from other sites' requests, and the Origin
	// check and CSRF token from other origins on the same site.
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: cookie, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout ends the session.
func (p *Page) logout(w http.ResponseWriter, r *http.Request, s *session) {
	p.end(r)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	p.render(w, http.StatusOK, view{Tab: "signin", Message: "You are signed out."})
}

// pending shows the session's uid's open questions.
func (p *Page) pending(w http.ResponseWriter, r *http.Request, s *session) {
	p.renderPending(w, http.StatusOK, s, "")
}

// renderPending renders the pending tab with message.
func (p *Page) renderPending(w http.ResponseWriter, status int, s *session, message string) {
	qs := p.cfg.Queue.Pending(s.uid)
	cards := make([]card, 0, len(qs))
	for _, q := range qs {
		cards = append(cards, cardOf(q, p.cfg.Queue.BreakGlass(s.uid, q.ID)))
	}
	p.render(w, status, view{Tab: "pending", CSRF: s.csrf, Cards: cards, Message: message})
}

// history shows the session's uid's closed questions.
func (p *Page) history(w http.ResponseWriter, r *http.Request, s *session) {
	var rows []row
	for _, c := range p.cfg.Queue.History(s.uid) {
		rows = append(rows, rowOf(c))
	}
	p.render(w, http.StatusOK, view{Tab: "history", CSRF: s.csrf, Rows: rows})
}

// answer takes the person's answer to one question: approve once, deny
// (with a note or none), or redirect (a deny whose note is an
// instruction for the agent).
func (p *Page) answer(w http.ResponseWriter, r *http.Request, s *session) {
	note := r.PostFormValue("note")
	a := daemon.Answer{Source: broker.SourcePage, Note: note}
	switch r.PostFormValue("action") {
	case "allow":
		a.Allow = true
	case "deny":
	case "redirect":
		if note == "" {
			p.renderPending(w, http.StatusBadRequest, s, "A redirect needs the instruction for the agent, in the note.")
			return
		}
		a.Redirect = true
	default:
		p.renderPending(w, http.StatusBadRequest, s, "Choose approve once, deny or redirect.")
		return
	}
	if err := daemon.CheckNote(note); err != nil {
		p.renderPending(w, http.StatusBadRequest, s, "The note was not taken: "+err.Error()+".")
		return
	}
	err := p.cfg.Queue.AnswerPhrase(s.uid, r.PostFormValue("id"), a, r.PostFormValue("phrase"))
	switch {
	case errors.Is(err, daemon.ErrNoQuestion):
		p.renderPending(w, http.StatusNotFound, s, "You have no question with this id.")
	case errors.Is(err, daemon.ErrAnswered):
		p.renderPending(w, http.StatusConflict, s, "This question was answered already (the first answer wins, from this page, a terminal or a client), or withdrawn: it expired, or its run ended.")
	case errors.Is(err, daemon.ErrPhrase):
		p.renderPending(w, http.StatusForbidden, s, "The break-glass phrase typed is not the one shown on the card, so nothing was allowed; the question stays open.")
	case err != nil:
		p.renderPending(w, http.StatusInternalServerError, s, "The answer could not be taken.")
	default:
		http.Redirect(w, r, "/", http.StatusSeeOther)
	}
}

// intents shows the session's uid's intent grants.
func (p *Page) intents(w http.ResponseWriter, r *http.Request, s *session) {
	p.render(w, http.StatusOK, view{Tab: "intents", CSRF: s.csrf, Intents: p.cfg.Intents.List(s.uid), IntentsOn: true})
}

// createIntent approves a scoped intent for a session in two steps: the
// scope as typed is shown back in its normal form with what it could
// allow; only that text, by its hash, is then issued.
func (p *Page) createIntent(w http.ResponseWriter, r *http.Request, s *session) {
	fail := func(err error) {
		p.render(w, http.StatusBadRequest, view{Tab: "intents", CSRF: s.csrf, Intents: p.cfg.Intents.List(s.uid), IntentsOn: true, Message: err.Error()})
	}
	session := r.PostFormValue("session")
	if r.PostFormValue("hash") == "" {
		pv, err := p.cfg.Intents.Preview(s.uid, r.PostFormValue("scope"))
		if err != nil {
			fail(err)
			return
		}
		p.render(w, http.StatusOK, view{Tab: "intents", CSRF: s.csrf, Intents: p.cfg.Intents.List(s.uid), IntentsOn: true,
			Confirm: &confirm{Session: session, IntentPreview: pv}})
		return
	}
	if _, err := p.cfg.Intents.Create(s.uid, session, r.PostFormValue("shown"), r.PostFormValue("hash")); err != nil {
		fail(err)
		return
	}
	http.Redirect(w, r, "/intents", http.StatusSeeOther)
}

// revokeIntent revokes one of the uid's intent grants.
func (p *Page) revokeIntent(w http.ResponseWriter, r *http.Request, s *session) {
	if err := p.cfg.Intents.Revoke(s.uid, r.PostFormValue("session"), r.PostFormValue("id")); err != nil {
		p.render(w, http.StatusBadRequest, view{Tab: "intents", CSRF: s.csrf, Intents: p.cfg.Intents.List(s.uid), IntentsOn: true, Message: err.Error()})
		return
	}
	http.Redirect(w, r, "/intents", http.StatusSeeOther)
}

// plain answers a refusal as plain text.
func plain(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	w.Write([]byte(msg + "\n"))
}
