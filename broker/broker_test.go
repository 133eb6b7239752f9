package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/sandboxd/sandboxd/grants"
)

// fakeReviewer answers with a fixed decision and counts calls.
type fakeReviewer struct {
	d     Decision
	err   error
	calls int
}

func (f *fakeReviewer) Review(context.Context, grants.Request) (Decision, error) {
	f.calls++
	return f.d, f.err
}

type fakeHuman struct{ fakeReviewer }

func (*fakeHuman) IsHuman() {}

func fsReq(op, path string) grants.Request {
	return grants.Request{Session: "s", Cwd: "/w", Command: "c", Surface: grants.Filesystem,
		Operation: op, Path: path, ResolvedPath: path}
}

func netReq(dest string) grants.Request {
	return grants.Request{Session: "s", Cwd: "/w", Command: "c", Surface: grants.Network, Operation: "connect", Destination: dest}
}

func mustRule(t *testing.T, s string) Rule {
	t.Helper()
	r, err := ParseRule(s, "/home/u")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPipeline(t *testing.T) {
	allowAll := &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh}}
	for _, tc := range []struct {
		name     string
		rules    Rules
		reviewer Reviewer
		req      grants.Request
		outcome  Outcome
		source   Source
	}{
		{"deny rule", Rules{Deny: []Rule{mustRule(t, "fs write /etc/**")}, Allow: []Rule{mustRule(t, "fs * /etc/**")}}, allowAll, fsReq("write_file", "/etc/x"), Deny, SourcePolicy},
		{"allow rule", Rules{Allow: []Rule{mustRule(t, "fs write_file /etc/x")}}, nil, fsReq("write_file", "/etc/x"), Allow, SourcePolicy},
		{"allow rule is exact about the operation", Rules{Allow: []Rule{mustRule(t, "fs write_file /etc/x")}}, nil, fsReq("truncate", "/etc/x"), Deny, SourceNoReviewer},
		{"ask beats allow", Rules{Allow: []Rule{mustRule(t, "fs * /etc/**")}, Ask: []Rule{mustRule(t, "fs write /etc/**")}}, nil, fsReq("write_file", "/etc/x"), Deny, SourceNoReviewer},
		{"hard deny beats allow", Rules{Allow: []Rule{mustRule(t, "fs read ~/**")}}, nil, fsReq("read_file", "/home/u/.ssh/id_rsa"), Deny, SourceHardDeny},
		{"hard deny beats a reviewer", Rules{}, allowAll, fsReq("read_file", "/home/u/.aws/credentials"), Deny, SourceHardDeny},
		{"own state", Rules{}, allowAll, fsReq("write_file", "/home/u/.local/state/sandboxd/x"), Deny, SourceHardDeny},
		{"remove home", Rules{}, allowAll, fsReq("remove_dir", "/home/u"), Deny, SourceHardDeny},
		{"remove root", Rules{}, allowAll, fsReq("remove_dir", "/"), Deny, SourceHardDeny},
		{"git hook", Rules{}, allowAll, fsReq("make_reg", "/w/.git/hooks/pre-commit"), Deny, SourceHardDeny},
		{"nested git config", Rules{}, allowAll, fsReq("write_file", "/w/sub/.git/config"), Deny, SourceHardDeny},
		{"envrc", Rules{}, allowAll, fsReq("make_reg", "/w/.envrc"), Deny, SourceHardDeny},
		{"reading a hook is fine", Rules{}, allowAll, fsReq("read_file", "/w/.git/hooks/pre-commit"), Allow, SourceReviewer},
		{"metadata endpoint", Rules{Allow: []Rule{mustRule(t, "net connect *")}}, allowAll, netReq("169.254.169.254:80"), Deny, SourceHardDeny},
		{"net allow", Rules{Allow: []Rule{mustRule(t, "net connect *.pypi.org:443")}}, nil, netReq("files.pypi.org:443"), Allow, SourcePolicy},
		{"net allow wrong port", Rules{Allow: []Rule{mustRule(t, "net connect *.pypi.org:443")}}, nil, netReq("files.pypi.org:80"), Deny, SourceNoReviewer},
		{"no reviewer", Rules{}, nil, fsReq("write_file", "/opt/x"), Deny, SourceNoReviewer},
		{"reviewer allow", Rules{}, allowAll, fsReq("write_file", "/opt/x"), Allow, SourceReviewer},
		{"critical refused", Rules{}, &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskCritical, UserAuthorization: AuthHigh}}, fsReq("write_file", "/opt/x"), Deny, SourceReviewer},
		{"high without authorization", Rules{}, &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskHigh, UserAuthorization: AuthLow}}, fsReq("write_file", "/opt/x"), Deny, SourceReviewer},
		{"high with authorization", Rules{}, &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskHigh, UserAuthorization: AuthMedium}}, fsReq("write_file", "/opt/x"), Allow, SourceReviewer},
		{"no risk level", Rules{}, &fakeReviewer{d: Decision{Outcome: Allow}}, fsReq("write_file", "/opt/x"), Deny, SourceReviewer},
		{"reviewer error", Rules{}, &fakeReviewer{err: errors.New("timeout")}, fsReq("write_file", "/opt/x"), Deny, SourceError},
		{"unknown surface", Rules{}, allowAll, grants.Request{Session: "s", Surface: "dbus", Operation: "call", Path: "/x"}, Deny, SourceError},
		{"incomplete", Rules{}, allowAll, grants.Request{Session: "s", Surface: grants.Filesystem, Operation: "read_file"}, Deny, SourceError},
		{"symlinked name cannot carry an allow", Rules{Allow: []Rule{mustRule(t, "fs read /data/**")}}, nil,
			grants.Request{Session: "s", Surface: grants.Filesystem, Operation: "read_file", Path: "/data/link", ResolvedPath: "/etc/shadow"}, Deny, SourceNoReviewer},
		{"deny on either name", Rules{Deny: []Rule{mustRule(t, "fs read /etc/**")}}, allowAll,
			grants.Request{Session: "s", Surface: grants.Filesystem, Operation: "read_file", Path: "/data/link", ResolvedPath: "/etc/shadow"}, Deny, SourcePolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := grants.NewStore()
			b := New(Config{Rules: tc.rules, Reviewer: tc.reviewer, Grants: store, Hard: HardDenies{
				Secrets: []string{"/home/u/.ssh", "/home/u/.aws"}, Own: []string{"/home/u/.local/state/sandboxd"},
				Home: "/home/u", Workspace: "/w"}})
			res := b.Decide(context.Background(), tc.req)
			if res.Decision.Outcome != tc.outcome || res.Decision.Source != tc.source {
				t.Fatalf("got %s/%s (%s), want %s/%s", res.Decision.Outcome, res.Decision.Source, res.Decision.Rationale, tc.outcome, tc.source)
			}
			if (res.Grant != nil) != (tc.outcome == Allow) {
				t.Fatalf("grant %v for outcome %s", res.Grant, tc.outcome)
			}
			if res.Grant != nil {
				if err := store.Consume(res.Grant.Token, tc.req); err != nil {
					t.Fatalf("the issued grant does not fit its request: %v", err)
				}
			}
		})
	}
}

