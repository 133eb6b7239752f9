package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sandboxd/sandboxd/approvals"
	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/daemon"
	"github.com/sandboxd/sandboxd/kernelaudit"
	"github.com/sandboxd/sandboxd/landlock"
	"github.com/sandboxd/sandboxd/machine"
	"github.com/sandboxd/sandboxd/metrics"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/session"
	"golang.org/x/sys/unix"
)

const serveUsage = `Usage:
  sandboxd serve [--socket PATH] [--config FILE] [--question-wait DURATION] [--approvals-addr ADDR]
  sandboxd serve status [--socket PATH]

serve runs the daemon, as root, one per machine: its API listens on a
unix socket (default /run/sandboxd/sandboxd.sock) in a directory of
root's, and each caller's token file is written beside it, in tokens/.
Started by a systemd socket unit (deploy/sandboxd.socket), it serves the
socket systemd passes (LISTEN_FDS), which must be the --socket path.
The machine configuration (--config, default /etc/sandboxd/sandboxd.toml
when it exists) says who may connect, the machine policy every caller's
policy may only tighten, the operator's model reviewers and the limits
on each caller; it must be root's and writable by root only.
--approvals-addr serves the approvals page on a loopback address, where
a person answers their runs' questions in a browser; "sandboxd approve
--page" prints the one-time link that opens it.
status asks the daemon, as you, whether it is up and who it takes you
for; it checks the socket is root's first (SANDBOXD_SOCKET names another).
`

// serveCommand is `sandboxd serve` and `sandboxd serve status`.
func serveCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	status := len(args) > 0 && args[0] == "status"
	if status {
		args = args[1:]
	}
	fs := flag.NewFlagSet("sandboxd serve", flag.ContinueOnError)
	socket := fs.String("socket", "", "the daemon's socket (default: $SANDBOXD_SOCKET, else "+daemon.DefaultSocket+")")
	verbose := fs.Bool("v", false, "log what the daemon does to stderr")
	maxExecs := fs.Int("max-execs", 64, "the commands one user may run through the daemon at once")
	metricsAddr := fs.String("metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics, a loopback `address` such as 127.0.0.1:9464 (default: off)")
	questionWait := fs.Duration("question-wait", daemonQuestionWait, "how long a question for a person waits for an answer before it denies")
	approvalsAddr := fs.String("approvals-addr", "", "serve the approvals page at http://ADDR/, a loopback `address` such as 127.0.0.1:9465 (default: off)")
	config := fs.String("config", "", "the machine `configuration` (default: "+machine.DefaultPath+", when it exists)")
	readyN := fs.Int("ready-helpers", 4, "how many sandbox helpers the daemon keeps started in advance for the users it served last, in all (0: none)")
	keepAudit := fs.Bool("keep-audit-on", false, "keep kernel audit on between commands, not only while they run (faster by ~0.4 ms a command; see README)")
	var auditFlags auditServeFlags
	auditFlags.register(fs)
	if code, ok := parseFlags(fs, args, serveUsage, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(stderr, withFlags(serveUsage, fs), fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	*socket = cmp.Or(*socket, runcmd.DaemonSocket(getenv))
	log, fail := serveOutput(stderr, *verbose)
	if status {
		return serveStatus(ctx, *socket, stdout, fail)
	}
	mc, err := loadMachine(*config, log)
	if err != nil {
		return fail(err)
	}
	// Before the socket exists: what every run shares (the helper found
	// and logged, the audit log open) is in place before anyone can
	// connect.
	ready, hub, helper, releases, stopShared := runShared(*readyN, *keepAudit, log)
	defer stopShared()
	ma, err := openMachineAudit(ctx, auditFlags, version(), log)
	if err != nil {
		return fail(err)
	}
	defer ma.close(context.WithoutCancel(ctx), log)
	ln, tokens, made, err := serveListener(*socket, getenv)
	if err != nil {
		return fail(err)
	}
	if made {
		defer os.Remove(*socket)
	}
	commits, err := recoverAtStart(filepath.Dir(*socket), log)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go cancelOnStop(sigs, cancel)
	log.Info("sandboxd serve: listening", "socket", *socket, "from_service_manager", !made)
	m, attach, pageLn, reserved, err := loopbackServices(ctx, *metricsAddr, *approvalsAddr, ready, log)
	if err != nil {
		return fail(err)
	}
	sc := session.Config{Log: log, Models: modelFactory(log, m.Review), EvidenceReader: runcmd.EvidenceReader(),
		Hidden: []string{filepath.Dir(*socket)}, Auditor: m.Auditor(), Reserved: reserved,
		Commits: commits, CrashAt: runcmd.CrashAt(getenv), Ready: ready, Helper: helper.File, Audit: hub,
		Filters: sandbox.NewSharedFilters(), Releases: releases}
	dc := daemon.Config{Tokens: tokens, Commits: commits, Version: version(), Log: log, MaxExecs: *maxExecs,
		QuestionWait: *questionWait, Observer: m, AfterExec: ready.Refill}
	ma.wire(&sc, &dc, m.AuditWriteFailed)
	page, intents := approvalsPage(ctx, pageLn, ma, log)
	d, err := newDaemon(mc, fs, filepath.Dir(*socket), sc, dc, page)
	if err != nil {
		return fail(err)
	}
	attach(d)
	intents.set(d)
	if err := d.Serve(ctx, ln, 10*time.Second); err != nil && !errors.Is(err, net.ErrClosed) {
		return fail(err)
	}
	return 0
}

// serveOutput is the daemon's log on stderr (-v: everything) and how it
// fails: the public sentence, with -v the cause.
func serveOutput(stderr io.Writer, verbose bool) (*slog.Logger, func(error) int) {
	level := slog.LevelInfo
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})), func(err error) int {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(publicerr.Message(err, "sandboxd could not finish because of an internal error (run with -v to see it)")))
		if verbose {
			fmt.Fprintf(stderr, "sandboxd: cause: %s\n", esc(publicerr.Internal(err)))
		}
		return 1
	}
}

