package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/session"
)

// person is an exec's person slot, backed by the daemon's question
// queue: each question is in the queue (where an API client's answer
// comes from), sent on the exec's stream when the client relays
// questions, and asked on the terminal the client passed, if any. The
// first answer wins; the others are withdrawn. The command's output
// lines are held while a question is open.
type person struct {
	qs  *Questions
	uid int
	out *lineWriter
	// relay: the client said it relays questions (ExecRequest.Questions).
	relay bool
	// tty is the person's terminal (nil: none was passed, or it was not
	// the client's controlling terminal).
	tty *review.Human
	// observe hears each answer (the daemon's metrics).
	observe Observer
	// workspace is the project the exec named, shown with each question;
	// findWorkspace finds the one its run takes when it named none (only
	// once a question is asked: it walks the caller's directories).
	workspace     string
	findWorkspace func() string
	// page is the approvals page (nil: it is off).
	page Page
}

// Reachable reports whether anyone can answer: a client that relays, a
// terminal, or the caller's live session on the approvals page (the
// person opened it with a link only their terminal was shown, and has
// used it within its idle time).
func (p *person) Reachable() (bool, string) {
	if p.relay || p.tty != nil || (p.page != nil && p.page.Live(p.uid)) {
		return true, ""
	}
	return false, "nobody can be asked: the client relays no questions and passed no terminal, and you have no live session on the approvals page"
}

// TakesDenials: a client that relays questions, or the person's live
// session on the approvals page, is asked about the model's denials too
// (the person answers what the model could not allow: the page is where
// they said they would); a terminal alone is asked as an embedded run's
// is.
func (p *person) TakesDenials() bool {
	return p.relay || (p.page != nil && p.page.Live(p.uid))
}

// Review puts req in the queue and waits for the first answer.
func (p *person) Review(ctx context.Context, req grants.Request) (broker.Decision, error) {
	q := questionOf(ctx, req)
	if p.workspace == "" && p.findWorkspace != nil {
		p.workspace = p.findWorkspace()
	}
	q.Workspace = p.workspace
	t, err := p.qs.Ask(p.uid, q)
	if err != nil {
		return broker.Decision{Outcome: broker.Deny, Source: broker.SourceNoReviewer,
			Rationale: "too many questions of yours wait for a person; this one was not asked"}, nil
	}
	q = t.Question()
	p.out.Hold()
	defer p.out.Release()
	if p.relay {
		b, _ := json.Marshal(q)
		p.out.send(ExecLine{Type: "question", Question: b})
	} else if p.tty == nil && p.page != nil {
		// Nobody sees it otherwise: the client tells its person (a line,
		// a desktop notification where it can make one as the user).
		p.out.Event(session.Event{Kind: session.KindQuestionWaiting, Reason: "it is denied unless answered by " + q.ExpiresAt.Local().Format("15:04:05")})
	}
	var wg sync.WaitGroup
	tctx, cancel := context.WithCancel(ctx)
	if p.tty != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, _ := p.tty.Review(tctx, req)
			if d.Source == broker.SourceHuman {
				p.qs.Answer(p.uid, q.ID, Answer{Allow: d.Outcome == broker.Allow, Source: broker.SourceHuman, Decision: &d})
			}
		}()
	}
	asked := time.Now()
	a, ok, why := t.Wait(ctx)
	cancel() // withdraws the terminal's question
	wg.Wait()
	if !ok {
		return broker.Decision{Outcome: broker.Deny, Source: broker.SourceNoReviewer, Rationale: why}, nil
	}
	p.observe.Answered(a.Source, time.Since(asked))
	return decisionOf(a), nil
}

// questionOf is the question req asks, with the model's deny when it
// deferred to the person.
func questionOf(ctx context.Context, req grants.Request) Question {
	q := Question{Surface: string(req.Surface), Operation: string(req.Operation), Path: req.Path,
		Command: req.Command, Cwd: req.Cwd, Session: req.Session, Intent: req.Intent, Held: req.Held}
	if req.Surface == boundary.Network {
		q.Destination = req.DestinationText()
	}
	if m, ok := broker.Deferred(ctx); ok && m.Production != "" {
		// Nobody judged it: its name made it critical.
		q.Production, q.ProductionWhy = m.Production, m.Rationale
	} else if ok {
		q.Model = &m
	}
	q.ClientCannotAllow = clientRefusal(q)
	q.Critical = q.Production != "" || (q.Model != nil && q.Model.RiskLevel == broker.RiskCritical)
	return q
}

// decisionOf is an answer as the person slot's decision: a terminal
// person's own, the approvals page's (a person's too), or a client's
// (the broker holds it to what a reviewer may allow, at the model's
// risk).
func decisionOf(a Answer) broker.Decision {
	if a.Source == broker.SourceHuman && a.Decision != nil {
		return *a.Decision
	}
	if a.Source == broker.SourcePage {
		return pageDecision(a)
	}
	d := broker.Decision{Outcome: broker.Deny, Source: broker.SourceClient, Rationale: "denied by a person's answer relayed by the client"}
	if a.Allow {
		d.Outcome, d.Rationale = broker.Allow, "allowed by a person's answer relayed by the client"
	}
	if a.Note != "" {
		d.Rationale += ": " + a.Note
	}
	return d
}

// personFor is an exec's person slot: nil when nobody can be asked (the
// client relays no questions and passed no terminal that is its own).
// done closes the terminal once the run is over.
func (d *Daemon) personFor(r *http.Request, c caller, who session.Caller, req ExecRequest, out *lineWriter) (broker.Person, func()) {
	tty, why := passedTerminal(r.Context())
	if why != "" {
		// Said once; the run goes on with whoever else can answer.
		out.Event(session.Event{Kind: session.KindWarning, Reason: why})
	}
	done := func() {
		if tty != nil {
			tty.Close()
		}
	}
	page := d.cfg.Page
	if !req.Questions && tty == nil && (page == nil || !page.Live(c.UID)) {
		return nil, done
	}
	p := &person{qs: d.questions, uid: c.UID, out: out, relay: req.Questions, observe: d.cfg.Observer,
		workspace: req.Workspace, page: page, findWorkspace: func() string {
			f, err := d.cfg.Runner.Workspace(who, req.Workspace)
			if err != nil {
				return ""
			}
			return f.Root
		}}
	if tty != nil {
		p.tty = &review.Human{File: tty, Timeout: d.cfg.QuestionWait, Hold: out}
		if page != nil {
			// Where else it may be answered; never the link itself.
			p.tty.Page = "or answer it on the approvals page: `sandboxd approve --page` shows its link on your terminal"
		}
	}
	return p, done
}

// pageDecision is an answer on the approvals page as a decision. A
// redirect is a deny whose rationale is the person's instruction, said
// as one: the agent reads it where it reads every denial's reason (the
// command's stderr and the report's boundary).
func pageDecision(a Answer) broker.Decision {
	d := broker.Decision{Outcome: broker.Deny, Source: broker.SourcePage, Rationale: "denied by a person on the approvals page"}
	switch {
	case a.Allow:
		d.Outcome, d.Rationale = broker.Allow, "allowed once by a person on the approvals page"
	case a.Redirect:
		d.Rationale = "not allowed; the person redirects you instead: " + a.Note
		return d
	}
	if a.Note != "" {
		d.Rationale += ": " + a.Note
	}
	return d
}
