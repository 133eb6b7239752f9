package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/report"
	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/suggest"
)

const auditUsage = `Usage:
  sandboxd audit verify [--key FILE] [FILE...]   check a log's chain and signed checkpoints
  sandboxd audit show [--days N] [--json]         the records about you
  sandboxd audit report [--days N] [--json] [--min-allows N] [--policy FILE]
  sandboxd audit export [--days N] [FILE...]      the records as JSON lines, for a log shipper

Without FILEs each reads the logs that hold your records: your own (runs
here, in ~/.local/state/sandboxd/audit) and, when the daemon is up, what
the daemon's log holds about you (every other user's record is a bare
link of the chain there, so you can check the chain without reading it).
--daemon reads only the daemon's, --no-daemon only your own. verify
prints each log's path and record count, and names the first record
that is not as it was written. report counts the decisions, the
reviewers' allows, how often a person overrode the model, and suggests
rules (TOML for your own policy, never applied) for boundaries allowed
at least --min-allows times and never denied.
`

// auditFlags are the flags every audit subcommand takes.
type auditFlags struct {
	days             int
	json             bool
	daemon, noDaemon bool
	key, policy      string
	minAllows        int
}

// auditCommand is `sandboxd audit verify|show|report|export`.
func auditCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		return usageError(stderr, auditUsage, "")
	case isHelp(args[0]):
		fmt.Fprint(stdout, auditUsage)
		return 0
	}
	verb := args[0]
	defDays := map[string]int{"verify": 0, "show": 7, "report": 30, "export": 0}
	d, known := defDays[verb]
	if !known {
		return usageError(stderr, auditUsage, fmt.Sprintf("unknown audit command %q", verb))
	}
	var f auditFlags
	fs := flag.NewFlagSet("sandboxd audit "+verb, flag.ContinueOnError)
	fs.IntVar(&f.days, "days", d, "only records of the last N days (0: all)")
	fs.BoolVar(&f.json, "json", false, "print JSON")
	fs.BoolVar(&f.daemon, "daemon", false, "read only the daemon's log")
	fs.BoolVar(&f.noDaemon, "no-daemon", false, "read only your own log")
	fs.StringVar(&f.key, "key", "", "the public key FILEs are checked with (default: audit.pub beside the first)")
	fs.StringVar(&f.policy, "policy", "", "your policy file, the suggested rules' home (default: ~/.config/sandboxd/policy.toml)")
	fs.IntVar(&f.minAllows, "min-allows", report.DefaultMinAllows, "suggest a rule for a boundary allowed at least this often and never denied")
	if code, ok := parseFlags(fs, args[1:], auditUsage, stdout, stderr); !ok {
		return code
	}
	if f.daemon && f.noDaemon {
		return usageError(stderr, auditUsage, "--daemon and --no-daemon contradict each other; give one")
	}
	if fs.NArg() > 0 && verb != "verify" && verb != "export" {
		return usageError(stderr, auditUsage, "audit "+verb+" takes no file")
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(publicerr.Message(err, "the audit log could not be read")))
		return 1
	}
	logs, cleanup, err := auditLogs(ctx, fs.Args(), f, getenv, stderr)
	defer cleanup()
	if err != nil {
		return fail(err)
	}
	if len(logs) == 0 {
		fmt.Fprintln(stdout, "no audit log holds records about you yet")
		return 0
	}
	switch verb {
	case "verify":
		return auditVerify(ctx, logs, stdout, stderr)
	case "show":
		return auditShow(ctx, logs, f, stdout, fail)
	case "export":
		return auditExport(ctx, logs, f, stdout, fail)
	}
	return auditReport(ctx, logs, f, getenv, stdout, fail)
}

// auditLog is one log a subcommand reads: its files (a rotation set, or
// the daemon's view of its log), the key its checkpoints must be signed
// with, and what to call it.
type auditLog struct {
	name  string
	files []string
	pub   ed25519.PublicKey
	// uid, when set, is whose records are shown (the view's own).
	uid *int
	// view: the files are the daemon's view, with other users' records
	// as bare links (audit.VerifyView).
	view bool
}

