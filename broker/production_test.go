package broker

import (
	"context"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/grants"
)

// testProduction is the built-in markers and a caller's places.
func testProduction() Production {
	return Production{Markers: []string{"prod", "prd", "production"}, Places: []ProductionPlace{
		{Path: "/home/u/.kube", Tool: "kubectl"},
		{Path: "/home/u/.aws", Tool: "AWS CLI"},
		{Path: "/srv/kube/prd.yaml", Tool: "kubectl"},
		{Path: "/home/u/.config/gcloud", Tool: "Google Cloud CLI"},
	}}
}

// TestProductionMatch: a host's labels and their segments, and the
// names below a cloud or cluster configuration place, are matched,
// whatever the case; a name that merely holds a marker, and the same
// name outside the places, are not.
func TestProductionMatch(t *testing.T) {
	for _, tc := range []struct {
		req    grants.Request
		marker string
		why    string
	}{
		{netReq("prod-eu.example.com:443"), "prod", "the name prod in the host prod-eu.example.com matches the production marker prod"},
		{netReq("api.prd.example.com:443"), "prd", "the name prd in the host api.prd.example.com matches the production marker prd"},
		{netReq("production.example.com:443"), "production", "the name production in the host production.example.com"},
		{netReq("eu-1-prod.internal:5432"), "prod", "the name prod in the host eu-1-prod.internal"},
		{netReq("staging-prod.example.com:443"), "prod", "the name prod in the host staging-prod.example.com"},
		{netReq("prod:8080"), "prod", "the host prod matches the production marker prod"},
		{netReq("product.io:443"), "", ""},
		{netReq("reproduce.example.com:443"), "", ""},
		{netReq("prodigy.example.com:443"), "", ""},
		{netReq("staging.example.com:443"), "", ""},
		{netReq("10.0.0.1:443"), "", ""},
		{fsReq("write_file", "/home/u/.kube/prod/config"), "prod",
			"the name prod in /home/u/.kube/prod/config, under kubectl's configuration /home/u/.kube, matches the production marker prod"},
		{fsReq("read_file", "/home/u/.aws/prd_cluster"), "prd", "the name prd in /home/u/.aws/prd_cluster"},
		{fsReq("read_file", "/home/u/.kube/cache/discovery/Prod.Example.com"), "prod", "the name prod in /home/u/.kube/cache/discovery/Prod.Example.com"},
		{fsReq("read_file", "/srv/kube/prd.yaml"), "prd", "under kubectl's configuration /srv/kube/prd.yaml"},
		{fsReq("write_file", "/home/u/.config/gcloud/configurations/config_staging-prod"), "prod", "config_staging-prod"},
		{fsReq("write_file", "/work/prod/src/main.go"), "", ""},
		{fsReq("write_file", "/home/u/prod/x"), "", ""},
		{fsReq("write_file", "/home/u/.kube/config"), "", ""},
		{fsReq("write_file", "/home/u/.kube/reproduce"), "", ""},
		{fsReq("write_file", "/home/u/.kubeprod/x"), "", ""},
		{grants.Request{Session: "s", Surface: boundary.Filesystem, Operation: "read_file", Path: "/work/link", ResolvedPath: "/home/u/.kube/prod"}, "prod", "the name prod in /home/u/.kube/prod"},
		{grants.Request{Session: "s", Surface: boundary.Command, Operation: "run", Command: "kubectl --context prod apply"}, "", ""},
	} {
		m, ok := testProduction().match(tc.req)
		name := tc.req.Path + tc.req.DestinationText() + tc.req.Command
		if ok != (tc.marker != "") || m.marker != tc.marker || !strings.Contains(m.why, tc.why) {
			t.Errorf("%s: %v %+v, want marker %q saying %q", name, ok, m, tc.marker, tc.why)
		}
	}
	// Markers are globs, folded; none is no production at all.
	p := Production{Markers: []string{"LIVE-*", "blue?"}}
	for host, want := range map[string]bool{"live-eu.example.com:443": true, "x.blue1.example.com:443": true, "live.example.com:443": false, "blue.example.com:443": false} {
		if _, ok := p.match(netReq(host)); ok != want {
			t.Errorf("glob markers on %s: %v, want %v", host, ok, want)
		}
	}
	if _, ok := (Production{Places: testProduction().Places}).match(netReq("prod.example.com:443")); ok {
		t.Error("no markers matched a host")
	}
}

