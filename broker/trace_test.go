package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/sandboxd/sandboxd/grants"
)

// The decision's audit record says what the review did: the model's own
// verdict (also when a person decided after it), the model's failure as
// an event of its own, a person's override as an event of its own.
func TestAuditTrace(t *testing.T) {
	req := fsReq("write_file", "/opt/x")
	modelDeny := Decision{Outcome: Deny, RiskLevel: RiskHigh, UserAuthorization: AuthLow, Rationale: "model says no"}
	for _, tc := range []struct {
		name     string
		model    *fakeReviewer
		person   Person
		override bool
		kinds    []AuditKind // before the decision's
		source   Source
		model2   Outcome // the decision record's model verdict ("": none)
		fault    bool
	}{
		{name: "model denies", model: &fakeReviewer{d: modelDeny}, kinds: nil, source: SourceReviewer, model2: Deny},
		{name: "person overrules the model", model: &fakeReviewer{d: modelDeny},
			person: &deferringPerson{fakeHuman: fakeHuman{fakeReviewer: fakeReviewer{d: Decision{Outcome: Allow, Source: SourceHuman}}}},
			source: SourceHuman, model2: Deny},
		{name: "model fails", model: &fakeReviewer{err: errors.New("boom")}, kinds: []AuditKind{AuditReviewFault},
			source: SourceError, fault: true},
		{name: "override", model: &fakeReviewer{d: modelDeny}, override: true, kinds: []AuditKind{AuditOverrideUsed},
			source: SourceHuman},
	} {
		t.Run(tc.name, func(t *testing.T) {
			aud := &fakeAuditor{fail: map[AuditKind]bool{}}
			ov := &fakeOverrides{left: map[[32]byte]bool{}}
			if tc.override {
				ov.left[req.Hash()] = true
			}
			cfg := Config{Model: tc.model, Person: tc.person, Grants: grants.NewStore(), Auditor: aud, Overrides: ov}
			b := New(cfg)
			res := b.Decide(context.Background(), req)
			if res.Decision.Source != tc.source {
				t.Fatalf("decided by %s (%s)", res.Decision.Source, res.Decision.Rationale)
			}
			var before []AuditKind
			var dec *AuditEvent
			for i, ev := range aud.events {
				if ev.Kind == AuditDecision {
					dec = &aud.events[i]
					break
				}
				before = append(before, ev.Kind)
			}
			if dec == nil || len(before) != len(tc.kinds) {
				t.Fatalf("events %+v", aud.events)
			}
			for i := range before {
				if before[i] != tc.kinds[i] {
					t.Fatalf("events before the decision %v, want %v", before, tc.kinds)
				}
			}
			if got := dec.Model; (got == nil) != (tc.model2 == "") || (got != nil && got.Outcome != tc.model2) {
				t.Fatalf("the record's model verdict %+v, want %q", got, tc.model2)
			}
			if (dec.Fault != "") != tc.fault || dec.Override != tc.override {
				t.Fatalf("fault %q override %v", dec.Fault, dec.Override)
			}
			// A reviewer asked takes time; an override asks none.
			if (dec.Took > 0) != !tc.override {
				t.Fatalf("the review's time is %v", dec.Took)
			}
		})
	}
}
