package broker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/review"
)

// countingCompleter answers every prompt with a fixed verdict after a
// pause, counting what was sent to the "endpoint".
type countingCompleter struct {
	answer string
	n      atomic.Int64
}

func (c *countingCompleter) Complete(_ context.Context, _, _ string, validate func(string) error) (review.Completion, error) {
	c.n.Add(1)
	time.Sleep(50 * time.Millisecond)
	if err := validate(c.answer); err != nil {
		return review.Completion{}, err
	}
	return review.Completion{Content: c.answer, PromptTokens: 900, CompletionTokens: 40}, nil
}

func attackReq(i int) grants.Request {
	p := fmt.Sprintf("/opt/out-%d", i)
	return grants.Request{Session: "uid 0: batch", Cwd: "/w", Command: "cp a /opt", Surface: boundary.Filesystem,
		Operation: boundary.OpWriteFile, Path: p, ResolvedPath: p, Agent: "cli", Intent: "copy"}
}

// Found in review: DecideEach must give the results one-after-another
// would. With a session token cap that admits one review, one after
// another sends one prompt and denies the rest (cap reached); reviews run
// ahead must not all pass the cap together.
func TestAttackDecideEachExceedsTokenCap(t *testing.T) {
	run := func(batch bool) (int64, []broker.Source) {
		c := &countingCompleter{answer: `{"outcome":"allow","risk_level":"low","user_authorization":"high","rationale":"ok"}`}
		m := &review.Model{Client: c, Redactor: review.NewRedactor(nil),
			Meter: &review.Meter{Dir: t.TempDir(), Caps: review.Caps{TokensPerSession: 1500, CallsPerSession: 1 << 40, CallsPerHour: 1 << 40, TokensPerHour: 1 << 40}}}
		b := broker.New(broker.Config{Model: m, Grants: grants.NewStore()})
		var reqs []grants.Request
		for i := range 4 {
			reqs = append(reqs, attackReq(i))
		}
		var res []broker.Result
		if batch {
			res = b.DecideEach(context.Background(), reqs, nil)
		} else {
			for _, r := range reqs {
				res = append(res, b.Decide(context.Background(), r))
			}
		}
		var src []broker.Source
		for _, r := range res {
			src = append(src, r.Decision.Source)
		}
		return c.n.Load(), src
	}
	seqN, seqSrc := run(false)
	batchN, batchSrc := run(true)
	if batchN != seqN || fmt.Sprint(seqSrc) != fmt.Sprint(batchSrc) {
		t.Fatalf("one after another: %d prompts sent, sources %v; DecideEach: %d sent, sources %v", seqN, seqSrc, batchN, batchSrc)
	}
}

// Found in review: requests the lockdown will decide at their turn must
// not be sent ahead: with a model that denies, one after another sends 3
// and the lockdown decides the rest; DecideEach must send no more.
func TestAttackDecideEachSendsLockedDown(t *testing.T) {
	run := func(batch bool) int64 {
		c := &countingCompleter{answer: `{"outcome":"deny","risk_level":"medium","user_authorization":"unknown","rationale":"no"}`}
		m := &review.Model{Client: c, Redactor: review.NewRedactor(nil)}
		b := broker.New(broker.Config{Model: m, Grants: grants.NewStore(), Breaker: broker.NewBreaker(t.TempDir())})
		var reqs []grants.Request
		for i := range 8 {
			reqs = append(reqs, attackReq(i))
		}
		if batch {
			b.DecideEach(context.Background(), reqs, nil)
		} else {
			for _, r := range reqs {
				b.Decide(context.Background(), r)
			}
		}
		return c.n.Load()
	}
	if seq, bat := run(false), run(true); bat > seq {
		t.Fatalf("one after another sends %d prompts; DecideEach sends %d (the rest were for requests the lockdown decides)", seq, bat)
	}
}
