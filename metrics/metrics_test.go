package metrics

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/sandbox/detect"
	"github.com/sandboxd/sandboxd/session"
)

// scrape is the metrics' text exposition, as Prometheus reads it.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(w.Result().Body)
	return string(b)
}

// value is the sample of series (its name and labels as exposed), or
// "absent".
func value(text, series string) string {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return v
		}
	}
	return "absent"
}

func newMetrics() *Metrics {
	return New(Build{Version: "v-test", LandlockABI: 7}, Gauges{ActiveExecs: func() int { return 3 }, PendingQuestions: func() int { return 1 }})
}

// Counted by value: a boundary denied twice counts 2, a consumed grant
// moves issued and consumed by one each, an expired and a mismatched
// one each their own, a trip one; quiet writes are no boundaries.
func TestCountsByValue(t *testing.T) {
	m := newMetrics()
	a := m.Auditor()
	ctx := context.Background()
	req := grants.Request{Surface: boundary.Filesystem, Operation: boundary.OpWriteFile, Path: "/etc/x"}
	deny := broker.Decision{Outcome: broker.Deny, Source: broker.SourceNoReviewer}
	for _, ev := range []broker.AuditEvent{
		{Kind: broker.AuditDecision, Request: req, Decision: deny},
		{Kind: broker.AuditDecision, Request: req, Decision: deny},
		{Kind: broker.AuditDecision, Request: req, Decision: broker.Decision{Outcome: broker.Deny, Source: broker.SourceQuiet}},
		{Kind: broker.AuditDecision, Request: grants.Request{Surface: boundary.Network}, Decision: broker.Decision{Outcome: broker.Allow, Source: broker.SourceReviewer}},
		{Kind: broker.AuditGrantIssued}, {Kind: broker.AuditGrantConsumed},
		{Kind: broker.AuditGrantRejected, Expired: true}, {Kind: broker.AuditGrantRejected},
		{Kind: broker.AuditBreakerTripped},
	} {
		if err := a.Record(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	m.Exec(&session.Report{ExitCode: 0, SetupMS: 12, Detection: &detect.Detection{Lost: 2},
		Egress: &session.Egress{ByVia: map[string]int64{"allow/connect": 3, "deny/capture": 1}, BytesUp: 100, BytesDown: 900}}, 50*time.Millisecond)
	m.Exec(&session.Report{ExitCode: 1, Boundaries: []session.Boundary{{Decision: broker.Deny}}}, time.Second)
	m.Exec(&session.Report{ExitCode: 125, Error: "no"}, time.Millisecond)
	m.Review(review.Observation{Took: 2 * time.Second, TokensIn: 900, TokensOut: 40})
	m.Review(review.Observation{Took: time.Second, Fault: "timeout"})
	m.Answered(broker.SourceClient, 3*time.Second)
	text := scrape(t, m)
	for series, want := range map[string]string{
		`sandboxd_boundaries_total{decision="deny",source="no-reviewer",surface="filesystem"}`: "2",
		`sandboxd_boundaries_total{decision="allow",source="reviewer",surface="network"}`:      "1",
		`sandboxd_boundaries_total{decision="deny",source="quiet",surface="filesystem"}`:       "absent",
		`sandboxd_grants_total{event="issued"}`:                                                "1",
		`sandboxd_grants_total{event="consumed"}`:                                              "1",
		`sandboxd_grants_total{event="expired"}`:                                               "1",
		`sandboxd_grants_total{event="mismatched"}`:                                            "1",
		`sandboxd_circuit_breaker_trips_total`:                                                 "1",
		`sandboxd_exec_total{outcome="ok"}`:                                                    "1",
		`sandboxd_exec_total{outcome="denied"}`:                                                "1",
		`sandboxd_exec_total{outcome="sandboxd_error"}`:                                        "1",
		`sandboxd_exec_duration_seconds_count`:                                                 "3",
		`sandboxd_exec_setup_seconds_count`:                                                    "1",
		`sandboxd_detection_lost_total`:                                                        "2",
		`sandboxd_proxy_connections_total{decision="allow",via="connect"}`:                     "3",
		`sandboxd_proxy_connections_total{decision="deny",via="capture"}`:                      "1",
		`sandboxd_proxy_bytes_total{direction="up"}`:                                           "100",
		`sandboxd_proxy_bytes_total{direction="down"}`:                                         "900",
		`sandboxd_review_duration_seconds_count{reviewer="model"}`:                             "2",
		`sandboxd_review_duration_seconds_count{reviewer="client"}`:                            "1",
		`sandboxd_review_tokens_total{direction="prompt"}`:                                     "900",
		`sandboxd_review_tokens_total{direction="completion"}`:                                 "40",
		`sandboxd_review_faults_total{class="timeout"}`:                                        "1",
		`sandboxd_active_execs`:                                                                "3",
		`sandboxd_pending_questions`:                                                           "1",
		`sandboxd_build_info{landlock_abi="7",version="v-test"}`:                               "1",
	} {
		if got := value(text, series); got != want {
			t.Errorf("%s = %s, want %s", series, got, want)
		}
	}
	for _, family := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(text, "\n"+family+" ") {
			t.Errorf("%s is not exposed", family)
		}
	}
}

// However many distinct paths, hosts, sources and fault texts come in,
// the number of series stays what the bounded label sets allow.
func TestLabelsAreBounded(t *testing.T) {
	m := newMetrics()
	a := m.Auditor()
	series := func() int { return strings.Count(scrape(t, m), "\nsandboxd_") }
	feed := func(i int) {
		a.Record(context.Background(), broker.AuditEvent{Kind: broker.AuditDecision,
			Request:  grants.Request{Surface: boundary.Surface(fmt.Sprintf("s%d", i%3)), Path: fmt.Sprintf("/p/%d", i), Session: fmt.Sprint(i)},
			Decision: broker.Decision{Outcome: broker.Outcome(fmt.Sprintf("o%d", i%2)), Source: broker.Source(fmt.Sprintf("src%d", i))}})
		m.Exec(&session.Report{ExitCode: i % 256, Egress: &session.Egress{ByVia: map[string]int64{fmt.Sprintf("allow/host%d.example:443", i): 1}}}, time.Millisecond)
		m.Review(review.Observation{Fault: fmt.Sprintf("class %d", i)})
	}
	for i := range 10 { // every value of the bounded sets these reach
		feed(i)
	}
	before := series()
	for i := 10; i < 1010; i++ {
		feed(i)
	}
	if after := series(); after != before {
		t.Fatalf("%d series after 1000 distinct inputs, %d after one", after, before)
	}
}
