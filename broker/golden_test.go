package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/internal/golden"
)

// Every rationale the broker itself writes, one per way a request can
// end: these sentences reach the agent, the model and the person.
func TestRationalesGolden(t *testing.T) {
	var buf bytes.Buffer
	allowAll := &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh}}
	locked := NewBreaker(t.TempDir())
	for i := 0; i < breakerConsecutive; i++ {
		locked.Record("s", true)
	}
	rules := Rules{
		Deny:  []Rule{mustRule(t, "fs * /srv/denied/**")},
		Allow: []Rule{mustRule(t, "fs write_file /opt/ok")},
	}
	hard := HardDenies{Secrets: []string{"/home/u/.ssh"}, Own: []string{"/home/u/.local/state/sandboxd"}, Home: "/home/u", Workspace: "/w"}
	notGrantable := func(grants.Request) (bool, string) { return false, "the sandbox cannot grant this exactly" }
	for _, tc := range []struct {
		name string
		cfg  Config
		req  grants.Request
	}{
		{"malformed surface", Config{}, grants.Request{Session: "s", Surface: "dbus", Operation: "call"}},
		{"malformed operation", Config{}, grants.Request{Session: "s", Surface: boundary.Filesystem, Operation: "frob", Path: "/x"}},
		{"incomplete", Config{}, grants.Request{Session: "s", Surface: boundary.Network, Operation: boundary.OpConnect}},
		{"policy deny", Config{Rules: rules}, fsReq(boundary.OpReadFile, "/srv/denied/x")},
		{"policy allow", Config{Rules: rules}, fsReq(boundary.OpWriteFile, "/opt/ok")},
		{"secret", Config{Hard: hard}, fsReq(boundary.OpReadFile, "/home/u/.ssh/id_rsa")},
		{"own state", Config{Hard: hard}, fsReq(boundary.OpWriteFile, "/home/u/.local/state/sandboxd/x")},
		{"remove home", Config{Hard: hard}, fsReq(boundary.OpRemoveDir, "/home/u")},
		{"persistence", Config{Hard: hard}, fsReq(boundary.OpMakeReg, "/w/.git/hooks/pre-commit")},
		{"metadata", Config{}, netReq("169.254.169.254:80")},
		{"not grantable", Config{Grantable: notGrantable}, fsReq(boundary.OpChmod, "/opt/x")},
		{"no reviewer", Config{}, fsReq(boundary.OpWriteFile, "/opt/x")},
		{"locked", Config{Breaker: locked, Model: allowAll}, fsReq(boundary.OpWriteFile, "/opt/x")},
		{"model failed", Config{Model: &fakeReviewer{err: errors.New("dial tcp: refused")}}, fsReq(boundary.OpWriteFile, "/opt/x")},
		{"person away", Config{Person: &fakeHuman{away: true}}, fsReq(boundary.OpWriteFile, "/opt/x")},
		{"person failed", Config{Person: &fakeHuman{fakeReviewer: fakeReviewer{err: errors.New("EIO")}}}, fsReq(boundary.OpWriteFile, "/opt/x")},
		{"critical", Config{Model: &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskCritical}}}, fsReq(boundary.OpWriteFile, "/opt/x")},
		{"high unauthorized", Config{Model: &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskHigh, UserAuthorization: AuthLow}}}, fsReq(boundary.OpWriteFile, "/opt/x")},
		{"no risk level", Config{Model: &fakeReviewer{d: Decision{Outcome: Allow}}}, fsReq(boundary.OpWriteFile, "/opt/x")},
		{"unknown risk level", Config{Model: &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: "extreme"}}}, fsReq(boundary.OpWriteFile, "/opt/x")},
		{"unclean path", Config{}, fsReq(boundary.OpWriteFile, "/w/../etc/passwd")},
		{"decision unrecorded", Config{Rules: rules, Auditor: &fakeAuditor{fail: map[AuditKind]bool{AuditDecision: true}}}, fsReq(boundary.OpWriteFile, "/opt/ok")},
		{"grant unrecorded", Config{Rules: rules, Auditor: &fakeAuditor{fail: map[AuditKind]bool{AuditGrantIssued: true}}}, fsReq(boundary.OpWriteFile, "/opt/ok")},
	} {
		tc.cfg.Grants = grants.NewStore()
		d := New(tc.cfg).Decide(context.Background(), tc.req).Decision
		fmt.Fprintf(&buf, "%s: %s/%s: %s\n", tc.name, d.Outcome, d.Source, d.Rationale)
	}
	golden.Check(t, "rationales.golden", buf.Bytes())
}
