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
	// doc says what it does, for this file's reader.
	doc string
}

// routes is the whole API, versioned under /v1. Every response is
// JSON; every error is {"error": {"code", "message"}} with a 4xx or 5xx.
func (d *Daemon) routes() []route {
	return []route{
		{"POST", "/v1/token", authPeer, d.token,
			"write the caller's token file (if the daemon has none for its uid yet); answer its path: the client reads the token from there"},
		{"GET", "/v1/health", authToken, d.health,
			"the daemon is up; who it took the caller for (uid, gid, groups)"},
		{"GET", "/v1/version", authToken, d.version,
			"the daemon's version and API version"},
	}
}