// auditLogs finds the logs: FILEs as given, else the caller's own log
// and the daemon's view of its log, as the flags say.
func auditLogs(ctx context.Context, files []string, f auditFlags, getenv func(string) string, stderr io.Writer) ([]auditLog, func(), error) {
	none := func() {}
	if len(files) > 0 {
		key := f.key
		if key == "" {
			key = filepath.Join(filepath.Dir(files[0]), audit.PublicKeyName)
		}
		pub, err := audit.ReadPublicKey(key)
		if err != nil {
			return nil, none, publicerr.Errorf(err, "the public key %s cannot be read", key)
		}
		return []auditLog{{name: files[0], files: files, pub: pub}}, none, nil
	}
	var logs []auditLog
	if !f.daemon {
		caller, err := runcmd.CallerOf(getenv)
		if err != nil {
			return nil, none, err
		}
		l, ok, err := readOwnAuditLog(caller.Layout().Audit())
		if err != nil {
			return nil, none, err
		}
		if ok {
			uid := caller.UID
			l.uid = &uid
			logs = append(logs, l)
		}
	}
	if f.noDaemon {
		return logs, none, nil
	}
	l, cleanup, ok, err := daemonAuditLog(ctx, getenv, f.daemon)
	switch {
	case err != nil && f.daemon:
		return nil, cleanup, err
	case err != nil:
		fmt.Fprintf(stderr, "sandboxd: warning: the daemon's log is not read: %s\n", esc(session.Public(err)))
	case ok:
		logs = append(logs, l)
	}
	return logs, cleanup, nil
}

// readOwnAuditLog is the caller's own log in dir, if it has one.
func readOwnAuditLog(dir string) (auditLog, bool, error) {
	files, err := audit.Files(dir)
	if errors.Is(err, iofs.ErrNotExist) || err == nil && len(files) == 0 {
		if _, herr := os.Lstat(filepath.Join(dir, audit.HeadName)); herr == nil {
			// A signed head names records that are gone.
			return auditLog{}, false, publicerr.New("your audit log in " + dir + " has a signed head but no file: its records were removed")
		}
		return auditLog{}, false, nil
	}
	if err != nil {
		return auditLog{}, false, publicerr.Errorf(err, "your audit log in %s cannot be read", dir)
	}
	pub, err := audit.ReadPublicKey(filepath.Join(dir, audit.PublicKeyName))
	if err != nil {
		return auditLog{}, false, publicerr.Errorf(err, "your audit log's public key in %s cannot be read", dir)
	}
	return auditLog{name: files[len(files)-1], files: files, pub: pub}, true, nil
}

// daemonAuditLog is the daemon's view of its log for the caller, kept in
// a file of the caller's own until the subcommand ends. The key it is
// checked with is read from the file the daemon names, which must be
// root's: a view checked with a key the daemon sent would prove nothing.
func daemonAuditLog(ctx context.Context, getenv func(string) string, required bool) (auditLog, func(), bool, error) {
	none := func() {}
	socket := runcmd.DaemonSocket(getenv)
	if _, err := os.Lstat(socket); err != nil && !required {
		return auditLog{}, none, false, nil
	}
	c, err := daemon.Connect(ctx, socket, os.Getuid())
	if err != nil {
		return auditLog{}, none, false, err
	}
	// A directory of the caller's own: the verifier reads an audit.head
	// beside the file, which nobody else may put there.
	dir, err := os.MkdirTemp("", "sandboxd-audit-view-")
	if err != nil {
		return auditLog{}, none, false, publicerr.Wrap(err, "a temporary file for the daemon's log cannot be made")
	}
	cleanup := func() { os.RemoveAll(dir) }
	// Named as a live log, with the head beside it: the verifier then
	// checks the view ends no earlier than the head's checkpoint.
	tmp, err := os.Create(filepath.Join(dir, audit.LogName))
	if err != nil {
		return auditLog{}, cleanup, false, publicerr.Wrap(err, "a temporary file for the daemon's log cannot be made")
	}
	defer tmp.Close()
	logPath, keyPath, head, err := c.AuditView(ctx, tmp)
	if err != nil {
		return auditLog{}, cleanup, false, err
	}
	if len(head) > 0 {
		if err := os.WriteFile(filepath.Join(dir, audit.HeadName), head, 0o600); err != nil {
			return auditLog{}, cleanup, false, publicerr.Wrap(err, "a temporary file for the daemon's log cannot be made")
		}
	}
	if err := daemon.TrustedFile(keyPath); err != nil {
		return auditLog{}, cleanup, false, err
	}
	pub, err := audit.ReadPublicKey(keyPath)
	if err != nil {
		return auditLog{}, cleanup, false, publicerr.Errorf(err, "the daemon's public key %s cannot be read", keyPath)
	}
	uid := os.Getuid()
	return auditLog{name: logPath + " (the daemon's, as you may see it)", files: []string{tmp.Name()}, pub: pub, uid: &uid, view: true}, cleanup, true, nil
}

