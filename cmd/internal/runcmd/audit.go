package runcmd

import (
	"context"
	"log/slog"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/record"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/session"
)

// OwnRecorders records a caller's runs on the caller's own log, which
// rotates and keeps what the caller's policy says ([audit]); records
// pass through the model reviewer's redactor.
func OwnRecorders(o *audit.Opener) session.AuditFactory {
	return func(uid int, secrets []string, keep policy.Audit) session.AuditRecorder {
		o.Retain(int64(keep.RotateSize), time.Duration(keep.RetainAge), int64(keep.RetainSize))
		return record.Recorder{To: o, UID: uid, Redact: review.NewRedactor(secrets).Redact}
	}
}

// OwnAuditLog is the caller's own audit log, which an embedded run
// writes (opened at its first record: most runs write none); close it
// when the process is done.
func OwnAuditLog(caller session.Caller, log *slog.Logger) *audit.Opener {
	l := caller.Layout()
	return audit.NewOpener(audit.Config{Dir: l.Audit(), KeyFile: l.AuditKey(), Log: log})
}

// CloseAudit closes a log, saying on log why it could not sign its last
// checkpoint (the records are written; the next writer signs them).
func CloseAudit(o *audit.Opener, log *slog.Logger) {
	if err := o.Close(context.Background()); err != nil {
		log.Debug("audit log", "err", err)
	}
}
