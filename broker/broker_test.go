package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/grants"
	"golang.org/x/sys/unix"
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

type fakeHuman struct {
	fakeReviewer
	away bool
}

func (h *fakeHuman) Reachable() (bool, string) { return !h.away, "nobody at the terminal" }

func fsReq(op boundary.Operation, path string) grants.Request {
	return grants.Request{Session: "s", Cwd: "/w", Command: "c", Surface: boundary.Filesystem,
		Operation: op, Path: path, ResolvedPath: path}
}

// netReq is a network request for dest, read as text enters the
// process: a destination that is no normalised host:port is carried as
// MalformedDestination, as the broker must still refuse it.
func netReq(dest string) grants.Request {
	return grants.Request{Session: "s", Cwd: "/w", Command: "c", Surface: boundary.Network, Operation: "connect"}.WithDestinationText(dest)
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
		{"incomplete", Rules{}, allowAll, grants.Request{Session: "s", Surface: boundary.Filesystem, Operation: "read_file"}, Deny, SourceError},
		{"symlinked name cannot carry an allow", Rules{Allow: []Rule{mustRule(t, "fs read /data/**")}}, nil,
			grants.Request{Session: "s", Surface: boundary.Filesystem, Operation: "read_file", Path: "/data/link", ResolvedPath: "/etc/shadow"}, Deny, SourceNoReviewer},
		{"deny on either name", Rules{Deny: []Rule{mustRule(t, "fs read /etc/**")}}, allowAll,
			grants.Request{Session: "s", Surface: boundary.Filesystem, Operation: "read_file", Path: "/data/link", ResolvedPath: "/etc/shadow"}, Deny, SourcePolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := grants.NewStore()
			b := New(Config{Rules: tc.rules, Model: tc.reviewer, Grants: store, Hard: HardDenies{
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
	newBroker := func(r Person) *Broker {
		return New(Config{Rules: Rules{Allow: allow}, Person: r, Grants: grants.NewStore(), Breaker: NewBreaker(dir)})
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
	h := &fakeHuman{fakeReviewer: fakeReviewer{d: Decision{Outcome: Allow, Source: SourceHuman}}}
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

// Reading a session's breaker (sessions/{id}, a decision) creates and
// changes nothing: no directory, no lock file, for a session never seen
// or one with state; and what it reads is the state Record left.
func TestBreakerReadCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "breaker")
	br := NewBreaker(dir)
	if locked, _, err := br.Locked("fresh"); err != nil || locked {
		t.Fatalf("a fresh session: locked %v, %v", locked, err)
	}
	if n, err := br.Headroom("fresh"); err != nil || n != breakerConsecutive {
		t.Fatalf("a fresh session's headroom: %d, %v", n, err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("reading a fresh session made its directory: %v", err)
	}
	for range breakerConsecutive {
		if _, err := br.Record("s", true); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := os.ReadDir(dir)
	for _, s := range []string{"s", "other", "..", "a\x00b"} {
		br.Locked(s)
		br.Headroom(s)
	}
	after, _ := os.ReadDir(dir)
	if len(after) != len(before) {
		t.Fatalf("reads made files: %d entries before, %d after", len(before), len(after))
	}
	if locked, why, _ := br.Locked("s"); !locked || why == "" {
		t.Fatalf("the tripped session reads unlocked (%q)", why)
	}
	if n, _ := br.Headroom("s"); n != 0 {
		t.Fatalf("the tripped session's headroom %d", n)
	}
	os.WriteFile(br.file("damaged")+".json", []byte("{"), 0o600)
	if locked, _, _ := br.Locked("damaged"); !locked {
		t.Fatal("a damaged state file reads unlocked")
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
	for _, bad := range []string{"fs read", "fs frobnicate /x", "net read *", "net write_file *", "dbus call x", "fs read relative/path", "fs read /a[", "net connect"} {
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

// Escapes: a backslash keeps white space inside the pattern and makes a
// wildcard literal; a home holding wildcards is still one directory.
// Rules without a backslash mean what they always meant.
func TestParseRuleEscapes(t *testing.T) {
	for _, tc := range []struct {
		rule, home string
		yes, no    []string
	}{
		{`fs read /data/my\ file\*`, "/h", []string{"/data/my file*"}, []string{"/data/my fileX", "/data/my"}},
		{"fs read /data/a\\\nb", "/h", []string{"/data/a\nb"}, []string{"/data/anb"}},
		{"fs read ~/x/**", "/home/a*", []string{"/home/a*/x/y"}, []string{"/home/ab/x/y", "/home/a/x"}},
		{"fs read ~", "/home/[ab]", []string{"/home/[ab]"}, []string{"/home/a"}},
		{"fs read ~/.cache", `/home/a\b`, []string{`/home/a\b/.cache`}, []string{"/home/ab/.cache"}},
		{"fs read ~/.cache", "/home/a b", []string{"/home/a b/.cache"}, []string{"/home/a/.cache"}},
		{"fs  read\t/etc/*", "/h", []string{"/etc/hosts"}, []string{"/etc/a/b"}},
		{`fs read /etc/\hosts`, "/h", []string{"/etc/hosts"}, nil}, // as path.Match always read it
	} {
		r, err := ParseRule(tc.rule, tc.home)
		if err != nil {
			t.Errorf("%q: %v", tc.rule, err)
			continue
		}
		for _, n := range tc.yes {
			if !r.Matches(fsReq(boundary.OpReadFile, n)) {
				t.Errorf("%q (home %q) does not match %q", tc.rule, tc.home, n)
			}
		}
		for _, n := range tc.no {
			if r.Matches(fsReq(boundary.OpReadFile, n)) || r.MatchesEither(fsReq(boundary.OpReadFile, n)) {
				t.Errorf("%q (home %q) matches %q", tc.rule, tc.home, n)
			}
		}
	}
	for _, bad := range []string{`fs read /a\`, `fs read /a\/b`, `fs read /a/[`, `net connect a\ b`, `net connect \*`} {
		if _, err := ParseRule(bad, "/h"); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestExactRule(t *testing.T) {
	for _, tc := range []struct {
		surface boundary.Surface
		op      boundary.Operation
		target  string
		want    string
	}{
		{boundary.Filesystem, boundary.OpWriteFile, "/etc/hosts", "fs write_file /etc/hosts"},
		{boundary.Filesystem, boundary.OpReadFile, "/home/u/my data/*.csv", `fs read_file ~/my\ data/\*.csv`},
		{boundary.Filesystem, boundary.OpReadFile, "/home/u", "fs read_file /home/u"},
		{boundary.Filesystem, boundary.OpReadFile, "/home/user/x", "fs read_file /home/user/x"},
		{boundary.Filesystem, boundary.OpMakeReg, "/tmp/a\nb", "fs make_reg /tmp/a\\\nb"},
		{boundary.Network, boundary.OpConnect, "example.org:443", "net connect example.org:443"},
		{boundary.Network, boundary.OpConnect, "[2001:db8::1]:8443", "net connect [2001:db8::1]:8443"},
		{boundary.Network, boundary.OpConnect, "10.0.0.1:5432", "net connect 10.0.0.1:5432"},
	} {
		got, err := ExactRule(tc.surface, tc.op, tc.target, "/home/u")
		if err != nil || got != tc.want {
			t.Errorf("ExactRule(%s %s %q) = %q, %v; want %q", tc.surface, tc.op, tc.target, got, err, tc.want)
			continue
		}
		r, err := ParseRule(got, "/home/u")
		if err != nil {
			t.Errorf("%q: %v", got, err)
			continue
		}
		req := fsReq(tc.op, tc.target)
		if tc.surface == boundary.Network {
			req = netReq(tc.target)
		}
		if !r.Matches(req) {
			t.Errorf("%q does not match %s", got, tc.target)
		}
	}
	for _, tc := range []struct {
		surface boundary.Surface
		op      boundary.Operation
		target  string
	}{
		{boundary.Filesystem, boundary.OpWriteFile, "etc/hosts"},
		{boundary.Filesystem, boundary.OpWriteFile, "/etc/../hosts"},
		{boundary.Filesystem, boundary.OpWriteFile, "/etc/"},
		{boundary.Filesystem, boundary.OpConnect, "/etc/hosts"},
		{boundary.Network, boundary.OpConnect, "Example.org:443"},
		{boundary.Network, boundary.OpConnect, "example.org"},
		{boundary.Network, boundary.OpConnect, "[::1]:80"},
		{boundary.Command, boundary.OpRun, "ls"},
	} {
		if got, err := ExactRule(tc.surface, tc.op, tc.target, "/home/u"); err == nil {
			t.Errorf("ExactRule(%s %s %q) = %q, want an error", tc.surface, tc.op, tc.target, got)
		}
	}
}

// The reviewers' order: the model first; a person when the model is
// absent or failed, or the session is locked down, and a person is
// reachable; otherwise deny.
func TestReviewerSlots(t *testing.T) {
	lowAllow := Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh}
	for _, tc := range []struct {
		name           string
		model          *fakeReviewer
		person         *fakeHuman
		locked         bool
		outcome        Outcome
		source         Source
		modelN, humanN int
	}{
		{"model decides", &fakeReviewer{d: lowAllow}, &fakeHuman{fakeReviewer: fakeReviewer{d: Decision{Outcome: Deny}}}, false, Allow, SourceReviewer, 1, 0},
		{"model deny is final", &fakeReviewer{d: Decision{Outcome: Deny, Rationale: "no"}}, &fakeHuman{fakeReviewer: fakeReviewer{d: lowAllow}}, false, Deny, SourceReviewer, 1, 0},
		{"model failed: person", &fakeReviewer{err: errors.New("timeout")}, &fakeHuman{fakeReviewer: fakeReviewer{d: Decision{Outcome: Allow}}}, false, Allow, SourceHuman, 1, 1},
		{"model failed, nobody: error", &fakeReviewer{err: errors.New("timeout")}, nil, false, Deny, SourceError, 1, 0},
		{"model failed, person away: error", &fakeReviewer{err: errors.New("timeout")}, &fakeHuman{away: true, fakeReviewer: fakeReviewer{d: lowAllow}}, false, Deny, SourceError, 1, 0},
		{"no model: person", nil, &fakeHuman{fakeReviewer: fakeReviewer{d: Decision{Outcome: Allow}}}, false, Allow, SourceHuman, 0, 1},
		{"no model, person away", nil, &fakeHuman{away: true}, false, Deny, SourceNoReviewer, 0, 0},
		{"nobody", nil, nil, false, Deny, SourceNoReviewer, 0, 0},
		{"locked: person only", &fakeReviewer{d: lowAllow}, &fakeHuman{fakeReviewer: fakeReviewer{d: Decision{Outcome: Allow}}}, true, Allow, SourceHuman, 0, 1},
		{"locked, nobody: breaker", &fakeReviewer{d: lowAllow}, nil, true, Deny, SourceCircuitBreaker, 0, 0},
		{"person's allow at critical risk", nil, &fakeHuman{fakeReviewer: fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskCritical}}}, false, Deny, SourceHuman, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Grants: grants.NewStore()}
			if tc.model != nil {
				cfg.Model = tc.model
			}
			if tc.person != nil {
				cfg.Person = tc.person
			}
			if tc.locked {
				cfg.Breaker = NewBreaker(t.TempDir())
				for i := 0; i < breakerConsecutive; i++ {
					cfg.Breaker.Record("s", true)
				}
			}
			res := New(cfg).Decide(context.Background(), fsReq("write_file", "/opt/x"))
			if res.Decision.Outcome != tc.outcome || res.Decision.Source != tc.source {
				t.Fatalf("got %s/%s (%s), want %s/%s", res.Decision.Outcome, res.Decision.Source, res.Decision.Rationale, tc.outcome, tc.source)
			}
			var m, h int
			if tc.model != nil {
				m = tc.model.calls
			}
			if tc.person != nil {
				h = tc.person.calls
			}
			if m != tc.modelN || h != tc.humanN {
				t.Fatalf("model asked %d times, person %d; want %d, %d", m, h, tc.modelN, tc.humanN)
			}
			if strings.Contains(res.Decision.Rationale, "timeout") {
				t.Fatalf("an internal error reached the rationale: %q", res.Decision.Rationale)
			}
		})
	}
}

// fakeAuditor records events and fails the kinds it is told to.
type fakeAuditor struct {
	events []AuditEvent
	fail   map[AuditKind]bool
}

func (a *fakeAuditor) Record(_ context.Context, ev AuditEvent) error {
	a.events = append(a.events, ev)
	if a.fail[ev.Kind] {
		return errors.New("disk full at /var/log/sandboxd/audit")
	}
	return nil
}

func TestAuditorHook(t *testing.T) {
	allow := Rules{Allow: []Rule{mustRule(t, "fs write_file /opt/x")}}
	for _, tc := range []struct {
		name    string
		fail    AuditKind
		outcome Outcome
		source  Source
		grants  int // outstanding afterwards
	}{
		{"recorded", "", Allow, SourcePolicy, 1},
		{"decision unrecorded", AuditDecision, Deny, SourceError, 0},
		{"grant unrecorded", AuditGrantIssued, Deny, SourceError, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := grants.NewStore()
			aud := &fakeAuditor{fail: map[AuditKind]bool{tc.fail: true}}
			br := NewBreaker(t.TempDir())
			b := New(Config{Rules: allow, Grants: store, Auditor: aud, Breaker: br})
			res := b.Decide(context.Background(), fsReq("write_file", "/opt/x"))
			if res.Decision.Outcome != tc.outcome || res.Decision.Source != tc.source {
				t.Fatalf("got %s/%s (%s)", res.Decision.Outcome, res.Decision.Source, res.Decision.Rationale)
			}
			if store.Len() != tc.grants || (res.Grant != nil) != (tc.grants == 1) {
				t.Fatalf("%d grants outstanding, result grant %v", store.Len(), res.Grant)
			}
			if strings.Contains(res.Decision.Rationale, "disk full") {
				t.Fatalf("the auditor's error reached the rationale: %q", res.Decision.Rationale)
			}
			if len(aud.events) == 0 || aud.events[0].Kind != AuditDecision {
				t.Fatalf("events %+v", aud.events)
			}
			// The deny an unrecorded allow became is counted.
			st, _ := br.read("s")
			if got := st.Recent[len(st.Recent)-1]; got != (tc.outcome == Deny) {
				t.Fatalf("breaker counted denied=%v", got)
			}
		})
	}
	// Consuming is recorded too; an unrecordable use is refused.
	store := grants.NewStore()
	aud := &fakeAuditor{fail: map[AuditKind]bool{}}
	b := New(Config{Rules: allow, Grants: store, Auditor: aud})
	req := fsReq("write_file", "/opt/x")
	g := b.Decide(context.Background(), req).Grant
	if err := b.Consume(context.Background(), g.Token, req); err != nil {
		t.Fatal(err)
	}
	if last := aud.events[len(aud.events)-1]; last.Kind != AuditGrantConsumed {
		t.Fatalf("last event %s", last.Kind)
	}
	if err := b.Consume(context.Background(), g.Token, req); err == nil || aud.events[len(aud.events)-1].Kind != AuditGrantRejected {
		t.Fatalf("replay: %v, last event %s", err, aud.events[len(aud.events)-1].Kind)
	}
	// The record says why in sandboxd's words, not the store's error.
	if why := aud.events[len(aud.events)-1].Why; why != "the grant is unknown or already used" {
		t.Errorf("replay: the record's why is %q", why)
	}
	aud.fail[AuditGrantConsumed] = true
	g = b.Decide(context.Background(), req).Grant
	if err := b.Consume(context.Background(), g.Token, req); err == nil {
		t.Fatal("a use the auditor could not record was accepted")
	}
}

// The command surface: judged like any request, never granted.
func TestCommandSurface(t *testing.T) {
	store := grants.NewStore()
	h := &fakeHuman{fakeReviewer: fakeReviewer{d: Decision{Outcome: Allow}}}
	b := New(Config{Grants: store, Person: h})
	res := b.Decide(context.Background(), grants.Request{Session: "s", Surface: boundary.Command, Operation: boundary.OpRun, Command: "rm -rf build"})
	if res.Decision.Outcome != Allow || res.Grant != nil || store.Len() != 0 {
		t.Fatalf("command: %+v grant %v", res.Decision, res.Grant)
	}
	for _, bad := range []grants.Request{
		{Session: "s", Surface: boundary.Command, Operation: boundary.OpRun},
		{Session: "s", Surface: boundary.Command, Operation: boundary.OpReadFile, Command: "x"},
		{Session: "s", Surface: boundary.Filesystem, Operation: boundary.OpRun, Path: "/x"},
	} {
		if d := b.Decide(context.Background(), bad).Decision; d.Outcome != Deny || d.Source != SourceError {
			t.Errorf("%+v: %+v", bad, d)
		}
	}
}

// Reviewers cannot misstate who they are or answer outside the scale.
func TestReviewerAnswersValidated(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Decision
	}{
		{"model claims to be a person", Decision{Outcome: Allow, Source: SourceHuman}},
		{"risk level in the wrong case", Decision{Outcome: Allow, RiskLevel: "High", UserAuthorization: AuthLow}},
		{"unknown risk level", Decision{Outcome: Allow, RiskLevel: "extreme", UserAuthorization: AuthHigh}},
		{"unknown authorization", Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := grants.NewStore()
			res := New(Config{Grants: store, Model: &fakeReviewer{d: tc.d}}).Decide(context.Background(), fsReq(boundary.OpWriteFile, "/opt/x"))
			if res.Decision.Outcome != Deny || res.Decision.Source != SourceReviewer || store.Len() != 0 {
				t.Fatalf("got %+v, %d grants", res.Decision, store.Len())
			}
		})
	}
}

// A path that is not absolute and clean is malformed: the rules and the
// hard denies compare clean absolute paths.
func TestUncleanPathsMalformed(t *testing.T) {
	b := New(Config{Grants: grants.NewStore(), Rules: Rules{Allow: []Rule{mustRule(t, "fs * /**")}},
		Hard: HardDenies{Secrets: []string{"/home/u/.ssh"}}})
	for _, p := range []string{"home/u/.ssh/id_rsa", "/w/../etc/passwd", "/home/u//.ssh/id_rsa", "/etc/x/", "./x"} {
		if d := b.Decide(context.Background(), fsReq(boundary.OpReadFile, p)).Decision; d.Outcome != Deny || d.Source != SourceError {
			t.Errorf("%q: %+v", p, d)
		}
	}
}

// A breaker state that cannot be read denies; a decision the breaker
// cannot count (the state cannot be written: a full or read-only disk)
// is not an allow either.
func TestBreakerFailuresDeny(t *testing.T) {
	allow := Rules{Allow: []Rule{mustRule(t, "fs write_file /opt/x")}}
	t.Run("unreadable", func(t *testing.T) {
		br := NewBreaker(t.TempDir())
		st := br.file("s") + ".json"
		os.MkdirAll(filepath.Join(st, "x"), 0o755) // a directory where the state file goes
		store := grants.NewStore()
		d := New(Config{Grants: store, Breaker: br, Rules: allow}).Decide(context.Background(), fsReq(boundary.OpWriteFile, "/opt/x")).Decision
		if d.Outcome != Deny || d.Source != SourceError || store.Len() != 0 {
			t.Fatalf("got %+v with %d grants", d, store.Len())
		}
	})
	t.Run("unwritable", func(t *testing.T) {
		dir := t.TempDir()
		br := NewBreaker(dir)
		if _, err := br.Record("s", false); err != nil {
			t.Fatal(err)
		}
		immutable(t, dir)
		store := grants.NewStore()
		d := New(Config{Grants: store, Breaker: br, Rules: allow}).Decide(context.Background(), fsReq(boundary.OpWriteFile, "/opt/x")).Decision
		if d.Outcome != Deny || d.Source != SourceError || store.Len() != 0 {
			t.Fatalf("got %+v with %d grants", d, store.Len())
		}
	})
}

// immutable sets the immutable flag on dir (nothing can be created,
// renamed or removed in it) until the test ends.
func immutable(t *testing.T, dir string) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetInt(fd, unix.FS_IOC_GETFLAGS)
	if err == nil {
		err = unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, flags|0x10) // FS_IMMUTABLE_FL
	}
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) {
		t.Skipf("cannot make %s immutable here (needs root on a file system with inode flags): %v", dir, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, flags)
			unix.Close(fd)
		}
	})
}

// overlapPerson fails the test if two questions are open at once.
type overlapPerson struct {
	open, max atomic.Int32
}

func (p *overlapPerson) Reachable() (bool, string) { return true, "" }

func (p *overlapPerson) Review(context.Context, grants.Request) (Decision, error) {
	n := p.open.Add(1)
	defer p.open.Add(-1)
	for m := p.max.Load(); n > m && !p.max.CompareAndSwap(m, n); m = p.max.Load() {
	}
	time.Sleep(2 * time.Millisecond)
	return Decision{Outcome: Deny, Rationale: "no"}, nil
}

// One question to the person at a time: held connections are decided
// concurrently, and an answer must be to the question shown.
func TestPersonAskedOneAtATime(t *testing.T) {
	p := &overlapPerson{}
	b := New(Config{Grants: grants.NewStore(), Person: p})
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.Decide(context.Background(), fsReq(boundary.OpWriteFile, fmt.Sprintf("/opt/%d", i)))
		}()
	}
	wg.Wait()
	if p.max.Load() != 1 {
		t.Fatalf("%d questions were open at once", p.max.Load())
	}
}

// A session locked under its old, unscoped name stays locked under the
// scoped one.
func TestBreakerAdoptsOldName(t *testing.T) {
	dir := t.TempDir()
	old := NewBreaker(dir)
	for i := 0; i < breakerConsecutive; i++ {
		old.Record("s1", true)
	}
	br := NewBreaker(dir)
	if err := br.Adopt("uid 0: s1", "s1"); err != nil {
		t.Fatal(err)
	}
	if locked, _, _ := br.Locked("uid 0: s1"); !locked {
		t.Fatal("the upgrade lifted a lockdown")
	}
	// Adopted once: a person's lift holds.
	br.Lift("uid 0: s1")
	br.Adopt("uid 0: s1", "s1")
	if locked, _, _ := br.Locked("uid 0: s1"); locked {
		t.Fatal("the old lockdown came back after a lift")
	}
}

// Quiet writes: denied without review, never counted; secrets,
// persistence paths, own state and reads are never quiet.
func TestQuiet(t *testing.T) {
	h := HardDenies{Secrets: []string{"/home/u/.ssh"}, Own: []string{"/home/u/.local/state/sandboxd"}, Home: "/home/u", Workspace: "/w"}
	quiet := []QuietRule{{"/home/u/.config/go/telemetry/**", "Go's telemetry", []string{"go"}}, {"/home/u/.ssh/**", "a user's mistake", nil},
		{"/home/u/.local/state/**", "too wide", nil}, {"/w/.git/**", "too wide", nil}}
	allowAll := &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh}}
	br := NewBreaker(t.TempDir())
	b := New(Config{Grants: grants.NewStore(), Hard: h, Quiet: quiet, Model: allowAll, Breaker: br})
	for _, tc := range []struct {
		req    grants.Request
		source Source
	}{
		{fsReq(boundary.OpMakeReg, "/home/u/.config/go/telemetry/local/go@x.count"), SourceQuiet},
		{fsReq(boundary.OpMakeDir, "/home/u/.config/go/telemetry"), SourceQuiet},
		{fsReq(boundary.OpReadFile, "/home/u/.config/go/telemetry/mode"), SourceReviewer},
		{fsReq(boundary.OpWriteFile, "/home/u/.ssh/authorized_keys"), SourceHardDeny},
		{fsReq(boundary.OpWriteFile, "/home/u/.local/state/sandboxd/breaker/x"), SourceHardDeny},
		{fsReq(boundary.OpMakeReg, "/w/.git/hooks/pre-commit"), SourceHardDeny},
	} {
		d := b.Decide(context.Background(), tc.req).Decision
		if d.Source != tc.source || (tc.source != SourceReviewer && d.Outcome != Deny) {
			t.Errorf("%s %s: %+v", tc.req.Operation, tc.req.Path, d)
		}
	}
	br = NewBreaker(t.TempDir())
	b = New(Config{Grants: grants.NewStore(), Hard: h, Quiet: quiet, Breaker: br})
	for i := 0; i < 10; i++ {
		b.Decide(context.Background(), fsReq(boundary.OpMakeReg, "/home/u/.config/go/telemetry/local/c.count"))
	}
	if locked, _, _ := br.Locked("s"); locked {
		t.Fatal("quiet denials locked the session")
	}
}

// A missing parent of a quiet entry is quiet only when the entry's own
// tools, and no other program, tried to create it; unknown programs,
// other operations and other directories stay boundaries.
func TestQuietParentByTool(t *testing.T) {
	quiet := []QuietRule{
		{"/home/u/.config/go/telemetry/**", "Go's telemetry", []string{"go", "pkg/tool/*_*/*"}},
		{"/home/u/.config/procps/**", "top's configuration", []string{"top"}},
		{"/home/u/.config/configstore/update-notifier-*", "npm's update notifier", nil},
	}
	grantable := func(req grants.Request) (bool, string) {
		return req.Operation != boundary.OpMakeDir, "more than one object"
	}
	b := New(Config{Grants: grants.NewStore(), Hard: HardDenies{Home: "/home/u", Workspace: "/w"}, Quiet: quiet, Grantable: grantable})
	mk := func(p string, programs ...string) grants.Request {
		r := fsReq(boundary.OpMakeDir, p)
		r.Programs = programs
		return r
	}
	for _, tc := range []struct {
		req   grants.Request
		quiet bool
	}{
		{mk("/home/u/.config", "/usr/local/go/bin/go"), true},
		{mk("/home/u/.config/go", "/usr/local/go/bin/go", "/usr/local/go/pkg/tool/linux_amd64/vet"), true},
		{mk("/home/u/.config", "/usr/lib/go-1.22/pkg/tool/linux_arm64/compile"), true},
		{mk("/home/u/.config", "/usr/bin/top"), true},
		{mk("/home/u/.config/go/telemetry", "/usr/bin/mkdir"), true}, // the entry itself, whoever
		// Another program tried too, or the program is unknown.
		{mk("/home/u/.config", "/usr/local/go/bin/go", "/usr/bin/mkdir"), false},
		{mk("/home/u/.config"), false},
		{mk("/home/u/.config", "/usr/bin/mkdir"), false},
		{mk("/home/u/.config", "/w/tool/vet"), false},
		{mk("/home/u/.config", "/usr/bin/gotop"), false},
		// Not on the way to the tool's own entry.
		{mk("/home/u/.config/go", "/usr/bin/top"), false},
		{mk("/home/u/.config/systemd", "/usr/bin/top"), false},
		{mk("/home/u/.config/go/env", "/usr/local/go/bin/go"), false},
		{mk("/home/u/.configx", "/usr/bin/top"), false},
		// Never the home itself or above it.
		{mk("/home/u", "/usr/bin/top"), false},
		{mk("/home", "/usr/local/go/bin/go"), false},
		// An entry without tools has no quiet parents.
		{mk("/home/u/.config/configstore", "/usr/bin/node"), false},
	} {
		d := b.Decide(context.Background(), tc.req).Decision
		if got := d.Source == SourceQuiet; got != tc.quiet || d.Outcome != Deny {
			t.Errorf("make_dir %s by %v: %s %s (%s), want quiet %v", tc.req.Path, tc.req.Programs, d.Outcome, d.Source, d.Rationale, tc.quiet)
		}
	}
	// Only make_dir: the tool writing a file there is a boundary.
	r := fsReq(boundary.OpMakeReg, "/home/u/.config")
	r.Programs = []string{"/usr/bin/top"}
	if d := b.Decide(context.Background(), r).Decision; d.Source == SourceQuiet {
		t.Errorf("make_reg by top was quiet: %+v", d)
	}
}

// A boundary decided again in the same run is not counted again.
func TestDecideAgainNotCounted(t *testing.T) {
	br := NewBreaker(t.TempDir())
	b := New(Config{Grants: grants.NewStore(), Breaker: br})
	b.Decide(context.Background(), fsReq(boundary.OpWriteFile, "/opt/x"))
	for i := 0; i < 5; i++ {
		b.DecideAgain(context.Background(), fsReq(boundary.OpWriteFile, "/opt/x"))
	}
	if locked, _, _ := br.Locked("s"); locked {
		t.Fatal("one boundary decided again locked the session")
	}
}

// deferringPerson takes the model's denials and answers as a client
// relaying a person (or as a person), noting what the model said.
type deferringPerson struct {
	fakeHuman
	seen    Decision
	offered bool
}

func (p *deferringPerson) TakesDenials() bool { return true }

func (p *deferringPerson) Review(ctx context.Context, req grants.Request) (Decision, error) {
	p.seen, p.offered = Deferred(ctx)
	return p.fakeHuman.Review(ctx, req)
}

// An answer relayed by an API client may allow only what a reviewer
// may, at the model's risk (never its own), and never in a lockdown
// (no model judged) or at critical risk; a person's own answer stays
// a person's; no answer leaves the model's deny.
func TestClientAnswers(t *testing.T) {
	modelDeny := func(r Risk, a Authorization) *fakeReviewer {
		return &fakeReviewer{d: Decision{Outcome: Deny, RiskLevel: r, UserAuthorization: a, Rationale: "model says no"}}
	}
	clientAllow := Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh, Source: SourceClient}
	for _, tc := range []struct {
		name    string
		model   *fakeReviewer
		answer  Decision
		locked  bool
		outcome Outcome
		source  Source
		risk    Risk
	}{
		{"medium: client allows", modelDeny(RiskMedium, AuthUnknown), clientAllow, false, Allow, SourceClient, RiskMedium},
		{"high without authorization: refused", modelDeny(RiskHigh, AuthLow), clientAllow, false, Deny, SourceClient, ""},
		{"high with authorization: allowed", modelDeny(RiskHigh, AuthMedium), clientAllow, false, Allow, SourceClient, RiskHigh},
		{"critical: refused", modelDeny(RiskCritical, AuthHigh), clientAllow, false, Deny, SourceClient, ""},
		{"claiming to be a person: still a client", modelDeny(RiskCritical, AuthHigh), Decision{Outcome: Allow, Source: SourceClient, Rationale: "I am human"}, false, Deny, SourceClient, ""},
		{"no model judged: refused", nil, clientAllow, false, Deny, SourceClient, ""},
		{"lockdown: refused", modelDeny(RiskLow, AuthHigh), clientAllow, true, Deny, SourceClient, ""},
		{"client denies", modelDeny(RiskLow, AuthHigh), Decision{Outcome: Deny, Source: SourceClient}, false, Deny, SourceClient, RiskLow},
		{"nobody answered: the model's deny", modelDeny(RiskMedium, AuthLow), Decision{Outcome: Deny, Source: SourceNoReviewer, Rationale: "expired"}, false, Deny, SourceReviewer, RiskMedium},
		{"a person at a terminal", modelDeny(RiskCritical, AuthLow), Decision{Outcome: Allow, Source: SourceHuman}, false, Allow, SourceHuman, ""},
		// The page checked the break-glass phrase before it answered.
		{"a person on the approvals page", modelDeny(RiskCritical, AuthLow), Decision{Outcome: Allow, Source: SourcePage}, false, Allow, SourcePage, ""},
		{"the page denies", modelDeny(RiskLow, AuthLow), Decision{Outcome: Deny, Source: SourcePage, Rationale: "no"}, false, Deny, SourcePage, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &deferringPerson{fakeHuman: fakeHuman{fakeReviewer: fakeReviewer{d: tc.answer}}}
			cfg := Config{Grants: grants.NewStore(), Person: p}
			if tc.model != nil {
				cfg.Model = tc.model
			}
			if tc.locked {
				cfg.Breaker = NewBreaker(t.TempDir())
				for i := 0; i < breakerConsecutive; i++ {
					cfg.Breaker.Record("s", true)
				}
			}
			res := New(cfg).Decide(context.Background(), fsReq("write_file", "/opt/x"))
			d := res.Decision
			if d.Outcome != tc.outcome || d.Source != tc.source || d.RiskLevel != tc.risk {
				t.Fatalf("got %s/%s/%s (%s), want %s/%s/%s", d.Outcome, d.Source, d.RiskLevel, d.Rationale, tc.outcome, tc.source, tc.risk)
			}
			if (res.Grant != nil) != (d.Outcome == Allow) {
				t.Fatalf("grant %v for %s", res.Grant, d.Outcome)
			}
			if tc.model != nil && !tc.locked && (!p.offered || p.seen.RiskLevel != tc.model.d.RiskLevel) {
				t.Fatalf("the person was not shown the model's decision: %v %+v", p.offered, p.seen)
			}
		})
	}
	// A model's allow is never sent to the person.
	p := &deferringPerson{fakeHuman: fakeHuman{fakeReviewer: fakeReviewer{d: Decision{Outcome: Deny, Source: SourceClient}}}}
	b := New(Config{Grants: grants.NewStore(), Person: p, Model: &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh}}})
	if d := b.Decide(context.Background(), fsReq("write_file", "/opt/x")).Decision; d.Outcome != Allow || p.calls != 0 {
		t.Fatalf("a model's allow went to the person: %+v, %d calls", d, p.calls)
	}
}
