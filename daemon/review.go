package daemon

import (
	"net/http"
	"time"
	"unicode/utf8"

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
	Context
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

// ConsumeRequest names a grant and the request it is used for now, as a
// review named it.
type ConsumeRequest struct {
	ReviewRequest
	Token string `json:"token"`
}

// review answers POST /v1/review.
func (d *Daemon) review(w http.ResponseWriter, r *http.Request, c caller) {
	var req ReviewRequest
	who, job, q, ok := d.question(w, r, c, &req, &req)
	if !ok {
		return
	}
	res, err := d.cfg.Runner.Review(r.Context(), who, job, q)
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

// CheckAnswer is what sandboxd's rules say of an operation by a tool
// outside the sandbox: Denied, and Why (safe to show), or not denied.
type CheckAnswer struct {
	Denied bool   `json:"denied"`
	Why    string `json:"why,omitempty"`
}

// check answers POST /v1/check.
func (d *Daemon) check(w http.ResponseWriter, r *http.Request, c caller) {
	var req ReviewRequest
	who, job, q, ok := d.question(w, r, c, &req, &req)
	if !ok {
		return
	}
	if req.Grant {
		writeError(w, http.StatusBadRequest, "bad_request", "a check issues no grant")
		return
	}
	why, denied, err := d.cfg.Runner.Unconfined(r.Context(), who, job, q)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", session.Public(err))
		return
	}
	writeJSON(w, http.StatusOK, CheckAnswer{Denied: denied, Why: why})
}

// consume answers POST /v1/grants/consume: 200 when the grant was used
// for exactly this request, 409 (with why) when it was refused.
func (d *Daemon) consume(w http.ResponseWriter, r *http.Request, c caller) {
	var req ConsumeRequest
	who, job, q, ok := d.question(w, r, c, &req, &req.ReviewRequest)
	if !ok {
		return
	}
	if err := d.cfg.Runner.Consume(r.Context(), who, job, q, req.Token); err != nil {
		writeError(w, http.StatusConflict, "grant_refused", "the grant was refused: "+session.Public(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"consumed": true})
}

// DeclineRequest names a held attempt by all its grants.
type DeclineRequest struct {
	Grants []string `json:"grants"`
}

// decline answers POST /v1/retries/decline: the held attempt is ended
// without its retry (its grants revoked, its changes committed, as the
// caller) and its final report answered; 409 when no attempt of the
// caller waits on exactly these grants.
func (d *Daemon) decline(w http.ResponseWriter, r *http.Request, c caller) {
	var req DeclineRequest
	line, _ := readLine(newBodyReader(r.Body))
	if err := strictJSON(line, &req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	if err := checkTokens(req.Grants); err != nil || len(req.Grants) == 0 {
		writeError(w, http.StatusBadRequest, "bad_request", "name the held attempt by all its grants")
		return
	}
	rep, err := d.cfg.Runner.Decline(r.Context(), c.UID, req.Grants)
	if err != nil {
		writeError(w, http.StatusConflict, "not_held", session.Public(err))
		return
	}
	writeJSON(w, http.StatusOK, ExecLine{Type: "report", Report: reportJSON(rep)})
}

// session answers POST /v1/sessions/{id}: the session named id of the
// caller the body's Context describes, read as that caller.
func (d *Daemon) session(w http.ResponseWriter, r *http.Request, c caller) {
	var req Context
	line, _ := readLine(newBodyReader(r.Body))
	if err := strictJSON(line, &req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	who, err := d.callerOf(c, req)
	if err != nil {
		writeError(w, http.StatusForbidden, "not_yours", publicerr.Message(err, "the request does not describe you"))
		return
	}
	id := r.PathValue("id")
	if len(id) > maxString || !utf8.ValidString(id) {
		writeError(w, http.StatusBadRequest, "bad_request", "the session's name is too long or not UTF-8")
		return
	}
	st, err := d.cfg.Runner.SessionState(who, id)
	if err != nil {
		writeError(w, http.StatusBadRequest, "unreadable", session.Public(err))
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// question reads a review-like request into v (whose ReviewRequest is
// rq) and checks it describes the peer; on a bad one it answers and
// reports false.
func (d *Daemon) question(w http.ResponseWriter, r *http.Request, c caller, v any, rq *ReviewRequest) (session.Caller, session.Job, session.Question, bool) {
	line, err := readLine(newBodyReader(r.Body))
	if len(line) == 0 && err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "the request is empty")
		return session.Caller{}, session.Job{}, session.Question{}, false
	}
	if err := strictJSON(line, v); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return session.Caller{}, session.Job{}, session.Question{}, false
	}
	who, err := d.callerOf(c, rq.Context)
	if err != nil {
		writeError(w, http.StatusForbidden, "not_yours", publicerr.Message(err, "the request does not describe you"))
		return session.Caller{}, session.Job{}, session.Question{}, false
	}
	argv := []string{"bash", "-c", rq.Command}
	if rq.Command == "" {
		argv = []string{"true"}
	}
	job := jobOf(rq.Context, argv, rq.Command)
	q := session.Question{Surface: boundary.Surface(rq.Surface), Operation: boundary.Operation(rq.Operation),
		Path: rq.Path, Destination: rq.Destination, Grant: rq.Grant}
	return who, job, q, true
}
