package daemon

import (
	"bufio"
	"net/http"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/session"
)

// ReviewRequest is one boundary to decide before anything runs, for the
// caller its environment, directory and umask describe (checked as an
// exec's are): a path and a filesystem operation, a network destination,
// or Command itself (surface "command", operation "run").
type ReviewRequest struct {
	Env       []string `json:"env"`
	Cwd       string   `json:"cwd"`
	Umask     uint32   `json:"umask"`
	Workspace string   `json:"workspace,omitempty"`
	Policy    string   `json:"policy,omitempty"`
	Session   string   `json:"session,omitempty"`
	Agent     string   `json:"agent,omitempty"`
	Intent    string   `json:"intent,omitempty"`
	// Reviewer is the review mode, as run's --reviewer ("": auto).
	Reviewer string `json:"reviewer,omitempty"`
	// Command is the command that meets the boundary (run with bash -c);
	// for surface "command", the one judged.
	Command     string `json:"command,omitempty"`
	Surface     string `json:"surface"`
	Operation   string `json:"operation"`
	Path        string `json:"path,omitempty"`
	Destination string `json:"destination,omitempty"`
	// Grant asks for the allow's grant, to consume on the retry.
	Grant bool `json:"grant,omitempty"`
}

// ReviewAnswer is the decision, and the grant when one was asked for
// and the boundary allowed.
type ReviewAnswer struct {
	Decision broker.Decision `json:"decision"`
	Grant    *GrantOut       `json:"grant,omitempty"`
}

// GrantOut is a grant as the caller sees it.
type GrantOut struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// review answers POST /v1/review.
func (d *Daemon) review(w http.ResponseWriter, r *http.Request, c caller) {
	line, err := bufio.NewReaderSize(r.Body, MaxRequest).ReadSlice('\n')
	if len(line) == 0 && err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "the request is empty")
		return
	}
	var req ReviewRequest
	if err := strictJSON(line, &req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	who, err := d.callerOf(c, ExecRequest{Env: req.Env, Cwd: req.Cwd, Umask: req.Umask})
	if err != nil {
		writeError(w, http.StatusForbidden, "not_yours", publicerr.Message(err, "the request does not describe you"))
		return
	}
	job := session.Job{Argv: []string{"bash", "-c", req.Command}, Command: req.Command, Workspace: req.Workspace,
		Policy: req.Policy, Session: req.Session, Agent: req.Agent, Intent: req.Intent, Reviewer: req.Reviewer}
	if job.Reviewer == "" {
		job.Reviewer = session.ReviewAuto
	}
	if req.Command == "" {
		job.Argv = []string{"true"}
	}
	res, err := d.cfg.Runner.Review(r.Context(), who, job, session.Question{Surface: boundary.Surface(req.Surface),
		Operation: boundary.Operation(req.Operation), Path: req.Path, Destination: req.Destination, Grant: req.Grant})
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", session.Public(err))
		return
	}
	out := ReviewAnswer{Decision: res.Decision}
	if res.Grant != nil {
		out.Grant = &GrantOut{Token: res.Grant.Token, ExpiresAt: res.Grant.ExpiresAt}
	}
	writeJSON(w, http.StatusOK, out)
}