// serveListener is the daemon's socket: the one the service manager
// passed (socket activation: LISTEN_PID names this process), else one
// daemon.Listen makes, which made reports (the daemon removes it when it
// stops; systemd's socket outlives the daemon).
func serveListener(socket string, getenv func(string) string) (ln *net.UnixListener, tokens *daemon.Tokens, made bool, err error) {
	f, err := activated(getenv)
	if err != nil {
		return nil, nil, false, err
	}
	if f == nil {
		ln, tokens, err = daemon.Listen(socket, os.Geteuid())
		return ln, tokens, true, err
	}
	defer f.Close()
	ln, tokens, err = daemon.Inherited(f, socket, os.Geteuid())
	return ln, tokens, false, err
}

// listenFD is the first descriptor systemd passes (SD_LISTEN_FDS_START).
const listenFD = 3

// activated is the socket systemd passed this process (sd_listen_fds):
// nil when LISTEN_PID is unset or names another process (the variables
// were meant for a parent), an error when it passed other than exactly
// one, the .socket unit's one ListenStream=.
func activated(getenv func(string) string) (*os.File, error) {
	if pid := getenv("LISTEN_PID"); pid == "" || pid != strconv.Itoa(os.Getpid()) {
		return nil, nil
	}
	if n := getenv("LISTEN_FDS"); n != "1" {
		return nil, publicerr.New(fmt.Sprintf("the service manager passed %q sockets (LISTEN_FDS); sandboxd serve takes exactly one, its socket unit's ListenStream=", n))
	}
	return os.NewFile(listenFD, "LISTEN_FDS"), nil
}

// recoverAtStart undoes what a daemon killed before it (kill -9, a
// crash) left behind, before this one serves anyone: the kernel audit
// settings its runs changed, their cgroups, and the commits it had in
// flight, each finished or rolled back as its caller. It returns the
// record of commits in flight the new runner keeps, beside the socket.
func recoverAtStart(dir string, log *slog.Logger) (*daemon.Commits, error) {
	switch rec, err := kernelaudit.Recover(kernelaudit.DefaultDir); {
	case err != nil:
		log.Error("kernel audit: could not restore the settings a killed run left changed", "err", err)
	case rec.Restored:
		log.Info("kernel audit: restored the settings a killed run left changed", "enabled", rec.Enabled, "backlog_limit", rec.BacklogLimit)
	case rec.Holders > 0:
		log.Info("kernel audit: left on for the runs of other sandboxd processes; the last of them restores it", "holders", rec.Holders)
	}
	// The runs' processes died with it (each helper's parent-death
	// signal ends its pid namespace); their groups are left.
	sandbox.RemoveStaleGroups()
	commits, err := daemon.NewCommits(filepath.Join(dir, "commits"))
	if err != nil {
		return nil, publicerr.Wrap(err, "the daemon cannot keep its record of commits in flight")
	}
	if n := commits.Recover(log); n > 0 {
		log.Info("recovered the commits a killed daemon had in flight", "commits", n)
	}
	return commits, nil
}

