package daemon

import "net/http"

// auth is what a route asks of a caller.
type auth int

const (
	// authPeer: the kernel's word on the peer is enough (the peer is
	// neither the daemon nor a process of a sandboxed run).
	authPeer auth = iota
	// authToken: and the caller's token, which only a process that can
	// read the caller's token file has.
	authToken
)

// route is one endpoint of the API.
type route struct {
	method, path string
	auth         auth
	handle       func(w http.ResponseWriter, r *http.Request, c caller)
	// stream: the body is not bounded as a whole (an exec's stdin
	// follows its request; the request line is bounded by itself).
	stream bool
	// doc says what it does, for this file's reader.
	doc string
}

// routes is the whole API, versioned under /v1. Every response is
// JSON; every error is {"error": {"code", "message"}} with a 4xx or 5xx.
func (d *Daemon) routes() []route {
	return []route{
		{method: "POST", path: "/v1/token", auth: authPeer, handle: d.token,
			doc: "write the caller's token file (if the daemon has none for its uid yet); answer its path: the client reads the token from there"},
		{method: "GET", path: "/v1/health", auth: authToken, handle: d.health,
			doc: "the daemon is up; who it took the caller for (uid, gid, groups)"},
		{method: "GET", path: "/v1/version", auth: authToken, handle: d.version,
			doc: "the daemon's version and API version"},
		{method: "POST", path: "/v1/review", auth: authToken, handle: d.review,
			doc: "decide one boundary before anything runs (a ReviewRequest: a path and operation, a destination, or a whole command): the broker's decision, source and rationale, and on request an allow's grant"},
		{method: "POST", path: "/v1/check", auth: authToken, handle: d.check,
			doc: "whether sandboxd's rules refuse a filesystem operation (a ReviewRequest: path and operation) by a tool of the agent's own that runs outside every sandbox, before any reviewer: a secret, sandboxd's own state, a start-up location, a policy deny rule, a name a file tool may not write in the workspace; nothing is reviewed, granted or counted"},
		{method: "POST", path: "/v1/grants/consume", auth: authToken, handle: d.consume,
			doc: "use a grant (a ConsumeRequest: the token and the request as a review named it, as it is now) before the retry it allows; 409 with why when it does not apply: another request, command, directory, session or caller, used or expired"},
		{method: "POST", path: "/v1/sessions/{id}", auth: authToken, handle: d.session,
			doc: "one of the caller's named sessions, for the Context of the body: its circuit breaker (locked, why, headroom), the model's recent denials in it, its held retries"},
		{method: "POST", path: "/v1/exec", auth: authToken, handle: d.exec, stream: true,
			doc: "run a command for the caller (an ExecRequest line, then its stdin); answer NDJSON: first a \"started\" line with the exec's id, then stdout and stderr chunks, the run's events, questions for a person (with \"questions\": true, or a terminal passed with the request), last the report; the run ends with the client. With retry \"client\" an attempt whose boundaries were all allowed is held and its report's retry carries the grants; an exec presenting all of them (grants) for the same command and context is its retry"},
		{method: "POST", path: "/v1/execs/{id}/signal", auth: authToken, handle: d.signal,
			doc: "forward a signal (a SignalRequest: INT, TERM, HUP, QUIT, USR1, USR2 or WINCH) to the command of the caller's running exec whose \"started\" line gave id, as a person's: the second INT ends its whole tree"},
		{method: "POST", path: "/v1/retries/decline", auth: authToken, handle: d.decline,
			doc: "end a held attempt without its retry (a DeclineRequest: all its grants): grants revoked, its changes committed; answer its final report; 409 when no attempt of the caller waits on exactly these grants"},
		{method: "GET", path: "/v1/audit", auth: authToken, handle: d.auditView,
			doc: "the machine's audit log as the caller may see it (NDJSON, package audit's view): the caller's records whole, every other user's as a bare link of the chain (seq, prev, hash), checkpoints whole; headers name the log and its public key, which the caller checks the view with; 404 when the daemon keeps no log"},
		{method: "GET", path: "/v1/questions", auth: authToken, handle: d.listQuestions,
			doc: "the caller's questions for a person that wait for an answer (the exec that asked each is waiting)"},
		{method: "POST", path: "/v1/questions/{id}/answer", auth: authToken, handle: d.answerQuestion,
			doc: "answer one of the caller's questions ({\"allow\": bool, \"note\": \"...\"}), source client: an allow only where a reviewer could allow (the model's risk, never critical, never in a lockdown); 404 for none of the caller's, 409 when answered or withdrawn"},
		{method: "POST", path: "/v1/approvals/link", auth: authToken, handle: d.pageLink, doc: "a one-time link to the approvals page for the caller (its URL, a secret the client shows its person's terminal only, and expiry); 404 when the page is off"},
	}
}
