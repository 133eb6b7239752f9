package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/record"
	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/intents"
	"github.com/sandboxd/sandboxd/overrides"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/session"
	"golang.org/x/sys/unix"
)

// The machine's audit log, written by the daemon (serve --audit-dir,
// --audit-key): only root may write it.
const (
	defaultAuditDir = "/var/log/sandboxd"
	defaultAuditKey = "/var/lib/sandboxd/audit-signing.key"
)

// recorders opens the recorder of a caller's run on the machine's log:
// records name the caller's uid and pass through the model reviewer's
// redactor. The caller's [audit] settings are not the machine log's.
func recorders(to audit.Appender) session.AuditFactory {
	return func(uid int, secrets []string, _ policy.Audit) session.AuditRecorder {
		return record.Recorder{To: to, UID: uid, Redact: review.NewRedactor(secrets).Redact}
	}
}

// auditServeFlags are serve's flags for the machine's audit log.
type auditServeFlags struct {
	dir, key           string
	rotateMB, retainMB int64
	retainDays         int
}

func (a *auditServeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.dir, "audit-dir", defaultAuditDir, "the machine's audit log `directory` (root's; empty: keep no log)")
	fs.StringVar(&a.key, "audit-key", defaultAuditKey, "the audit log's private signing key (made, root's and 0600, if absent)")
	fs.Int64Var(&a.rotateMB, "audit-rotate-mb", 64, "start a new audit log file past this many MiB (the chain runs on)")
	fs.IntVar(&a.retainDays, "audit-retain-days", 0, "remove rotated audit log files older than this many days (0: keep)")
	fs.Int64Var(&a.retainMB, "audit-retain-mb", 0, "remove the oldest rotated audit log files past this many MiB in all (0: keep)")
}

// machineAudit is the daemon's audit log: the runs' records, its own
// start and stop, and what it serves each caller (daemon.AuditLog).
type machineAudit struct {
	log *audit.Log
	dir string
	// failed counts a record of the daemon's own the log refused (the
	// metrics'; nil until wire).
	failed func()
}