// auditVerify checks each log and says what it found.
func auditVerify(ctx context.Context, logs []auditLog, stdout, stderr io.Writer) int {
	code := 0
	for _, l := range logs {
		verify := audit.Verify
		if l.view {
			verify = audit.VerifyView
		}
		sum, err := verify(ctx, l.files, l.pub)
		var p *audit.Problem
		switch {
		case errors.As(err, &p):
			fmt.Fprintf(stdout, "%s: NOT VERIFIED: %s\n", esc(l.name), esc(p.Error()))
			code = 1
		case err != nil:
			fmt.Fprintf(stderr, "sandboxd: %s: %s\n", esc(l.name), esc(publicerr.Message(err, "the log could not be read")))
			code = 1
		default:
			files := "1 file"
			if sum.Files != 1 {
				files = fmt.Sprintf("%d files", sum.Files)
			}
			fmt.Fprintf(stdout, "%s: verified: %d records in %s, seq %d to %d, signed through seq %d\n",
				esc(l.name), sum.Records, files, sum.FirstSeq, sum.LastSeq, sum.LastSigned)
		}
	}
	return code
}

// since is the oldest time a subcommand reads (zero: all).
func (f auditFlags) since() time.Time {
	if f.days <= 0 {
		return time.Time{}
	}
	return time.Now().Add(-time.Duration(f.days) * 24 * time.Hour)
}

// mine reports whether r is a record the subcommand shows from l: an
// event (not a stub, not the log's own), recent enough, about the
// caller where l is a view of the caller's.
func (f auditFlags) mine(l auditLog, r audit.Record) bool {
	if r.Kind == "" || r.Time.Before(f.since()) {
		return false
	}
	return l.uid == nil || r.UID != nil && *r.UID == *l.uid
}

// auditShow prints the caller's records, one a line.
func auditShow(ctx context.Context, logs []auditLog, f auditFlags, stdout io.Writer, fail func(error) int) int {
	enc := json.NewEncoder(stdout)
	for _, l := range logs {
		if !f.json {
			fmt.Fprintf(stdout, "# %s\n", esc(l.name))
		}
		err := audit.Scan(ctx, l.files, func(r audit.Record) error {
			if !f.mine(l, r) || !r.IsEvent() {
				return nil
			}
			if f.json {
				return enc.Encode(r)
			}
			_, err := fmt.Fprintln(stdout, esc(audit.Line(r)))
			return err
		})
		if err != nil {
			return fail(err)
		}
	}
	return 0
}

// auditExport writes the records as JSON lines: each line one object
// with its time, as log shippers (Vector, Fluent Bit, Loki, Elastic)
// take them; a view's links to other users' records are left out.
func auditExport(ctx context.Context, logs []auditLog, f auditFlags, stdout io.Writer, fail func(error) int) int {
	enc := json.NewEncoder(stdout)
	for _, l := range logs {
		err := audit.Scan(ctx, l.files, func(r audit.Record) error {
			if !f.mine(l, r) {
				return nil
			}
			return enc.Encode(r)
		})
		if err != nil {
			return fail(err)
		}
	}
	return 0
}

// auditReport reports on the caller's records.
func auditReport(ctx context.Context, logs []auditLog, f auditFlags, getenv func(string) string, stdout io.Writer, fail func(error) int) int {
	caller, err := runcmd.CallerOf(getenv)
	if err != nil {
		return fail(err)
	}
	runner := session.New(session.Config{Log: slog.New(slog.DiscardHandler)})
	cache := map[string]suggest.BeforeAllow{}
	before := func(cwd string) suggest.BeforeAllow {
		if b, ok := cache[cwd]; ok {
			return b
		}
		b, err := runner.BeforeAllow(ctx, caller, f.policy, cwd)
		if err != nil {
			b = nil // no rule is offered without the hard denies checked
		}
		cache[cwd] = b
		return b
	}
	for _, l := range logs {
		rep, err := report.Build(ctx, l.files, report.Options{Since: f.since(), UID: l.uid, MinAllows: f.minAllows,
			Home: caller.Home, PolicyFile: caller.PolicyFile(f.policy), Before: before})
		if err != nil {
			return fail(err)
		}
		if f.json {
			if err := json.NewEncoder(stdout).Encode(struct {
				Log string `json:"log"`
				report.Report
			}{l.name, rep}); err != nil {
				return fail(err)
			}
			continue
		}
		fmt.Fprintf(stdout, "# %s\n", esc(l.name))
		if err := rep.WriteText(stdout); err != nil {
			return fail(err)
		}
	}
	return 0
}
