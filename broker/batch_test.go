package broker

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/grants"
)

// slowModel denies everything after a pause, counting calls and the
// most that ran at once.
type slowModel struct {
	mu            sync.Mutex
	inFlight, max int
	calls         atomic.Int64
	sent          []string
}

func (m *slowModel) Review(_ context.Context, req grants.Request) (Decision, error) {
	m.calls.Add(1)
	m.mu.Lock()
	m.inFlight++
	m.max = max(m.max, m.inFlight)
	m.sent = append(m.sent, req.Path)
	m.mu.Unlock()
	time.Sleep(30 * time.Millisecond)
	m.mu.Lock()
	m.inFlight--
	m.mu.Unlock()
	return Decision{Outcome: Deny, RiskLevel: RiskMedium, UserAuthorization: AuthUnknown, Rationale: "no"}, nil
}

// DecideEach decides as one-after-another would, the breaker counting
// each in turn, while the model's reviews run a few at a time; what the
// hard denies decide is never sent.
func TestDecideEach(t *testing.T) {
	model := &slowModel{}
	b := New(Config{Model: model, Grants: grants.NewStore(), Breaker: NewBreaker(t.TempDir()),
		Hard: HardDenies{Secrets: []string{"/home/u/.ssh"}}})
	var reqs []grants.Request
	for i := range 6 {
		r := fsReq(boundary.OpWriteFile, fmt.Sprintf("/opt/out-%d", i))
		r.Session = "s-batch"
		reqs = append(reqs, r)
	}
	secret := fsReq(boundary.OpReadFile, "/home/u/.ssh/id_rsa")
	secret.Session = "s-batch"
	reqs = append(reqs, secret)
	res := b.DecideEach(context.Background(), reqs, nil)
	var got []Source
	for _, r := range res {
		got = append(got, r.Decision.Source)
	}
	want := []Source{SourceReviewer, SourceReviewer, SourceReviewer, SourceCircuitBreaker, SourceCircuitBreaker, SourceCircuitBreaker, SourceHardDeny}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sources %v, want %v (as one after another)", got, want)
	}
	if model.max < 2 || model.max > maxConcurrentModel {
		t.Errorf("at most %d model reviews ran at once, want 2..%d", model.max, maxConcurrentModel)
	}
	for _, p := range model.sent {
		if p == secret.Path {
			t.Errorf("a hard-denied request was sent to the model")
		}
	}
}
