package broker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/grants"
)

// fakeIntents holds intents by session.
type fakeIntents struct {
	by  map[string][]Intent
	err error
}

func (f *fakeIntents) Intents(_ context.Context, session string) ([]Intent, error) {
	return f.by[session], f.err
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// intentOf is a live intent for scope, bound to its text.
func intentOf(id, scope string) Intent {
	return Intent{ID: id, Scope: scope, Hash: hashOf(scope), ExpiresAt: time.Now().Add(time.Hour)}
}

func intentBroker(t *testing.T, ins *fakeIntents, rules Rules, model Reviewer, breaker *Breaker) *Broker {
	t.Helper()
	return New(Config{Rules: rules, Model: model, Grants: grants.NewStore(), Intents: ins, Breaker: breaker,
		Production: Production{Markers: []string{"prod"}},
		Hard: HardDenies{Secrets: []string{"/home/u/.ssh"}, Own: []string{"/home/u/.local/state/sandboxd"},
			Home: "/home/u", Workspace: "/w", Startup: fakeStartup{}}})
}

// An intent allows exactly what its scope names and nothing broader:
// the named file for the named operations, on both its names; a subtree
// below its directory; a destination below its name on its port. Every
// step before the allow rules still decides first.
func TestIntentCoversExactlyItsScope(t *testing.T) {
	link := fsReq(boundary.OpWriteFile, "/home/u/.config/app/settings.json")
	link.ResolvedPath = "/etc/passwd"
	other := fsReq(boundary.OpWriteFile, "/home/u/.config/app/settings.json")
	other.Session = "s2"
	for _, tc := range []struct {
		name  string
		scope string
		req   grants.Request
		want  Source
	}{
		{"the file", "fs write /home/u/.config/app/settings.json", fsReq(boundary.OpWriteFile, "/home/u/.config/app/settings.json"), SourceIntent},
		{"created", "fs write /home/u/.config/app/settings.json", fsReq(boundary.OpMakeReg, "/home/u/.config/app/settings.json"), SourceIntent},
		{"a sibling", "fs write /home/u/.config/app/settings.json", fsReq(boundary.OpWriteFile, "/home/u/.config/app/other.json"), SourceReviewer},
		{"a file below it", "fs write /home/u/.config/app/settings.json", fsReq(boundary.OpMakeReg, "/home/u/.config/app/settings.json/x"), SourceReviewer},
		{"another operation", "fs write_file /home/u/.config/app/settings.json", fsReq(boundary.OpTruncate, "/home/u/.config/app/settings.json"), SourceReviewer},
		{"read is not write", "fs write /home/u/.config/app/settings.json", fsReq(boundary.OpReadFile, "/home/u/.config/app/settings.json"), SourceReviewer},
		{"a symlink to elsewhere", "fs write /home/u/.config/app/settings.json", link, SourceReviewer},
		{"another session", "fs write /home/u/.config/app/settings.json", other, SourceReviewer},
		{"a subtree", "fs read /data/sets/**", fsReq(boundary.OpReadFile, "/data/sets/a/b.csv"), SourceIntent},
		{"beside the subtree", "fs read /data/sets/**", fsReq(boundary.OpReadFile, "/data/setsx/a"), SourceReviewer},
		{"a subtree holds no secret", "fs read /home/u/**", fsReq(boundary.OpReadFile, "/home/u/.ssh/id_rsa"), SourceHardDeny},
		{"a start-up location", "fs write /home/u/.bashrc", fsReq(boundary.OpWriteFile, "/home/u/.bashrc"), SourceHardDeny},
		{"sandboxd's own state", "fs write /home/u/.local/state/sandboxd/x", fsReq(boundary.OpWriteFile, "/home/u/.local/state/sandboxd/x"), SourceHardDeny},
		{"a persistence path", "fs write /w/.git/config", fsReq(boundary.OpWriteFile, "/w/.git/config"), SourceHardDeny},
		{"below the name", "net connect *.npmjs.org:443", netReq("registry.npmjs.org:443"), SourceIntent},
		{"the name itself", "net connect *.npmjs.org:443", netReq("npmjs.org:443"), SourceReviewer},
		{"another port", "net connect *.npmjs.org:443", netReq("registry.npmjs.org:80"), SourceReviewer},
		{"metadata", "net connect 169.254.169.254:80", netReq("169.254.169.254:80"), SourceHardDeny},
		{"not public", "net connect 10.0.0.1:443", netReq("10.0.0.1:443"), SourceHardDeny},
		{"a production target", "net connect *.example.com:443", netReq("prod.example.com:443"), SourceNoReviewer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh}}
			ins := &fakeIntents{by: map[string][]Intent{"s": {intentOf("in-1", tc.scope)}}}
			res := intentBroker(t, ins, Rules{}, model, nil).Decide(context.Background(), tc.req)
			if res.Decision.Source != tc.want {
				t.Fatalf("%+v, want source %s", res.Decision, tc.want)
			}
			if tc.want == SourceIntent {
				if res.Decision.Outcome != Allow || res.Decision.Intent != "in-1" || res.Grant == nil || model.calls != 0 {
					t.Fatalf("%+v grant %v, model asked %d times", res.Decision, res.Grant, model.calls)
				}
			} else if res.Decision.Intent != "" {
				t.Fatalf("an intent is named on %+v", res.Decision)
			}
		})
	}
}

