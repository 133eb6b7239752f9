package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/sandboxd/sandboxd/publicerr"
)

// AuditLog is the machine's audit log as the daemon serves it to its
// callers (cmd/sandboxd wires package audit's log in).
type AuditLog interface {
	// View writes the log as uid may see it: uid's records in full,
	// every other user's as a bare link of the chain, the log's own
	// records (checkpoints) whole, so the caller can check the chain and
	// its signatures without reading anyone else's records.
	View(ctx context.Context, uid int, w io.Writer) error
	// Paths are the log's current file and its public key, which every
	// user may read.
	Paths() (log, publicKey string)
}

// Headers of GET /v1/audit: where the log and its public key are.
const (
	headerAuditLog = "Sandboxd-Audit-Log"
	headerAuditKey = "Sandboxd-Audit-Public-Key"
)

// auditView answers GET /v1/audit.
func (d *Daemon) auditView(w http.ResponseWriter, r *http.Request, c caller) {
	if d.cfg.Audit == nil {
		writeError(w, http.StatusNotFound, "no_audit_log", "this daemon keeps no audit log")
		return
	}
	logPath, key := d.cfg.Audit.Paths()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set(headerAuditLog, logPath)
	w.Header().Set(headerAuditKey, key)
	w.WriteHeader(http.StatusOK)
	if err := d.cfg.Audit.View(r.Context(), c.UID, w); err != nil {
		// The status is sent: the view ends short, and a short view
		// fails its verification.
		d.cfg.Log.Error("audit view", "uid", c.UID, "err", err)
	}
}

// AuditView writes the daemon's log as the caller may see it to w, and
// says where the log and its public key are.
func (c *Client) AuditView(ctx context.Context, w io.Writer) (logPath, keyPath string, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://sandboxd/v1/audit", nil)
	if err != nil {
		return "", "", fmt.Errorf("daemon: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return "", "", publicerr.Wrap(err, "the daemon cannot be reached at "+c.socket)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return "", "", apiError(resp)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return "", "", publicerr.Wrap(err, "the daemon's log could not be read to the end")
	}
	return resp.Header.Get(headerAuditLog), resp.Header.Get(headerAuditKey), nil
}
