package session

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/persist"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox"
)

// Question is one boundary a front end asks about before anything runs
// (the daemon's review endpoint): a path and a filesystem operation, a
// network destination, or the job's whole command (boundary.Command,
// judged before it runs; never granted).
type Question struct {
	Surface   boundary.Surface
	Operation boundary.Operation
	// Path is absolute; Destination is host:port.
	Path, Destination string
	// Grant keeps the allow's grant for the caller (else it is revoked
	// at once): the caller consumes it when it retries.
	Grant bool
}

// Review decides one boundary for c as a run of job would decide it, by
// the same broker (the policy's rules, the hard denies, the reviewers,
// the session's breaker), without running anything. The object's
// identity is read as the caller: a grant binds to it as a run's does.
func (r *Runner) Review(ctx context.Context, c Caller, job Job, q Question) (broker.Result, error) {
	p, req, err := r.question(ctx, c, job, q)
	if err != nil {
		return broker.Result{}, err
	}
	res := p.broker.Decide(ctx, req)
	if res.Grant != nil && !q.Grant {
		r.grants.Revoke(res.Grant.Token)
		res.Grant = nil
	}
	return res, nil
}

// Consume uses the grant token for the boundary q names, as it is now,
// for c and job: what a front end does before it retries. A token given
// for another request, session, command, directory or caller, used
// already or expired, is refused (and recorded as refused).
func (r *Runner) Consume(ctx context.Context, c Caller, job Job, q Question, token string) error {
	p, req, err := r.question(ctx, c, job, q)
	if err != nil {
		return err
	}
	if err := p.broker.Consume(ctx, token, req); err != nil {
		return publicerr.Wrap(err, grantMismatch(err))
	}
	return nil
}

// Unconfined says why sandboxd's rules refuse q, a filesystem operation
// by a tool of the agent's own that runs outside every sandbox (pi's
// read, write and edit tools, asked about by the permission system),
// before any reviewer, or denied is false: a secret, sandboxd's own
// state, a start-up location, a policy deny rule, and in the workspace
// a name a file tool may not write (persist.FileToolRefuses), for the
// path as given and as it resolves for the caller. Nothing is reviewed,
// granted or counted: what is not refused is left to the agent's own
// permissions.
func (r *Runner) Unconfined(ctx context.Context, c Caller, job Job, q Question) (why string, denied bool, err error) {
	if q.Surface != boundary.Filesystem {
		return "", false, publicerr.New("only a filesystem operation can be checked for a tool outside the sandbox")
	}
	p, req, err := r.question(ctx, c, job, q)
	if err != nil {
		return "", false, err
	}
	fsid.Do(c.ID(), func() error {
		// pi's write makes the directories it misses: ws/link/autostart/x,
		// with link a link to ~/.config the model made, lands in
		// ~/.config/autostart, however little of it is there yet.
		if real, err := persist.ResolveCreated(persist.Host{}, q.Path); err == nil {
			req.ResolvedPath = real
		}
		return nil
	})
	if !q.Operation.Reads() {
		names := r.builtinNames
		for _, path := range []string{req.Path, req.ResolvedPath} {
			if rel, ok := pathtree.Below(p.ws, path); ok {
				if why, refused := persist.FileToolRefuses(names, rel); refused {
					return "an agent's own file tools may not write " + rel + " in the workspace: " + why +
						"; a shell command, which runs in the sandbox, may, and sandboxd judges it there", true, nil
				}
			}
		}
	}
	why, denied = p.broker.Unconfined(req)
	return why, denied, nil
}

// question is the plan of job for c and the request q makes in it.
func (r *Runner) question(ctx context.Context, c Caller, job Job, q Question) (*plan, grants.Request, error) {
	if err := q.check(); err != nil {
		return nil, grants.Request{}, err
	}
	p, err := r.newPlan(ctx, c, job)
	if err != nil {
		return nil, grants.Request{}, err
	}
	req := grants.Request{
		Session: p.session, Cwd: p.cwd, Command: p.command, Surface: q.Surface, Operation: q.Operation,
		Path: q.Path, ResolvedPath: q.Path, Agent: job.Agent, Intent: job.Intent, ToolCallID: job.ToolCallID, Attempt: 1,
	}.WithDestinationText(q.Destination)
	if q.Surface == boundary.Filesystem {
		fsid.Do(c.ID(), func() error {
			if ino, born, _, ok := sandbox.Identity(q.Path); ok {
				req.Ino, req.Born = ino, born
			}
			return nil
		})
	}
	return p, req, nil
}

// check says what is wrong with a question.
func (q Question) check() error {
	switch {
	case !q.Surface.Valid():
		return publicerr.New(fmt.Sprintf("unknown surface %q (filesystem, network or command)", q.Surface))
	case !q.Operation.Of(q.Surface):
		return publicerr.New(fmt.Sprintf("%q is not an operation of the %s surface", q.Operation, q.Surface))
	case q.Surface == boundary.Filesystem && (!filepath.IsAbs(q.Path) || filepath.Clean(q.Path) != q.Path):
		return publicerr.New("a filesystem question needs an absolute, clean path")
	case q.Surface == boundary.Network && q.Destination == "":
		return publicerr.New("a network question needs a destination (host:port)")
	}
	return nil
}