func TestBreakerLocksAndPersists(t *testing.T) {
	dir := t.TempDir()
	allow := []Rule{mustRule(t, "fs write_file /opt/ok")}
	newBroker := func(r Reviewer) *Broker {
		return New(Config{Rules: Rules{Allow: allow}, Reviewer: r, Grants: grants.NewStore(), Breaker: NewBreaker(dir)})
	}
	b := newBroker(nil)
	for i := 0; i < 3; i++ {
		if d := b.Decide(context.Background(), fsReq("write_file", "/opt/no")).Decision; d.Outcome != Deny {
			t.Fatalf("denial %d: %+v", i, d)
		}
	}
	// Locked: even a policy allow is refused, in a new broker too (a new
	// `sandboxd run` of the same session).
	d := newBroker(nil).Decide(context.Background(), fsReq("write_file", "/opt/ok")).Decision
	if d.Outcome != Deny || d.Source != SourceCircuitBreaker {
		t.Fatalf("after 3 denials: %+v", d)
	}
	// Another session is not affected.
	other := fsReq("write_file", "/opt/ok")
	other.Session = "s2"
	if d := newBroker(nil).Decide(context.Background(), other).Decision; d.Outcome != Allow {
		t.Fatalf("another session: %+v", d)
	}
	// During a lockdown only a human is asked.
	h := &fakeHuman{fakeReviewer{d: Decision{Outcome: Allow, Source: SourceHuman}}}
	if d := newBroker(h).Decide(context.Background(), fsReq("write_file", "/opt/ok")).Decision; d.Outcome != Allow || d.Source != SourceHuman || h.calls != 1 {
		t.Fatalf("human during lockdown: %+v (calls %d)", d, h.calls)
	}
	if err := NewBreaker(dir).Lift("s"); err != nil {
		t.Fatal(err)
	}
	if d := newBroker(nil).Decide(context.Background(), fsReq("write_file", "/opt/ok")).Decision; d.Outcome != Allow || d.Source != SourcePolicy {
		t.Fatalf("after lift: %+v", d)
	}
}

func TestBreakerWindow(t *testing.T) {
	br := NewBreaker(t.TempDir())
	// Alternate deny, allow: never 3 in a row, but the 10th denial in the
	// window locks.
	// 9 denials among 18 decisions...
	for i := 0; i < 18; i++ {
		tripped, err := br.Record("s", i%2 == 0)
		if err != nil {
			t.Fatal(err)
		}
		if tripped {
			t.Fatalf("locked after %d decisions", i+1)
		}
	}
	if tripped, _ := br.Record("s", true); !tripped {
		t.Fatal("the 10th denial of the window did not lock")
	}
}

func TestParseRule(t *testing.T) {
	for _, bad := range []string{"fs read", "dbus call x", "fs read relative/path", "fs read /a[", "net connect"} {
		if _, err := ParseRule(bad, "/h"); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	r := mustRule(t, "fs read ~/data/**")
	if r.Target != "/home/u/data/**" {
		t.Fatalf("~ not expanded: %q", r.Target)
	}
	for name, want := range map[string]bool{"/home/u/data": true, "/home/u/data/a/b": true, "/home/u/datax": false, "/home/u": false} {
		if got := matchPath(r.Target, name); got != want {
			t.Errorf("match %s: %v, want %v", name, got, want)
		}
	}
}
