package daemon

import (
	"net/http"
	"time"
)

// Page is the approvals page (package approvals) as the daemon sees it:
// the daemon issues its one-time links over the socket, to the caller
// the kernel names, and asks whether a caller has a live session there,
// which makes the caller reachable for an exec with nobody else to ask.
type Page interface {
	// Link issues a one-time link for uid's browser: its URL, which
	// holds the secret, and when it expires unused.
	Link(uid int) (url string, expires time.Time, err error)
	// Live reports whether uid has a live session on the page.
	Live(uid int) bool
}

// PageLink is the answer of POST /v1/approvals/link. The URL is a
// secret: the client prints it to its person's terminal only.
type PageLink struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// pageLink answers POST /v1/approvals/link.
func (d *Daemon) pageLink(w http.ResponseWriter, r *http.Request, c caller) {
	if d.cfg.Page == nil {
		writeError(w, http.StatusNotFound, "no_page", "the approvals page is off: the daemon was started without --approvals-addr")
		return
	}
	url, exp, err := d.cfg.Page.Link(c.UID)
	if err != nil {
		d.cfg.Log.Error("approvals page link", "uid", c.UID, "err", err)
		writeError(w, http.StatusInternalServerError, "link", "the daemon could not make a link to the approvals page")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, PageLink{URL: url, ExpiresAt: exp})
}

// Questions is the daemon's queue of questions for a person.
func (d *Daemon) Questions() *Questions { return d.questions }
