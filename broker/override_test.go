package broker

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/grants"
)

// fakeOverrides holds one-use overrides by request hash and counts uses.
type fakeOverrides struct {
	mu    sync.Mutex // guards all below
	left  map[[32]byte]bool
	calls int
	err   error
}

func (f *fakeOverrides) Use(_ context.Context, req grants.Request) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return false, f.err
	}
	h := req.Hash()
	if f.left[h] {
		delete(f.left, h)
		return true, nil
	}
	return false, nil
}

// fakeDenials records what the broker reports as model denials.
type fakeDenials struct {
	got []Decision
}

func (f *fakeDenials) Record(_ context.Context, _ grants.Request, d Decision) error {
	f.got = append(f.got, d)
	return nil
}

func overrideBroker(model Reviewer, ov OverrideStore, rec DenialRecorder, rules Rules) (*Broker, *grants.Store) {
	store := grants.NewStore()
	return New(Config{Rules: rules, Model: model, Grants: store, Overrides: ov, ModelDenials: rec, Hard: HardDenies{
		Secrets: []string{"/home/u/.ssh"}, Own: []string{"/home/u/.local/state/sandboxd"},
		Home: "/home/u", Workspace: "/w"}}), store
}

// TestOverrideNeverBeatsHardDeny: an override for a hard-denied (or
// policy-denied) request is never even consulted.
func TestOverrideNeverBeatsHardDeny(t *testing.T) {
	for _, tc := range []struct {
		name  string
		req   grants.Request
		rules Rules
		src   Source
	}{
		{"secret", fsReq(boundary.OpReadFile, "/home/u/.ssh/id_rsa"), Rules{}, SourceHardDeny},
		{"own state", fsReq(boundary.OpWriteFile, "/home/u/.local/state/sandboxd/overrides/x.json"), Rules{}, SourceHardDeny},
		{"persistence", fsReq(boundary.OpMakeReg, "/w/.git/hooks/pre-commit"), Rules{}, SourceHardDeny},
		{"metadata", netReq("169.254.169.254:80"), Rules{}, SourceHardDeny},
		{"deny rule", fsReq(boundary.OpWriteFile, "/opt/x"), Rules{Deny: []Rule{mustRule(t, "fs write /opt/**")}}, SourcePolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakeReviewer{d: Decision{Outcome: Deny, RiskLevel: RiskMedium, Rationale: "no"}}
			ov := &fakeOverrides{left: map[[32]byte]bool{tc.req.Hash(): true}}
			b, _ := overrideBroker(model, ov, nil, tc.rules)
			res := b.Decide(context.Background(), tc.req)
			if res.Decision.Outcome != Deny || res.Decision.Source != tc.src || res.Grant != nil {
				t.Fatalf("got %+v", res)
			}
			if ov.calls != 0 || !ov.left[tc.req.Hash()] {
				t.Fatalf("the override was consulted (%d calls)", ov.calls)
			}
		})
	}
}

// TestOverrideAllowsOnce: the exact request is allowed once without
// asking the model, with a grant; the next time the model decides again,
// and its denial is recorded.
func TestOverrideAllowsOnce(t *testing.T) {
	model := &fakeReviewer{d: Decision{Outcome: Deny, RiskLevel: RiskMedium, Rationale: "outside the task"}}
	req := fsReq(boundary.OpWriteFile, "/opt/x")
	ov := &fakeOverrides{left: map[[32]byte]bool{req.Hash(): true}}
	rec := &fakeDenials{}
	b, store := overrideBroker(model, ov, rec, Rules{})
	other := req
	other.Command = "c2"
	if res := b.Decide(context.Background(), other); res.Decision.Outcome != Deny {
		t.Fatalf("a different request used the override: %+v", res)
	}
	res := b.Decide(context.Background(), req)
	if res.Decision.Outcome != Allow || res.Decision.Source != SourceHuman || res.Grant == nil || model.calls != 1 {
		t.Fatalf("override: %+v, model asked %d times", res, model.calls)
	}
	if err := store.Consume(res.Grant.Token, req); err != nil {
		t.Fatalf("the override's grant does not fit: %v", err)
	}
	res = b.Decide(context.Background(), req)
	if res.Decision.Outcome != Deny || res.Decision.Source != SourceReviewer || model.calls != 2 {
		t.Fatalf("second use: %+v, model asked %d times", res, model.calls)
	}
	if len(rec.got) != 2 || rec.got[1].Rationale != "outside the task" || rec.got[1].RiskLevel != RiskMedium {
		t.Fatalf("recorded %+v", rec.got)
	}
}

// TestOverrideAfterAllowRules: a request the policy allows never uses up
// an override.
func TestOverrideAfterAllowRules(t *testing.T) {
	req := fsReq(boundary.OpWriteFile, "/opt/x")
	ov := &fakeOverrides{left: map[[32]byte]bool{req.Hash(): true}}
	b, _ := overrideBroker(nil, ov, nil, Rules{Allow: []Rule{mustRule(t, "fs write_file /opt/x")}})
	if res := b.Decide(context.Background(), req); res.Decision.Source != SourcePolicy || ov.calls != 0 {
		t.Fatalf("got %+v, %d uses", res, ov.calls)
	}
}

// TestOverrideStoreErrorDenies: a store that fails is no override.
func TestOverrideStoreErrorDenies(t *testing.T) {
	req := fsReq(boundary.OpWriteFile, "/opt/x")
	ov := &fakeOverrides{left: map[[32]byte]bool{req.Hash(): true}, err: errors.New("disk on fire")}
	b, _ := overrideBroker(nil, ov, nil, Rules{})
	if res := b.Decide(context.Background(), req); res.Decision.Outcome != Deny || res.Grant != nil {
		t.Fatalf("got %+v", res)
	}
}

// TestOnlyModelDenialsRecorded: a model's failure, a model's allow and a
// person's deny are not recorded; a model allow refused at critical risk
// is (it is the model's judgement).
func TestOnlyModelDenialsRecorded(t *testing.T) {
	req := fsReq(boundary.OpWriteFile, "/opt/x")
	for _, tc := range []struct {
		name   string
		model  Reviewer
		person Person
		want   int
	}{
		{"model deny", &fakeReviewer{d: Decision{Outcome: Deny, RiskLevel: RiskHigh}}, nil, 1},
		{"model critical allow", &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskCritical, UserAuthorization: AuthHigh}}, nil, 1},
		{"model allow", &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh}}, nil, 0},
		{"model error, person denies", &fakeReviewer{err: errors.New("timeout")}, &fakeHuman{fakeReviewer: fakeReviewer{d: Decision{Outcome: Deny}}}, 0},
		{"person only", nil, &fakeHuman{fakeReviewer: fakeReviewer{d: Decision{Outcome: Deny}}}, 0},
		{"nobody", nil, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &fakeDenials{}
			b := New(Config{Model: tc.model, Person: tc.person, Grants: grants.NewStore(), ModelDenials: rec})
			b.Decide(context.Background(), req)
			if len(rec.got) != tc.want {
				t.Fatalf("recorded %+v, want %d", rec.got, tc.want)
			}
		})
	}
}