// serveStatus is `sandboxd serve status`.
func serveStatus(ctx context.Context, socket string, stdout io.Writer, fail func(error) int) int {
	c, err := daemon.Connect(ctx, socket, os.Getuid())
	if err != nil {
		return fail(err)
	}
	var h struct {
		UID    int   `json:"uid"`
		GID    int   `json:"gid"`
		Groups []int `json:"groups"`
	}
	var v struct {
		Version string `json:"version"`
		API     string `json:"api"`
	}
	if err := c.Do(ctx, "GET", "/v1/health", nil, &h); err != nil {
		return fail(err)
	}
	if err := c.Do(ctx, "GET", "/v1/version", nil, &v); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "daemon: up at %s (%s, API %s)\nyou are: uid %d, gid %d, groups %v\n", esc(socket), esc(v.Version), esc(v.API), h.UID, h.GID, h.Groups)
	return 0
}

// runShared makes what the daemon's runs share: the pool of helpers
// started in advance, the separate helper binary, the reader of kernel
// audit, which keeps audit on from now until stop when keepAudit says so
// (otherwise only while a run needs it), and the runs' releases after
// their reports (the helpers' exits, the caches' locks, the cgroups),
// which stop waits for before it stops the pool and the reader.
func runShared(readyN int, keepAudit bool, log *slog.Logger) (*sandbox.ReadyHelpers, *sandbox.AuditHub, runcmd.HelperChoice, *sandbox.Releases, func()) {
	ready := sandbox.NewReadyHelpers(sandbox.ReadyOptions{Max: max(readyN, 0)}, log)
	helper := runcmd.FindHelper()
	log.Info("sandboxd serve: sandbox helper", "helper", helper.Describe())
	hub := sandbox.NewAuditHub(log)
	release := func() {}
	if keepAudit {
		if held, err := hub.Start(); err != nil {
			log.Warn("sandboxd serve: kernel audit cannot be kept on; it is on while commands run", "err", err)
		} else {
			log.Info("sandboxd serve: kernel audit stays on until the daemon stops (--keep-audit-on)")
			release = held.Stop
		}
	}
	releases := sandbox.NewReleases()
	return ready, hub, helper, releases, func() { releases.Close(); ready.Close(); release() }
}

// cancelOnStop cancels at the first SIGTERM or SIGINT.
func cancelOnStop(sigs <-chan os.Signal, cancel func()) {
	for s := range sigs {
		if s == unix.SIGTERM || s == unix.SIGINT {
			cancel()
			return
		}
	}
}

// newMetrics builds the daemon's metrics and serves them at addr (see
// serveMetrics); attach hands them the daemon once it exists. They may be
// scraped before: its gauges read 0 until then.
func newMetrics(ctx context.Context, addr string, ready *sandbox.ReadyHelpers, log *slog.Logger) (*metrics.Metrics, func(*daemon.Daemon), []netip.AddrPort, error) {
	var dp atomic.Pointer[daemon.Daemon]
	gauge := func(f func(*daemon.Daemon) int) func() int {
		return func() int {
			if d := dp.Load(); d != nil {
				return f(d)
			}
			return 0
		}
	}
	m := metrics.New(metrics.Build{Version: version(), LandlockABI: landlockABI()},
		metrics.Gauges{ActiveExecs: gauge((*daemon.Daemon).Active), PendingQuestions: gauge((*daemon.Daemon).Waiting),
			Ready: func() metrics.Ready {
				st := ready.Stats()
				return metrics.Ready{Ready: st.Ready, Hits: st.Hits, Misses: st.Misses, Expired: st.Expired, PrepareCPU: st.PrepareCPU}
			}})
	reserved, err := serveMetrics(ctx, addr, m, log)
	return m, func(d *daemon.Daemon) { dp.Store(d) }, reserved, err
}