// openMachineAudit opens the machine's log and records the daemon's
// start (nil: --audit-dir is empty, no log is kept).
func openMachineAudit(ctx context.Context, a auditServeFlags, version string, log *slog.Logger) (*machineAudit, error) {
	if a.dir == "" {
		return nil, nil
	}
	// Made readable by everyone when it is made: each user checks the
	// records about them with the public key beside the log (the log's
	// files are root's alone).
	for _, d := range []string{a.dir, filepath.Dir(a.key)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, publicerr.Wrap(err, "the audit log's directory "+d+" cannot be made")
		}
		// Root's alone, and every directory above: anyone else who could
		// write there could plant a link the daemon writes through, or
		// remove the log's files or its key.
		if err := daemon.TrustedDir(d); err != nil {
			return nil, err
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(a.key, &st); err == nil && (st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != 0) {
		return nil, publicerr.New("the audit log's key " + a.key + " is not a file of root's: anyone who can read it can sign a forged log")
	}
	l, err := audit.Open(ctx, audit.Config{Dir: a.dir, KeyFile: a.key, MaxFileBytes: a.rotateMB << 20,
		RetainAge: time.Duration(a.retainDays) * 24 * time.Hour, RetainBytes: a.retainMB << 20, Log: log})
	if err != nil {
		return nil, publicerr.Wrap(err, "the audit log in "+a.dir+" cannot be opened (it and --audit-key must be root's)")
	}
	if _, err := l.Append(ctx, audit.Event{Kind: audit.KindDaemonStart, Note: "sandboxd " + version}); err != nil {
		l.Close(ctx)
		return nil, publicerr.Wrap(err, "the audit log in "+a.dir+" cannot be written")
	}
	log.Info("sandboxd serve: audit log", "file", l.Path())
	return &machineAudit{log: l, dir: a.dir}, nil
}

// wire has the runs record to the log and the daemon serve it, and
// counts with failed a record of the daemon's own the log refuses (m
// nil: no log is kept).
func (m *machineAudit) wire(sc *session.Config, dc *daemon.Config, failed func()) {
	if m == nil {
		return
	}
	sc.AuditLog, dc.Audit, m.failed = recorders(m), m, failed
}

// Append is audit.Appender's.
func (m *machineAudit) Append(ctx context.Context, ev audit.Event) error {
	_, err := m.log.Append(ctx, ev)
	return err
}

// View is daemon.AuditLog's: uid's records whole, the others' stubs.
func (m *machineAudit) View(ctx context.Context, uid int) (daemon.AuditView, error) {
	s, err := m.log.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return uidView{s, uid}, nil
}

// uidView is a snapshot of the log as one uid may see it.
type uidView struct {
	*audit.Snapshot
	uid int
}

func (v uidView) WriteTo(ctx context.Context, w io.Writer) error {
	return v.View(ctx, func(r audit.Record) bool { return r.UID != nil && *r.UID == v.uid }, w)
}

// Paths is daemon.AuditLog's.
func (m *machineAudit) Paths() (string, string) {
	return m.log.Path(), filepath.Join(m.dir, audit.PublicKeyName)
}

// close records the daemon's stop and signs the last checkpoint.
func (m *machineAudit) close(ctx context.Context, log *slog.Logger) {
	if m == nil {
		return
	}
	if _, err := m.log.Append(ctx, audit.Event{Kind: audit.KindDaemonStop}); err != nil {
		log.Error("sandboxd serve: audit log", "err", err)
		if m.failed != nil {
			m.failed()
		}
	}
	if err := m.log.Close(ctx); err != nil {
		log.Error("sandboxd serve: audit log", "err", err)
	}
}

// errUnrecorded is an override the audit log could not take: it is not
// issued.
var errUnrecorded = publicerr.New("the audit log could not be written, so nothing is issued")

// overrideRecord records, in the caller's own log, what became of a
// person's override of the model's denial d in session id.
func overrideRecord(to audit.Appender, caller session.Caller, id string, d overrides.Denial, breakGlass bool) func(note string) error {
	kind := audit.KindOverride
	if breakGlass {
		kind = audit.KindBreakGlass
	}
	uid := caller.UID
	// The values a run's policy would strip from the environment as
	// credentials (the built-in list: the override is not a run, and has
	// no policy of its own), hidden as a run's records hide them.
	var secrets []string
	_, dropped := policy.FilterEnv(caller.Env, nil, policy.DefaultEnvDeny())
	for _, k := range dropped {
		if v := caller.Getenv(k); len(v) >= 8 {
			secrets = append(secrets, v)
		}
	}
	red := review.NewRedactor(secrets).Redact
	return func(note string) error {
		ev := audit.Event{Kind: kind, UID: &uid, Session: red(id), Command: red(d.Command), Surface: string(d.Surface),
			Operation: string(d.Operation), Target: red(d.Target()), RequestHash: d.Hash, ModelOutcome: "deny",
			ModelRisk: d.Risk, AnswerSource: "person", Note: note}
		if err := to.Append(context.Background(), ev); err != nil {
			return errors.Join(errUnrecorded, err)
		}
		return nil
	}
}

// intentRecord records, in the caller's own log, what became of a
// person's intent in session id (note: issued, revoked).
func intentRecord(to audit.Appender, uid int, id, note string) func(in intents.Intent) error {
	red := review.NewRedactor(nil).Redact
	return func(in intents.Intent) error {
		exp := in.ExpiresAt.UTC()
		ev := audit.Event{Kind: audit.KindIntent, UID: &uid, Session: red(id), Intent: in.ID, Scope: red(in.Scope),
			ExpiresAt: &exp, AnswerSource: "person", Note: note}
		if err := to.Append(context.Background(), ev); err != nil {
			return errors.Join(errUnrecorded, err)
		}
		return nil
	}
}
