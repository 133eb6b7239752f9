package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/termfilter"
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

// PageLink is the answer of POST /v1/approvals/link: when the link,
// written to the caller's terminal, expires. The link itself never
// travels in an answer: a program holding the caller's token is not the
// person at their terminal.
type PageLink struct {
	ExpiresAt time.Time `json:"expires_at"`
}

// pageLink answers POST /v1/approvals/link: a one-time link for the
// caller's browser, which the daemon writes itself to the terminal the
// client passed with the request, checked to be its controlling
// terminal (as a question's is). Without one, nothing is issued.
func (d *Daemon) pageLink(w http.ResponseWriter, r *http.Request, c caller) {
	if d.cfg.Page == nil {
		writeError(w, http.StatusNotFound, "no_page", "the approvals page is off: the daemon was started without --approvals-addr")
		return
	}
	tty, why := passedTerminal(r.Context())
	if tty == nil {
		if why == "" {
			why = "no terminal was passed with the request"
		}
		writeError(w, http.StatusForbidden, "needs_a_terminal", "the link is written only to your own terminal: run `sandboxd approve --page` at it ("+why+")")
		return
	}
	defer tty.Close()
	url, exp, err := d.cfg.Page.Link(c.UID)
	if err != nil {
		d.cfg.Log.Error("approvals page link", "uid", c.UID, "err", err)
		writeError(w, http.StatusInternalServerError, "link", "the daemon could not make a link to the approvals page")
		return
	}
	msg := fmt.Sprintf("\r\n%sOpen this link in your browser before %s; it works once:%s\r\n  %s\r\n",
		termfilter.FrameOn, exp.Local().Format("15:04:05"), termfilter.FrameOff, url)
	if _, err := tty.Write([]byte(msg)); err != nil {
		d.cfg.Log.Error("approvals page link", "uid", c.UID, "err", err)
		writeError(w, http.StatusInternalServerError, "link", "the link could not be written to your terminal")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, PageLink{ExpiresAt: exp})
}

// PageLink asks the daemon for a link to the approvals page, which it
// writes to tty, this process's controlling terminal, passed with the
// request: when it expires.
func (c *Client) PageLink(ctx context.Context, tty *os.File) (PageLink, error) {
	c.tty = tty
	defer func() { c.tty = nil }()
	hc := c.execHTTP()
	req, err := http.NewRequestWithContext(ctx, "POST", "http://sandboxd/v1/approvals/link", nil)
	if err != nil {
		return PageLink{}, fmt.Errorf("daemon: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := hc.Do(req)
	if err != nil {
		return PageLink{}, publicerr.Wrap(err, "the daemon cannot be reached at "+c.socket)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return PageLink{}, apiError(resp)
	}
	var out PageLink
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxRequest)).Decode(&out); err != nil {
		return PageLink{}, publicerr.Wrap(err, "the daemon's answer could not be read")
	}
	return out, nil
}

// Questions is the daemon's queue of questions for a person.
func (d *Daemon) Questions() *Questions { return d.questions }
