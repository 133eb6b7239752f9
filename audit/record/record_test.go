package record

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/review"
)

// sink keeps what it is given.
type sink struct{ got []audit.Event }

func (s *sink) Append(_ context.Context, ev audit.Event) error {
	s.got = append(s.got, ev)
	return nil
}

const token = "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// Each broker event becomes its record, naming the caller, with every
// text the redactor's: the secret value given and a token by its shape.
func TestRecorder(t *testing.T) {
	secret := "hunter2-very-secret"
	req := grants.Request{Session: "uid 1000: s", Cwd: "/w/" + secret, Command: "curl -H 'Authorization: " + token + "' x",
		Surface: boundary.Filesystem, Operation: boundary.OpWriteFile, Path: "/w/out-" + secret}
	expires := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	model := broker.Decision{Outcome: broker.Deny, RiskLevel: broker.RiskHigh}
	for _, tc := range []struct {
		ev   broker.AuditEvent
		want audit.Event // the fields checked (uid, session, surface, operation always)
	}{
		{broker.AuditEvent{Kind: broker.AuditDecision, Request: req, Model: &model, Took: 1500 * time.Millisecond,
			Decision: broker.Decision{Outcome: broker.Allow, Source: broker.SourceHuman, RiskLevel: broker.RiskHigh,
				Rationale: "ok " + secret, Production: "prod"}},
			audit.Event{Kind: audit.KindDecision, Outcome: "allow", Source: "human", Risk: "high", ModelOutcome: "deny",
				ModelRisk: "high", AnswerSource: "person", ReviewMS: 1500, Production: "prod"}},
		{broker.AuditEvent{Kind: broker.AuditDecision, Request: req, Decision: broker.Decision{Outcome: broker.Allow, Source: broker.SourceIntent,
			RiskLevel: broker.RiskLow, UserAuthorization: broker.AuthHigh, Intent: "in-0a1b2c3d4e5f"}},
			audit.Event{Kind: audit.KindDecision, Outcome: "allow", Source: "intent", Risk: "low", Authorization: "high", Intent: "in-0a1b2c3d4e5f"}},
		{broker.AuditEvent{Kind: broker.AuditDecision, Request: req, Decision: broker.Decision{Outcome: broker.Deny, Source: broker.SourceClient}},
			audit.Event{Kind: audit.KindDecision, Outcome: "deny", Source: "client", AnswerSource: "client"}},
		{broker.AuditEvent{Kind: broker.AuditGrantIssued, Request: req, RequestHash: req.Hash(), ExpiresAt: expires},
			audit.Event{Kind: audit.KindGrantIssued, ExpiresAt: &expires}},
		{broker.AuditEvent{Kind: broker.AuditGrantConsumed, Request: req, RequestHash: req.Hash()},
			audit.Event{Kind: audit.KindGrantConsumed}},
		{broker.AuditEvent{Kind: broker.AuditGrantRejected, Request: req, Why: "the grant has expired", Expired: true},
			audit.Event{Kind: audit.KindGrantExpired, Why: "the grant has expired"}},
		{broker.AuditEvent{Kind: broker.AuditGrantRejected, Request: req, Why: "the grant is for another request"},
			audit.Event{Kind: audit.KindGrantRejected, Why: "the grant is for another request"}},
		{broker.AuditEvent{Kind: broker.AuditReviewFault, Request: req, Fault: "the model reviewer failed: timeout"},
			audit.Event{Kind: audit.KindReviewFault, Why: "the model reviewer failed: timeout"}},
		{broker.AuditEvent{Kind: broker.AuditOverrideUsed, Request: req},
			audit.Event{Kind: audit.KindOverride, Note: "used"}},
		{broker.AuditEvent{Kind: broker.AuditBreakerTripped, Request: req, Decision: broker.Decision{Rationale: "locked"}},
			audit.Event{Kind: audit.KindBreakerTripped, Rationale: "locked"}},
	} {
		t.Run(string(tc.ev.Kind), func(t *testing.T) {
			s := &sink{}
			r := Recorder{To: s, UID: 1000, Redact: review.NewRedactor([]string{secret}).Redact}
			if err := r.Record(context.Background(), tc.ev); err != nil {
				t.Fatal(err)
			}
			got := s.got[0]
			line, _ := json.Marshal(got)
			if strings.Contains(string(line), secret) || strings.Contains(string(line), token) {
				t.Fatalf("a secret reached the record: %s", line)
			}
			if got.UID == nil || *got.UID != 1000 || got.Surface != "filesystem" || got.Operation != "write_file" ||
				!strings.HasPrefix(got.Target, "/w/out-") || got.Session != req.Session {
				t.Fatalf("record %s", line)
			}
			want := tc.want
			want.UID, want.Session, want.Command, want.Cwd = got.UID, got.Session, got.Command, got.Cwd
			want.Surface, want.Operation, want.Target, want.RequestHash = got.Surface, got.Operation, got.Target, got.RequestHash
			if want.Rationale == "" {
				want.Rationale = got.Rationale
			}
			wl, _ := json.Marshal(want)
			if string(wl) != string(line) {
				t.Fatalf("record\n%s\nwant\n%s", line, wl)
			}
		})
	}
}

// A run's lost detections are a record of their own.
func TestRecorderLost(t *testing.T) {
	s := &sink{}
	if err := (Recorder{To: s, UID: 7}).Lost(context.Background(), "uid 7: s", "make", 3); err != nil {
		t.Fatal(err)
	}
	if g := s.got[0]; g.Kind != audit.KindLostDetections || g.Count != 3 || *g.UID != 7 || g.Command != "make" {
		t.Fatalf("%+v", g)
	}
}

// A run's command of any length costs each record at most maxCommand:
// thousands of boundaries of one huge command must not fill the disk.
func TestRecorderBoundsText(t *testing.T) {
	s := &sink{}
	big := strings.Repeat("é", 40<<10)
	req := grants.Request{Session: big, Cwd: "/w", Command: big, Surface: boundary.Filesystem,
		Operation: boundary.OpWriteFile, Path: "/w/x"}
	r := Recorder{To: s, UID: 1}
	r.Record(context.Background(), broker.AuditEvent{Kind: broker.AuditDecision, Request: req,
		Decision: broker.Decision{Outcome: broker.Deny, Rationale: big}})
	got := s.got[0]
	for name, v := range map[string]string{"command": got.Command, "session": got.Session, "rationale": got.Rationale} {
		if len(v) > maxCommand+len(audit.CutMark) || !strings.HasSuffix(v, audit.CutMark) || !utf8.ValidString(v) {
			t.Errorf("%s: %d bytes, not cut on a character", name, len(v))
		}
	}
	if got.Target != "/w/x" {
		t.Errorf("target %q", got.Target)
	}
}