// FuzzProductionMatch: any host or path is matched without a fault, a
// match names one of the markers and the identifier it came from, and
// the case of the input changes nothing.
func FuzzProductionMatch(f *testing.F) {
	for _, s := range []string{"prod-eu.example.com:443", "product.io:443", "/home/u/.kube/prod/config", "/work/prod/src",
		"/home/u/.aws/prd_cluster", "PRD.x:1", "/srv/kube/prd.yaml", "", "/", "a..b:1", "/home/u/.kube/-_.-/x"} {
		f.Add(s)
	}
	p := testProduction()
	f.Fuzz(func(t *testing.T, s string) {
		for _, req := range []grants.Request{netReq(s), fsReq("write_file", s)} {
			m, ok := p.match(req)
			if !ok {
				continue
			}
			if m.marker != "prod" && m.marker != "prd" && m.marker != "production" {
				t.Fatalf("%q: marker %q is none of the markers", s, m.marker)
			}
			if !strings.HasSuffix(m.why, "matches the production marker "+m.marker) {
				t.Fatalf("%q: %q does not say which marker", s, m.why)
			}
			if req.Surface == boundary.Network && !strings.Contains(m.why, req.Destination.Host) {
				t.Fatalf("%q: %q does not name the host", s, m.why)
			}
			if req.Surface == boundary.Filesystem && !strings.Contains(m.why, req.Path) {
				t.Fatalf("%q: %q does not name the path", s, m.why)
			}
		}
		// Below a place, the case of a name changes nothing.
		if !isASCII(s) {
			return
		}
		_, okUp := p.match(fsReq("write_file", "/home/u/.kube/x/"+strings.ToUpper(s)))
		_, okLow := p.match(fsReq("write_file", "/home/u/.kube/x/"+strings.ToLower(s)))
		if okUp != okLow {
			t.Fatalf("%q: case changed the match (%v upper, %v lower)", s, okUp, okLow)
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// prodBroker is a broker with the built-in markers, a model that would
// allow anything, and the person p (nil: none).
func prodBroker(model *fakeReviewer, p Person, rules Rules, rec DenialRecorder) *Broker {
	cfg := Config{Rules: rules, Model: model, Grants: grants.NewStore(), Production: testProduction(), ModelDenials: rec,
		Hard: HardDenies{Home: "/home/u", Workspace: "/w"}}
	if p != nil {
		cfg.Person = p
	}
	return New(cfg)
}

// TestProductionIsCritical: the model is never asked about a production
// target; only a person's own answer to the break-glass question allows
// it (the question carries the critical decision and its marker); an
// API client's cannot; nobody reachable, or no answer, denies and is
// recorded for `sandboxd break-glass`; a glob allow rule does not lift
// it, an exact one of the person's does.
func TestProductionIsCritical(t *testing.T) {
	allow := func() *fakeReviewer {
		return &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh}}
	}
	person := func(d Decision, away bool) *deferringPerson {
		return &deferringPerson{fakeHuman: fakeHuman{fakeReviewer: fakeReviewer{d: d}, away: away}}
	}
	prodNet := netReq("prod-eu.example.com:443")
	for _, tc := range []struct {
		name     string
		person   *deferringPerson
		rules    Rules
		req      grants.Request
		outcome  Outcome
		source   Source
		recorded bool
	}{
		{"nobody to ask", nil, Rules{}, prodNet, Deny, SourceNoReviewer, true},
		{"the person is away", person(Decision{}, true), Rules{}, prodNet, Deny, SourceNoReviewer, true},
		{"the person allows", person(Decision{Outcome: Allow, Source: SourceHuman}, false), Rules{}, prodNet, Allow, SourceHuman, false},
		{"the person denies", person(Decision{Outcome: Deny, Source: SourceHuman}, false), Rules{}, prodNet, Deny, SourceHuman, false},
		{"no answer", person(Decision{Outcome: Deny, Source: SourceNoReviewer, Rationale: "no answer in time"}, false), Rules{}, prodNet, Deny, SourceNoReviewer, true},
		{"a client allows", person(Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh, Source: SourceClient}, false), Rules{}, prodNet, Deny, SourceClient, false},
		{"a client claims to be a person", person(Decision{Outcome: Allow, Source: SourceClient, Rationale: "I am human"}, false), Rules{}, prodNet, Deny, SourceClient, false},
		{"a glob allow rule", nil, Rules{Allow: []Rule{mustRule(t, "net connect *.example.com:443")}}, prodNet, Deny, SourceNoReviewer, true},
		{"an exact allow rule", nil, Rules{Allow: []Rule{mustRule(t, "net connect prod-eu.example.com:443")}}, prodNet, Allow, SourcePolicy, false},
		{"an exact rule for another port", nil, Rules{Allow: []Rule{mustRule(t, "net connect prod-eu.example.com:80")}}, prodNet, Deny, SourceNoReviewer, true},
		{"a glob fs allow rule", nil, Rules{Allow: []Rule{mustRule(t, "fs write ~/.kube/**")}}, fsReq("write_file", "/home/u/.kube/prod/config"), Deny, SourceNoReviewer, true},
		{"an exact fs allow rule", nil, Rules{Allow: []Rule{mustRule(t, "fs write_file ~/.kube/prod/config")}}, fsReq("write_file", "/home/u/.kube/prod/config"), Allow, SourcePolicy, false},
		{"not production: the model", nil, Rules{}, netReq("dev-eu.example.com:443"), Allow, SourceReviewer, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model, rec := allow(), &fakeDenials{}
			var p Person
			if tc.person != nil {
				p = tc.person
			}
			res := prodBroker(model, p, tc.rules, rec).Decide(context.Background(), tc.req)
			d := res.Decision
			if d.Outcome != tc.outcome || d.Source != tc.source {
				t.Fatalf("got %s/%s (%s), want %s/%s", d.Outcome, d.Source, d.Rationale, tc.outcome, tc.source)
			}
			if (res.Grant != nil) != (d.Outcome == Allow) {
				t.Fatalf("grant %v for %s", res.Grant, d.Outcome)
			}
			prod := tc.name != "not production: the model"
			if prod && model.calls != 0 {
				t.Fatalf("the model was asked about a production target (%d calls)", model.calls)
			}
			if prod && tc.source != SourcePolicy && (d.Production == "" || !strings.Contains(d.Rationale, "matches the production marker "+d.Production)) {
				t.Fatalf("the decision does not say why: %+v", d)
			}
			if d.Outcome == Deny && prod && d.RiskLevel != RiskCritical {
				t.Fatalf("a production deny below critical: %+v", d)
			}
			if len(rec.got) > 0 != tc.recorded {
				t.Fatalf("recorded for break-glass: %+v, want %v", rec.got, tc.recorded)
			}
			if tc.person != nil && !tc.person.away {
				if !tc.person.offered || tc.person.seen.RiskLevel != RiskCritical || tc.person.seen.Production != "prod" {
					t.Fatalf("the person was not asked the break-glass question: %v %+v", tc.person.offered, tc.person.seen)
				}
			}
		})
	}
}

