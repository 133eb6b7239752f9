package approvals

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/daemon"
)

// Defaults of Config.
const (
	// DefaultLinkTTL: a link is for the person who just asked for it.
	DefaultLinkTTL = 2 * time.Minute
	// DefaultIdleTTL: a session unused this long ends.
	DefaultIdleTTL = 12 * time.Hour
	// maxLinks bounds the unused links of one uid.
	maxLinks = 8
	// maxSessions bounds the sessions of one uid.
	maxSessions = 16
)

// cookieName is the session cookie's.
const cookieName = "sandboxd_approvals"

// Queue is the daemon's question queue as the page uses it.
type Queue interface {
	Pending(uid int) []daemon.Question
	History(uid int) []daemon.Closed
	BreakGlass(uid int, id string) string
	AnswerPhrase(uid int, id string, a daemon.Answer, phrase string) error
}

// Intent is a session intent grant as the page shows it.
type Intent struct {
	ID        string
	Session   string
	Scope     string
	ExpiresAt time.Time
}

// Intents is the session intent grants the page lists, previews,
// creates and revokes for a uid; nil in Config: the page offers none.
// An intent is issued only for the scope's normal form the person was
// shown (Preview's Text and Hash), never for text as typed. Errors it
// returns are shown as they are: they must be sentences safe to show.
type Intents interface {
	List(uid int) []Intent
	Preview(uid int, scope string) (IntentPreview, error)
	Create(uid int, session, shown, hash string) (Intent, error)
	Revoke(uid int, session, id string) error
}

// IntentPreview is a scope as the person approves it: its normal form,
// that form's hash, and what it could allow.
type IntentPreview struct {
	Text, Hash string
	Allows     []string
}

// Config is what a Page is built from.
type Config struct {
	// Addr is the loopback host:port the page listens on: its links
	// name it, and a request for any other Host is refused.
	Addr  string
	Queue Queue
	// Intents: nil, none are offered.
	Intents Intents
	// PeerUID says which uid owns the browser's end of a request's
	// connection (nil: LoopbackPeerUID, the kernel's socket tables).
	// Only the session's own user's browser is served: browsers send a
	// loopback page's cookie to every port of loopback, so another user's
	// program on another port could otherwise receive it and use it.
	PeerUID func(r *http.Request) (int, error)
	// LinkTTL and IdleTTL: 0, the defaults.
	LinkTTL, IdleTTL time.Duration
	Now              func() time.Time
	Log              *slog.Logger
}

// Page is the approvals page. It is safe for concurrent use.
type Page struct {
	cfg   Config
	hosts []string
	tmpl  *template.Template
	// mu guards links and sessions.
	mu sync.Mutex
	// links are the unused one-time links by code.
	links map[string]link
	// sessions are the live sessions by cookie value.
	sessions map[string]*session
}

// link is a one-time link's owner and expiry.
type link struct {
	uid int
	exp time.Time
}

// session is a browser's session: its uid, its CSRF token, when it was
// last used.
type session struct {
	uid  int
	csrf string
	last time.Time
}

// New returns the page for cfg, whose Addr must be a loopback address
// and port.
func New(cfg Config) (*Page, error) {
	host, port, err := net.SplitHostPort(cfg.Addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() || port == "" || port == "0" {
		return nil, errors.New("approvals: the address must be a loopback address and a port")
	}
	if cfg.LinkTTL <= 0 {
		cfg.LinkTTL = DefaultLinkTTL
	}
	if cfg.IdleTTL <= 0 {
		cfg.IdleTTL = DefaultIdleTTL
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PeerUID == nil {
		cfg.PeerUID = LoopbackPeerUID
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	// The names a browser on this machine reaches the page by; any other
	// Host is a name some other party points at loopback (rebinding).
	hosts := []string{cfg.Addr, net.JoinHostPort("localhost", port)}
	if ip := net.ParseIP(host); ip.To4() != nil {
		hosts = append(hosts, net.JoinHostPort("127.0.0.1", port))
	}
	return &Page{cfg: cfg, hosts: hosts, tmpl: parsePage(), links: map[string]link{}, sessions: map[string]*session{}}, nil
}

// secret is 256 random bits, hex.
func secret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// Link issues a one-time link for uid (daemon.Page).
func (p *Page) Link(uid int) (string, time.Time, error) {
	code, err := secret()
	if err != nil {
		return "", time.Time{}, err
	}
	now := p.cfg.Now()
	exp := now.Add(p.cfg.LinkTTL)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pruneLocked(now)
	n := 0
	for _, l := range p.links {
		if l.uid == uid {
			n++
		}
	}
	if n >= maxLinks {
		return "", time.Time{}, errors.New("approvals: too many unused links")
	}
	p.links[code] = link{uid: uid, exp: exp}
	return "http://" + p.cfg.Addr + "/login?code=" + code, exp, nil
}

// Live reports whether uid has a live session (daemon.Page).
func (p *Page) Live(uid int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pruneLocked(p.cfg.Now())
	for _, s := range p.sessions {
		if s.uid == uid {
			return true
		}
	}
	return false
}

// pruneLocked forgets expired links and idle sessions.
func (p *Page) pruneLocked(now time.Time) {
	for c, l := range p.links {
		if !now.Before(l.exp) {
			delete(p.links, c)
		}
	}
	for c, s := range p.sessions {
		if now.Sub(s.last) >= p.cfg.IdleTTL {
			delete(p.sessions, c)
		}
	}
}

// exchange spends code, once, for a new session of the browser's user
// peer: its cookie value. A link of another uid's is spent and refused.
func (p *Page) exchange(code string, peer int) (string, bool) {
	cookie, err := secret()
	csrf, err2 := secret()
	if err != nil || err2 != nil {
		return "", false
	}
	now := p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	l, ok := p.links[code]
	delete(p.links, code) // used once, valid or not
	if !ok || !now.Before(l.exp) || l.uid != peer {
		return "", false
	}
	p.pruneLocked(now)
	n := 0
	for c, s := range p.sessions {
		if s.uid == l.uid {
			if n++; n >= maxSessions {
				delete(p.sessions, c)
			}
		}
	}
	p.sessions[cookie] = &session{uid: l.uid, csrf: csrf, last: now}
	return cookie, true
}

// sessionOf is r's live session (touched), or nil.
func (p *Page) sessionOf(r *http.Request) *session {
	c, err := r.Cookie(cookieName)
	if err != nil || len(c.Value) != 64 {
		return nil
	}
	now := p.cfg.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pruneLocked(now)
	s, ok := p.sessions[c.Value]
	if !ok {
		return nil
	}
	s.last = now
	cp := *s
	return &cp
}

// end ends r's session.
func (p *Page) end(r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		p.mu.Lock()
		delete(p.sessions, c.Value)
		p.mu.Unlock()
	}
}

// csrfOK reports whether the form's token is the session's.
func csrfOK(s *session, r *http.Request) bool {
	return subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) == 1
}
