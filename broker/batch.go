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
// calls run ahead, a few at a time, and only for requests the sequence
// would certainly put to the model: a wave stops where the breaker could
// lock if every request before it were denied, so nothing is sent that
// deciding one at a time would not have sent. An answer whose request no
// longer reaches the model in its turn is dropped.
func (b *Broker) DecideEach(ctx context.Context, reqs []grants.Request, again []bool) []Result {
	out := make([]Result, len(reqs))
	for i := 0; i < len(reqs); {
		end, wave := b.wave(ctx, reqs, i)
		ahead := b.reviewAhead(ctx, reqs, wave)
		for k := i; k < end; k++ {
			c := ctx
			if a, ok := ahead[k]; ok {
				c = withAnswer(ctx, a)
			}
			out[k] = b.decideCounted(c, reqs[k], k >= len(again) || !again[k])
		}
		i = end
	}
	return out
}

// wave is the next run of requests from i decided before the breaker is
// asked again (end excluded), and those of them that reach the model.
func (b *Broker) wave(ctx context.Context, reqs []grants.Request, i int) (end int, wave []int) {
	room := len(reqs) - i
	if b.cfg.Breaker != nil && reqs[i].Session != "" {
		if r, err := b.cfg.Breaker.Headroom(reqs[i].Session); err == nil {
			room = min(room, r)
		} else {
			room = 0
		}
	}
	end = i + max(room, 1) // at least one: a locked session decides it
	if b.cfg.Model == nil || room < 2 {
		return end, nil
	}
	for k := i; k < end; k++ {
		if _, prod := b.cfg.Production.match(reqs[k]); prod {
			continue // never put to the model: see reviewProduction
		}
		if _, covered := b.intent(ctx, reqs[k]); covered && !b.asked(reqs[k]) {
			continue // a person's intent decides it: never put to the model
		}
		if _, done, locked, _ := b.preReview(reqs[k]); !done && !locked && reqs[k].Session == reqs[i].Session {
			wave = append(wave, k)
		}
	}
	if r, ok := b.cfg.Model.(roomer); ok && len(wave) > 1 && !r.Room(reqs[i].Session, len(wave)) {
		wave = nil // near a cap: which review it stops must not depend on timing
	}
	return end, wave
}

// roomer is a model reviewer with caps: Room reports whether n reviews
// in a session fit them together.
type roomer interface {
	Room(session string, n int) bool
}

// reviewAhead has the model review the wave's requests concurrently.
func (b *Broker) reviewAhead(ctx context.Context, reqs []grants.Request, wave []int) map[int]*modelAnswer {
	if len(wave) < 2 {
		return nil // nothing to gain: the one review runs in its turn
	}
	ahead := map[int]*modelAnswer{}
	sem := make(chan struct{}, maxConcurrentModel)
	var wg sync.WaitGroup
	for _, i := range wave {
		a := &modelAnswer{}
		ahead[i] = a
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