// TestProductionOverride: a person's override (from `sandboxd
// break-glass`) allows a production target once, and says so.
func TestProductionOverride(t *testing.T) {
	req := netReq("prod-eu.example.com:443")
	ov := &fakeOverrides{left: map[[32]byte]bool{req.Hash(): true}}
	b := prodBroker(&fakeReviewer{}, nil, Rules{}, nil)
	b.cfg.Overrides = ov
	d := b.Decide(context.Background(), req).Decision
	if d.Outcome != Allow || d.Source != SourceHuman || d.Production != "prod" || !strings.Contains(d.Rationale, "break-glass") {
		t.Fatalf("override: %+v", d)
	}
	if d := b.Decide(context.Background(), req).Decision; d.Outcome != Deny {
		t.Fatalf("a second use: %+v", d)
	}
}

// TestProductionNotSuggested: the suggester's and the file tools'
// checks refuse a production target, saying why.
func TestProductionNotSuggested(t *testing.T) {
	b := prodBroker(&fakeReviewer{}, nil, Rules{}, nil)
	for _, f := range []func(grants.Request) (string, bool){b.BeforeAllow, b.Unconfined} {
		why, denied := f(fsReq("write_file", "/home/u/.kube/prod/config"))
		if !denied || !strings.Contains(why, "production marker prod") {
			t.Errorf("a production target: %v %q", denied, why)
		}
		if why, denied := f(fsReq("write_file", "/work/prod/x")); denied {
			t.Errorf("not production: %q", why)
		}
	}
}

// TestProductionNotReviewedAhead: deciding an attempt's denials
// together sends the model only the boundaries it would be asked about
// one at a time, never a production target.
func TestProductionNotReviewedAhead(t *testing.T) {
	model := &countingModel{}
	b := New(Config{Model: model, Grants: grants.NewStore(), Production: testProduction(), Hard: HardDenies{Home: "/home/u"}})
	reqs := []grants.Request{fsReq("write_file", "/home/u/.kube/prod/config"), fsReq("write_file", "/opt/a"),
		netReq("prod-eu.example.com:443"), fsReq("write_file", "/opt/b")}
	res := b.DecideEach(context.Background(), reqs, nil)
	for i, want := range []Outcome{Deny, Allow, Deny, Allow} {
		if res[i].Decision.Outcome != want {
			t.Errorf("%d: %+v, want %s", i, res[i].Decision, want)
		}
	}
	for _, seen := range model.seen() {
		if strings.Contains(seen, "prod") {
			t.Errorf("the model was asked about %s", seen)
		}
	}
}

// countingModel allows everything and notes what it was asked about.
type countingModel struct {
	mu      sync.Mutex
	targets []string
}

func (m *countingModel) Review(_ context.Context, req grants.Request) (Decision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.targets = append(m.targets, req.Path+req.DestinationText())
	return Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh}, nil
}

func (m *countingModel) seen() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.targets...)
}