// An ask rule still asks, a deny rule still denies, and an allow rule
// decides first (as the policy's).
func TestIntentAfterRules(t *testing.T) {
	const scope = "fs write /opt/app/conf"
	req := fsReq(boundary.OpWriteFile, "/opt/app/conf")
	for _, tc := range []struct {
		name  string
		rules Rules
		want  Source
		out   Outcome
	}{
		{"ask", Rules{Ask: []Rule{mustRule(t, "fs write /opt/**")}}, SourceReviewer, Deny},
		{"deny", Rules{Deny: []Rule{mustRule(t, "fs * /opt/app/**")}}, SourcePolicy, Deny},
		{"allow", Rules{Allow: []Rule{mustRule(t, "fs write_file /opt/app/conf")}}, SourcePolicy, Allow},
		{"none", Rules{}, SourceIntent, Allow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakeReviewer{d: Decision{Outcome: Deny, RiskLevel: RiskMedium}}
			ins := &fakeIntents{by: map[string][]Intent{"s": {intentOf("in-1", scope)}}}
			d := intentBroker(t, ins, tc.rules, model, nil).Decide(context.Background(), req).Decision
			if d.Source != tc.want || d.Outcome != tc.out {
				t.Fatalf("%+v, want %s by %s", d, tc.out, tc.want)
			}
		})
	}
}

// An expired intent, one whose text is not what was approved, one that
// no longer parses, and a store that fails cover nothing.
func TestIntentVoid(t *testing.T) {
	const scope = "fs write /opt/app/conf"
	req := fsReq(boundary.OpWriteFile, "/opt/app/conf")
	expired := intentOf("in-1", scope)
	expired.ExpiresAt = time.Now().Add(-time.Second)
	widened := intentOf("in-2", scope)
	widened.Scope = "fs write /opt/**"
	broken := Intent{ID: "in-3", Scope: "fs write opt", Hash: hashOf("fs write opt"), ExpiresAt: time.Now().Add(time.Hour)}
	for _, tc := range []struct {
		name string
		ins  *fakeIntents
	}{
		{"expired", &fakeIntents{by: map[string][]Intent{"s": {expired}}}},
		{"widened", &fakeIntents{by: map[string][]Intent{"s": {widened}}}},
		{"unparsable", &fakeIntents{by: map[string][]Intent{"s": {broken}}}},
		{"store fails", &fakeIntents{by: map[string][]Intent{"s": {intentOf("in-4", scope)}}, err: errors.New("damaged")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := intentBroker(t, tc.ins, Rules{}, nil, nil).Decide(context.Background(), req).Decision
			if d.Outcome != Deny || d.Source != SourceNoReviewer {
				t.Fatalf("%+v", d)
			}
		})
	}
}

// A lockdown holds: an intent covers nothing while the session is locked
// down (only a person is asked), and covers again once it is lifted.
func TestIntentLockdown(t *testing.T) {
	dir := t.TempDir()
	const scope = "fs write /opt/app/conf"
	req := fsReq(boundary.OpWriteFile, "/opt/app/conf")
	ins := &fakeIntents{by: map[string][]Intent{"s": {intentOf("in-1", scope)}}}
	b := intentBroker(t, ins, Rules{}, nil, NewBreaker(dir))
	for i := range 3 {
		if d := b.Decide(context.Background(), fsReq(boundary.OpWriteFile, "/opt/no")).Decision; d.Outcome != Deny {
			t.Fatalf("denial %d: %+v", i, d)
		}
	}
	if d := b.Decide(context.Background(), req).Decision; d.Outcome != Deny || d.Source != SourceCircuitBreaker {
		t.Fatalf("during the lockdown: %+v", d)
	}
	if err := NewBreaker(dir).Lift("s"); err != nil {
		t.Fatal(err)
	}
	if d := b.Decide(context.Background(), req).Decision; d.Outcome != Allow || d.Source != SourceIntent {
		t.Fatalf("after the lift: %+v", d)
	}
}

// The decision the auditor records names the intent.
func TestIntentRecorded(t *testing.T) {
	a := &fakeAuditor{}
	ins := &fakeIntents{by: map[string][]Intent{"s": {intentOf("in-1", "net connect *.npmjs.org:443")}}}
	b := New(Config{Grants: grants.NewStore(), Intents: ins, Auditor: a})
	b.Decide(context.Background(), netReq("registry.npmjs.org:443"))
	for _, ev := range a.events {
		if ev.Kind == AuditDecision && ev.Decision.Source == SourceIntent && ev.Decision.Intent == "in-1" {
			return
		}
	}
	t.Fatalf("no decision names the intent: %+v", a.events)
}

// DecideEach never sends the model a request an intent covers.
func TestIntentNotSentAhead(t *testing.T) {
	model := &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh}}
	ins := &fakeIntents{by: map[string][]Intent{"s": {intentOf("in-1", "fs write /opt/app/**")}}}
	b := intentBroker(t, ins, Rules{}, model, nil)
	reqs := []grants.Request{fsReq(boundary.OpWriteFile, "/opt/app/a"), fsReq(boundary.OpWriteFile, "/opt/app/b"), fsReq(boundary.OpWriteFile, "/opt/c")}
	out := b.DecideEach(context.Background(), reqs, nil)
	if out[0].Decision.Source != SourceIntent || out[1].Decision.Source != SourceIntent || out[2].Decision.Source != SourceReviewer || model.calls != 1 {
		t.Fatalf("%+v %+v %+v, model asked %d times", out[0].Decision, out[1].Decision, out[2].Decision, model.calls)
	}
}
