package metrics

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/session"
)

// Metrics are the daemon's metrics. Its methods are safe for concurrent
// use.
type Metrics struct {
	reg            *prometheus.Registry
	boundaries     *prometheus.CounterVec
	reviewDuration *prometheus.HistogramVec
	reviewTokens   *prometheus.CounterVec
	reviewFaults   *prometheus.CounterVec
	grants         *prometheus.CounterVec
	execs          *prometheus.CounterVec
	execDuration   prometheus.Histogram
	execSetup      prometheus.Histogram
	proxyConns     *prometheus.CounterVec
	proxyBytes     *prometheus.CounterVec
	breakerTrips   prometheus.Counter
	detectionLost  prometheus.Counter
	auditFailures  prometheus.Counter
}

// Build names the build, for sandboxd_build_info.
type Build struct {
	Version     string
	LandlockABI int
}

// Gauges are what the daemon counts now: its running execs and the
// questions waiting for a person.
type Gauges struct {
	ActiveExecs, PendingQuestions func() int
	// Ready reads the pool of sandbox helpers started in advance (nil:
	// the daemon keeps none).
	Ready func() Ready
}

// Ready are the figures of the daemon's pool of ready helpers.
type Ready struct {
	Ready                 int
	Hits, Misses, Expired uint64
	PrepareCPU            time.Duration
}

// New returns the metrics, registered on a registry of their own with
// the Go and process collectors.
func New(b Build, g Gauges) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	f := factory{m.reg}
	m.boundaries = f.counterVec("sandboxd_boundaries_total", "Boundaries decided, by surface, decision and who decided (quiet writes are not boundaries).", "surface", "decision", "source")
	m.reviewDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sandboxd_review_duration_seconds",
		Help:    "How long a reviewer took to answer one boundary, by reviewer (model, human, client).",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}}, []string{"reviewer"})
	m.reg.MustRegister(m.reviewDuration)
	m.reviewTokens = f.counterVec("sandboxd_review_tokens_total", "Tokens the model reviewer used, by direction (prompt, completion).", "direction")
	m.reviewFaults = f.counterVec("sandboxd_review_faults_total", "Model reviews that failed (a deny of source error), by class.", "class")
	m.grants = f.counterVec("sandboxd_grants_total", "Grant events: issued, consumed, expired, mismatched.", "event")
	m.execs = f.counterVec("sandboxd_exec_total", "Commands run through the daemon, by outcome (ok, failed, denied, timed_out, killed, sandboxd_error).", "outcome")
	m.execDuration = f.histogram("sandboxd_exec_duration_seconds", "How long an exec took, from its request to its report.", prometheus.ExponentialBuckets(0.01, 2.5, 12))
	m.execSetup = f.histogram("sandboxd_exec_setup_seconds", "How long the sandbox took to set up, per exec (its final attempt).", prometheus.ExponentialBuckets(0.001, 2, 12))
	m.proxyConns = f.counterVec("sandboxd_proxy_connections_total", "Connections the runs' egress proxies decided for a destination, by decision and way in (http, connect, socks, capture, capture-http).", "decision", "via")
	m.proxyBytes = f.counterVec("sandboxd_proxy_bytes_total", "Bytes through the runs' egress proxies, by direction (up: from the command, down: to it).", "direction")
	m.breakerTrips = f.counter("sandboxd_circuit_breaker_trips_total", "Sessions locked down by their circuit breaker.")
	m.auditFailures = f.counter("sandboxd_audit_write_failures_total", "Records the audit log could not take: each allow among them was denied (source error).")
	m.detectionLost = f.counter("sandboxd_detection_lost_total", "Denials the kernel counted that no run received, or runs whose count never came (each counted as one).")
	f.gauge("sandboxd_active_execs", "Commands running through the daemon now.", g.ActiveExecs)
	f.gauge("sandboxd_pending_questions", "Questions waiting for a person now.", g.PendingQuestions)
	readyMetrics(m.reg, g.Ready)
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sandboxd_build_info", Help: "The daemon's build: version and the kernel's Landlock ABI."}, []string{"version", "landlock_abi"})
	info.WithLabelValues(b.Version, strconv.Itoa(b.LandlockABI)).Set(1)
	m.reg.MustRegister(info, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// readyMetrics registers the figures of the pool of ready helpers, read
// when scraped.
func readyMetrics(reg *prometheus.Registry, read func() Ready) {
	if read == nil {
		read = func() Ready { return Ready{} }
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sandboxd_ready_helpers", Help: "Sandbox helpers started in advance and waiting for a command now."},
			func() float64 { return float64(read().Ready) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sandboxd_ready_helper_hits_total", Help: "Runs that found a sandbox helper started in advance."},
			func() float64 { return float64(read().Hits) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sandboxd_ready_helper_misses_total", Help: "Runs that started their own sandbox helper (none was ready for their caller)."},
			func() float64 { return float64(read().Misses) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sandboxd_ready_helper_expired_total", Help: "Sandbox helpers started in advance and stopped unused, idle for too long."},
			func() float64 { return float64(read().Expired) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sandboxd_ready_helper_prepare_cpu_seconds_total", Help: "CPU time spent starting sandbox helpers in advance (the daemon's fork and each helper's own until claimed or stopped)."},
			func() float64 { return read().PrepareCPU.Seconds() }))
}

// factory registers metrics on one registry.
type factory struct{ reg *prometheus.Registry }

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}

func (f factory) gauge(name, help string, value func() int) {
	if value == nil {
		value = func() int { return 0 }
	}
	f.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(value()) }))
}

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Auditor counts what the broker records: decisions, grant events and
// breaker trips. It never fails (a metric is not a record an allow
// waits on).
func (m *Metrics) Auditor() broker.Auditor { return auditor{m} }

