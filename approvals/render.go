package approvals

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/daemon"
)

//go:embed page.html
var pageHTML string

//go:embed style.css
var styleCSS []byte

// view is what the page's template renders.
type view struct {
	// Tab is "signin", "pending", "history" or "intents".
	Tab       string
	CSRF      string
	Message   string
	Cards     []card
	Rows      []row
	IntentsOn bool
	Intents   []Intent
	// Confirm is an intent shown for approval: the scope's normal form.
	Confirm *confirm
}

// confirm is a scope shown in its normal form, to approve for a session.
type confirm struct {
	Session string
	IntentPreview
}

// card is one pending question as its card shows it.
type card struct {
	ID, Project, Cwd, Command, Boundary, Session, Intent string
	// Risk and Rationale are the model's, when it judged.
	Risk, Authorization, Rationale string
	Production, ProductionWhy      string
	// Grants says exactly what an allow grants.
	Grants string
	// Code is a critical question's break-glass code ("": not critical).
	Code              string
	Asked, Expires    string
	ClientCannotAllow string
}

// row is one closed question in the history.
type row struct {
	When, Boundary, Command, Cwd, Outcome, By, Note string
}

// cardOf is q's card; code is its break-glass code, if critical.
func cardOf(q daemon.Question, code string) card {
	c := card{ID: q.ID, Project: q.Workspace, Cwd: q.Cwd, Command: q.Command, Boundary: boundaryOf(q),
		Session: q.Session, Intent: q.Intent, Production: q.Production, ProductionWhy: q.ProductionWhy, Code: code,
		Asked: q.CreatedAt.Local().Format(time.TimeOnly), Expires: q.ExpiresAt.Local().Format(time.TimeOnly)}
	if c.Project == "" {
		c.Project = "(the workspace sandboxd finds from the directory)"
	}
	if m := q.Model; m != nil {
		c.Risk, c.Authorization, c.Rationale = string(m.RiskLevel), string(m.UserAuthorization), m.Rationale
	}
	c.Grants = "One exact retry of this command, in this directory and session, that may " + q.Operation + " " + target(q) + ", once; nothing else."
	if q.Held {
		c.Grants = "The connection this command holds open to " + q.Destination + " goes through, for this run only; nothing else."
	}
	return c
}

// target is a question's path or destination.
func target(q daemon.Question) string {
	if q.Destination != "" {
		return q.Destination
	}
	return q.Path
}

// boundaryOf is a question's boundary in one line.
func boundaryOf(q daemon.Question) string {
	return q.Surface + ": " + q.Operation + " " + target(q)
}

// rowOf is c's history row.
func rowOf(c daemon.Closed) row {
	r := row{When: c.At.Local().Format(time.DateTime), Boundary: boundaryOf(c.Question), Command: c.Question.Command,
		Cwd: c.Question.Cwd, Note: c.Note, By: byOf(c.Source)}
	switch {
	case !c.Answered:
		r.Outcome, r.By = "no answer: "+c.Why, "nobody"
	case c.Allow:
		r.Outcome = "allowed once"
	case c.Redirect:
		r.Outcome = "redirected"
	default:
		r.Outcome = "denied"
	}
	return r
}

// byOf names the front end an answer came from.
func byOf(s broker.Source) string {
	switch s {
	case broker.SourcePage:
		return "this page"
	case broker.SourceHuman:
		return "the terminal"
	case broker.SourceClient:
		return "a client of the daemon"
	}
	return string(s)
}

// visible shows s's control and invisible characters (terminal escapes,
// bidirectional overrides) as escapes, so the page shows exactly what a
// command holds; html/template escapes the rest.
func visible(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == ' ' || unicode.IsPrint(r):
			b.WriteRune(r)
		case r == unicode.ReplacementChar:
			b.WriteString(`\ufffd`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// page is the parsed template (parsed on each Page, never a global).
func parsePage() *template.Template {
	return template.Must(template.New("page").Funcs(template.FuncMap{"visible": visible}).Parse(pageHTML))
}

// render answers v as the page, with status.
func (p *Page) render(w http.ResponseWriter, status int, v view) {
	if p.cfg.Intents != nil {
		v.IntentsOn = true
	}
	var b bytes.Buffer
	if err := p.tmpl.Execute(&b, v); err != nil {
		p.cfg.Log.Error("approvals page: render", "err", err)
		plain(w, http.StatusInternalServerError, "The page could not be rendered.")
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// style serves the page's style sheet.
func style(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Write(styleCSS)
}