// serveMetrics serves m at http://addr/metrics until ctx ends, when addr
// is set: a loopback address only (the metrics are the machine's, for
// its operator's Prometheus, never the network's). It returns the
// address, for the runs to be refused it whatever their rules say.
func serveMetrics(ctx context.Context, addr string, m *metrics.Metrics, log *slog.Logger) ([]netip.AddrPort, error) {
	if addr == "" {
		return nil, nil
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().IsLoopback() {
		return nil, publicerr.New(fmt.Sprintf("--metrics-addr %q is not a loopback address and port (such as 127.0.0.1:9464)", addr))
	}
	ln, err := net.Listen("tcp", ap.String())
	if err != nil {
		return nil, publicerr.Wrap(err, "the metrics address "+addr+" cannot be listened on")
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	context.AfterFunc(ctx, func() { srv.Close() })
	log.Info("sandboxd serve: metrics", "addr", ln.Addr().String())
	return []netip.AddrPort{netip.MustParseAddrPort(ln.Addr().String())}, nil
}

// landlockABI is the kernel's Landlock ABI (0 when it has none).
func landlockABI() int {
	sup, err := landlock.Probe()
	if err != nil {
		return 0
	}
	return sup.ABI
}

// loopbackServices starts the daemon's metrics (newMetrics) and listens
// for its approvals page (listenApprovals); reserved are their
// addresses, which no run may reach.
func loopbackServices(ctx context.Context, metricsAddr, approvalsAddr string, ready *sandbox.ReadyHelpers, log *slog.Logger) (*metrics.Metrics, func(*daemon.Daemon), net.Listener, []netip.AddrPort, error) {
	m, attach, reserved, err := newMetrics(ctx, metricsAddr, ready, log)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ln, reserved, err := listenApprovals(ctx, approvalsAddr, reserved)
	return m, attach, ln, reserved, err
}

// daemonQuestionWait is the default of serve --question-wait: 300 s,
// not an embedded run's 60, for the person may be at another terminal,
// or must switch to the approvals page, before they can answer.
const daemonQuestionWait = 300 * time.Second

// listenApprovals listens on addr for the approvals page, until ctx
// ends, when addr is set: a loopback address only (the page answers for
// the people on this machine, never the network's). Its address is added
// to reserved: no run may connect to it, whatever its rules say.
func listenApprovals(ctx context.Context, addr string, reserved []netip.AddrPort) (net.Listener, []netip.AddrPort, error) {
	if addr == "" {
		return nil, reserved, nil
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().IsLoopback() || ap.Port() == 0 {
		return nil, nil, publicerr.New(fmt.Sprintf("--approvals-addr %q is not a loopback address and port (such as 127.0.0.1:9465)", addr))
	}
	ln, err := net.Listen("tcp", ap.String())
	if err != nil {
		return nil, nil, publicerr.Wrap(err, "the approvals page's address "+addr+" cannot be listened on")
	}
	context.AfterFunc(ctx, func() { ln.Close() })
	return ln, append(reserved, netip.MustParseAddrPort(ln.Addr().String())), nil
}

// approvalsPage is how newDaemon makes the approvals page over the
// daemon's question queue and serves it on ln until ctx ends (nil when
// ln is: the page is off).
func approvalsPage(ctx context.Context, ln net.Listener, ma *machineAudit, log *slog.Logger) (func(*daemon.Questions) (daemon.Page, error), *pageIntents) {
	in := &pageIntents{}
	if ma != nil {
		in.log = ma
	}
	if ln == nil {
		return nil, in
	}
	return func(qs *daemon.Questions) (daemon.Page, error) {
		pg, err := approvals.New(approvals.Config{Addr: ln.Addr().String(), Queue: qs, Intents: in, Log: log})
		if err != nil {
			return nil, err
		}
		srv := &http.Server{Handler: pg.Handler(), ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10,
			ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
		go srv.Serve(ln)
		context.AfterFunc(ctx, func() { srv.Close() })
		log.Info("sandboxd serve: approvals page", "addr", ln.Addr().String())
		return pg, nil
	}, in
}
