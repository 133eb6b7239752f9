package broker

import (
	"context"
	"sync"

	"github.com/sandboxd/sandboxd/grants"
)

// maxConcurrentModel bounds the model reviews of one batch that run at
// once: a model answers each in seconds, and a handful in parallel keeps
// an attempt with several boundaries from waiting in line without
// flooding the endpoint.
const maxConcurrentModel = 4

// modelAnswer is a model review taken ahead of its request's turn.
type modelAnswer struct {
	d   Decision
	err error
}

// DecideEach decides reqs as Decide (or DecideAgain, where again[i])
// would one after another, in their order, with the same results: the
// circuit breaker counts each before the next is decided. Only the model
// calls run ahead, a few at a time, for the requests that reach the
// model slot; an answer whose request no longer reaches it when its turn
// comes (a lockdown tripped before it) is dropped unused.
func (b *Broker) DecideEach(ctx context.Context, reqs []grants.Request, again []bool) []Result {
	ahead := b.reviewAhead(ctx, reqs)
	out := make([]Result, len(reqs))
	for i, req := range reqs {
		c := ctx
		if a, ok := ahead[i]; ok {
			c = withAnswer(ctx, a)
		}
		out[i] = b.decideCounted(c, req, i >= len(again) || !again[i])
	}
	return out
}

// reviewAhead has the model review, concurrently, every request the
// steps before the reviewers leave open now. Hard-denied, rule-decided
// and locked-down requests are never sent.
func (b *Broker) reviewAhead(ctx context.Context, reqs []grants.Request) map[int]*modelAnswer {
	if b.cfg.Model == nil || len(reqs) < 2 {
		return nil
	}
	ahead := map[int]*modelAnswer{}
	for i, req := range reqs {
		if _, done, locked, _ := b.preReview(req); !done && !locked {
			ahead[i] = &modelAnswer{}
		}
	}
	if len(ahead) < 2 {
		return nil // nothing to gain: the one review runs in its turn
	}
	sem := make(chan struct{}, maxConcurrentModel)
	var wg sync.WaitGroup
	for i, a := range ahead {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			a.d, a.err = b.cfg.Model.Review(ctx, reqs[i])
		}()
	}
	wg.Wait()
	return ahead
}

// answerKey carries a model answer taken ahead into its request's turn.
type answerKey struct{}

func withAnswer(ctx context.Context, a *modelAnswer) context.Context {
	return context.WithValue(ctx, answerKey{}, a)
}

// modelReview is the model's answer for req: the one taken ahead for it,
// or a fresh call.
func (b *Broker) modelReview(ctx context.Context, req grants.Request) (Decision, error) {
	if a, _ := ctx.Value(answerKey{}).(*modelAnswer); a != nil {
		return a.d, a.err
	}
	return b.cfg.Model.Review(ctx, req)
}