type auditor struct{ m *Metrics }

func (a auditor) Record(_ context.Context, ev broker.AuditEvent) error {
	m := a.m
	switch ev.Kind {
	case broker.AuditDecision:
		d := ev.Decision
		if d.Source == broker.SourceQuiet {
			return nil
		}
		m.boundaries.WithLabelValues(surface(ev.Request.Surface), outcome(d.Outcome), source(d.Source)).Inc()
	case broker.AuditGrantIssued:
		m.grants.WithLabelValues("issued").Inc()
	case broker.AuditGrantConsumed:
		m.grants.WithLabelValues("consumed").Inc()
	case broker.AuditGrantRejected:
		if ev.Expired {
			m.grants.WithLabelValues("expired").Inc()
		} else {
			m.grants.WithLabelValues("mismatched").Inc()
		}
	case broker.AuditBreakerTripped:
		m.breakerTrips.Inc()
	}
	return nil
}

// Exec counts one exec from its report: its outcome, how long it took,
// its setup, the denials its detection lost, and its proxy's traffic.
func (m *Metrics) Exec(rep *session.Report, took time.Duration) {
	m.execDuration.Observe(took.Seconds())
	if rep == nil {
		m.execs.WithLabelValues("sandboxd_error").Inc()
		return
	}
	m.execs.WithLabelValues(execOutcome(rep)).Inc()
	if rep.SetupMS > 0 {
		m.execSetup.Observe(rep.SetupMS / 1000)
	}
	m.auditFailures.Add(float64(rep.AuditFailures))
	if d := rep.Detection; d != nil && d.Lost != 0 {
		m.detectionLost.Add(float64(max(d.Lost, 1)))
	}
	if e := rep.Egress; e != nil {
		for key, n := range e.ByVia {
			decision, via := splitConn(key)
			m.proxyConns.WithLabelValues(decision, via).Add(float64(n))
		}
		m.proxyBytes.WithLabelValues("up").Add(float64(e.BytesUp))
		m.proxyBytes.WithLabelValues("down").Add(float64(e.BytesDown))
	}
}

// AuditWriteFailed counts a record of the daemon's own (its start or
// stop) that the audit log could not take.
func (m *Metrics) AuditWriteFailed() { m.auditFailures.Inc() }

// execOutcome is an exec's outcome label.
func execOutcome(rep *session.Report) string {
	switch {
	case rep.ExitCode == session.ExitSandboxd && rep.Error != "":
		return "sandboxd_error"
	case rep.TimedOut:
		return "timed_out"
	case rep.Signal != 0:
		return "killed"
	case slices.ContainsFunc(rep.Boundaries, func(b session.Boundary) bool { return b.Decision == broker.Deny }):
		return "denied"
	case rep.ExitCode == 0:
		return "ok"
	}
	return "failed"
}

// The bounded label values: anything else is "other".
func surfaces() []string {
	return []string{string(boundary.Filesystem), string(boundary.Network), string(boundary.Command)}
}

func decisions() []string { return []string{string(broker.Allow), string(broker.Deny)} }

func sources() []broker.Source {
	return []broker.Source{broker.SourcePolicy, broker.SourceHardDeny, broker.SourceReviewer, broker.SourceHuman,
		broker.SourceClient, broker.SourcePage, broker.SourceGrant, broker.SourceCircuitBreaker, broker.SourceNoReviewer, broker.SourceError}
}

func vias() []string { return []string{"http", "connect", "socks", "capture", "capture-http"} }

func surface(s boundary.Surface) string { return bounded(string(s), surfaces()) }
func outcome(o broker.Outcome) string   { return bounded(string(o), decisions()) }
func source(s broker.Source) string {
	if slices.Contains(sources(), s) {
		return string(s)
	}
	return "other"
}

func bounded(v string, set []string) string {
	if slices.Contains(set, v) {
		return v
	}
	return "other"
}

// splitConn reads an egress count's key ("decision/via") into bounded
// labels.
func splitConn(key string) (decision, via string) {
	d, rest, _ := strings.Cut(key, "/")
	return bounded(d, decisions()), bounded(rest, vias())
}

// Answered counts a question's answer: how long a person (source human)
// at the terminal, a client relaying one (client) or a person on the
// approvals page (page) took.
func (m *Metrics) Answered(src broker.Source, took time.Duration) {
	who := "human"
	switch src {
	case broker.SourceClient:
		who = "client"
	case broker.SourcePage:
		who = "page"
	}
	m.reviewDuration.WithLabelValues(who).Observe(took.Seconds())
}

// Review counts one model review: how long it took, its tokens, and its
// fault's class when it failed.
func (m *Metrics) Review(o review.Observation) {
	m.reviewDuration.WithLabelValues("model").Observe(o.Took.Seconds())
	m.reviewTokens.WithLabelValues("prompt").Add(float64(o.TokensIn))
	m.reviewTokens.WithLabelValues("completion").Add(float64(o.TokensOut))
	if o.Fault != "" {
		m.reviewFaults.WithLabelValues(bounded(o.Fault, faultClasses())).Inc()
	}
}

// faultClasses are review.FaultClass's values.
func faultClasses() []string {
	return []string{"timeout", "auth", "refusal", "truncated", "oversized", "content_type", "empty",
		"http_status", "server", "connection", "malformed", "config", review.FaultCapped, review.FaultBudget, review.FaultOther}
}
