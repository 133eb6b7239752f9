package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sandboxd/sandboxd/approvals"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/intents"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/session"
)

// pageIntents is the approvals page's side of session intents
// (approvals.Intents): a person known to the page by uid acts as the
// caller their last exec through the daemon described (their home,
// state directory and identity), in the named sessions of their recent
// execs. Intents are issued and revoked with the caller's file-system
// identity, recorded first in the machine's audit log.
type pageIntents struct {
	// d is the daemon, set once it exists (the page is made, and may
	// serve, before it).
	d   atomic.Pointer[daemon.Daemon]
	log audit.Appender // nil: no audit log, and no intent is issued
}

// set gives the page's intents the daemon, once it exists.
func (p *pageIntents) set(d *daemon.Daemon) { p.d.Store(d) }

// timeout bounds one of the page's intent operations.
const pageIntentTimeout = 10 * time.Second

var errNoCaller = publicerr.New("the daemon has run nothing for you yet, so it does not know where your intents are: run a command through it first")

// caller is the caller uid's last exec described.
func (p *pageIntents) caller(uid int) (session.Caller, []string, error) {
	d := p.d.Load()
	if d == nil {
		return session.Caller{}, nil, errNoCaller
	}
	c, names, ok := d.Seen(uid)
	if !ok {
		return session.Caller{}, nil, errNoCaller
	}
	return c, names, nil
}

func (p *pageIntents) List(uid int) []approvals.Intent {
	c, names, err := p.caller(uid)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), pageIntentTimeout)
	defer cancel()
	var out []approvals.Intent
	for _, name := range names {
		ins, err := p.d.Load().Runner().Intents(ctx, c, name)
		if err != nil {
			continue
		}
		for _, in := range ins {
			out = append(out, approvals.Intent{ID: in.ID, Session: name, Scope: in.Scope, ExpiresAt: in.ExpiresAt})
		}
	}
	return out
}

func (p *pageIntents) Preview(uid int, scope string) (approvals.IntentPreview, error) {
	c, _, err := p.caller(uid)
	if err != nil {
		return approvals.IntentPreview{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), pageIntentTimeout)
	defer cancel()
	sc, err := p.d.Load().Runner().PreviewIntent(ctx, c, scope)
	if err != nil {
		return approvals.IntentPreview{}, publicerr.Wrap(err, session.Public(err))
	}
	return approvals.IntentPreview{Text: sc.Text, Hash: sc.Hash, Allows: sc.Allows}, nil
}

func (p *pageIntents) Create(uid int, name, shown, hash string) (approvals.Intent, error) {
	c, _, err := p.caller(uid)
	if err != nil {
		return approvals.Intent{}, err
	}
	if p.log == nil {
		return approvals.Intent{}, publicerr.New("the daemon keeps no audit log, so no intent is issued from the page")
	}
	ctx, cancel := context.WithTimeout(context.Background(), pageIntentTimeout)
	defer cancel()
	in, err := p.d.Load().Runner().GrantIntent(ctx, c, name, shown, hash, 0, "page",
		intentRecord(p.log, uid, session.Scoped(c, name), "issued on the approvals page"))
	if err != nil {
		return approvals.Intent{}, publicerr.Wrap(err, session.Public(err))
	}
	return approvals.Intent{ID: in.ID, Session: name, Scope: in.Scope, ExpiresAt: in.ExpiresAt}, nil
}

func (p *pageIntents) Revoke(uid int, name, id string) error {
	c, _, err := p.caller(uid)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), pageIntentTimeout)
	defer cancel()
	var record func(in intents.Intent) error
	if p.log != nil {
		record = intentRecord(p.log, uid, session.Scoped(c, name), "revoked on the approvals page")
	}
	if _, err := p.d.Load().Runner().RevokeIntent(ctx, c, name, id, record); err != nil {
		return publicerr.Wrap(err, session.Public(err))
	}
	return nil
}
