package daemon

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/sandboxd/sandboxd/publicerr"
)

// AuditLog is the machine's audit log as the daemon serves it to its
// callers (cmd/sandboxd wires package audit's log in).
type AuditLog interface {
	// View takes the log as it stands for uid: its signed head, and a
	// writer of the log as uid may see it (uid's records in full, every
	// other user's as a bare link of the chain, the log's own records
	// whole), so the caller checks the chain and its signatures without
	// reading anyone else's records. Close the view.
	View(ctx context.Context, uid int) (AuditView, error)
	// Paths are the log's current file and its public key, which every
	// user may read.
	Paths() (log, publicKey string)
}

// AuditView is one caller's view of the log, taken at one moment.
type AuditView interface {
	Head() []byte
	WriteTo(ctx context.Context, w io.Writer) error
	Close() error
}

// Headers of GET /v1/audit: where the log and its public key are.
const (
	headerAuditLog  = "Sandboxd-Audit-Log"
	headerAuditKey  = "Sandboxd-Audit-Public-Key"
	headerAuditHead = "Sandboxd-Audit-Head" // base64 of the signed head
)

// auditView answers GET /v1/audit.
func (d *Daemon) auditView(w http.ResponseWriter, r *http.Request, c caller) {
	if d.cfg.Audit == nil {
		writeError(w, http.StatusNotFound, "no_audit_log", "this daemon keeps no audit log")
		return
	}
	if !d.viewing.TryLock(c.UID) {
		writeError(w, http.StatusTooManyRequests, "busy", "a view of the audit log for you is being sent already; try again when it is done")
		return
	}
	defer d.viewing.Unlock(c.UID)
	v, err := d.cfg.Audit.View(r.Context(), c.UID)
	if err != nil {
		d.cfg.Log.Error("audit view", "uid", c.UID, "err", err)
		writeError(w, http.StatusInternalServerError, "audit_log", "the audit log could not be read")
		return
	}
	defer v.Close()
	logPath, key := d.cfg.Audit.Paths()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set(headerAuditLog, logPath)
	w.Header().Set(headerAuditKey, key)
	w.Header().Set(headerAuditHead, base64.StdEncoding.EncodeToString(v.Head()))
	w.WriteHeader(http.StatusOK)
	if err := v.WriteTo(r.Context(), w); err != nil {
		// The status is sent: the view ends short, and a short view
		// fails its verification.
		d.cfg.Log.Error("audit view", "uid", c.UID, "err", err)
	}
}

// AuditView writes the daemon's log as the caller may see it to w, and
// says where the log and its public key are, and what its signed head
// was when the view was taken (nil: none).
func (c *Client) AuditView(ctx context.Context, w io.Writer) (logPath, keyPath string, head []byte, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://sandboxd/v1/audit", nil)
	if err != nil {
		return "", "", nil, fmt.Errorf("daemon: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return "", "", nil, publicerr.Wrap(err, "the daemon cannot be reached at "+c.socket)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return "", "", nil, apiError(resp)
	}
	head, err = base64.StdEncoding.DecodeString(resp.Header.Get(headerAuditHead))
	if err != nil {
		return "", "", nil, publicerr.Wrap(err, "the daemon's answer could not be read")
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return "", "", nil, publicerr.Wrap(err, "the daemon's log could not be read to the end")
	}
	return resp.Header.Get(headerAuditLog), resp.Header.Get(headerAuditKey), head, nil
}

// uidLocks lets one holder per uid at a time (a view of the audit log:
// parsing the whole log is the daemon's work, which one user must not
// multiply).
type uidLocks struct {
	mu   sync.Mutex
	held map[int]bool
}

// TryLock takes uid's lock if it is free.
func (u *uidLocks) TryLock(uid int) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.held[uid] {
		return false
	}
	if u.held == nil {
		u.held = map[int]bool{}
	}
	u.held[uid] = true
	return true
}

// Unlock frees uid's lock.
func (u *uidLocks) Unlock(uid int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.held, uid)
}
