package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/broker"
)

// Question is one question for a person, as a client sees it: what an
// allow would allow, where, and what the model said when it denied and
// deferred to a person.
type Question struct {
	// ID names the question in the API: random, unguessable.
	ID          string `json:"id"`
	Surface     string `json:"surface"`
	Operation   string `json:"operation"`
	Path        string `json:"path,omitempty"`
	Destination string `json:"destination,omitempty"`
	Command     string `json:"command"`
	Cwd         string `json:"cwd"`
	Session     string `json:"session,omitempty"`
	Intent      string `json:"intent,omitempty"`
	// Held: a connection waits for the answer (a retry waits otherwise).
	Held bool `json:"held,omitempty"`
	// Model is the model's deny, when it deferred to a person: its risk
	// level bounds what a relayed answer may allow (never critical).
	Model *broker.Decision `json:"model,omitempty"`
	// Production is the production marker the target matches, and
	// ProductionWhy which name matched it: the boundary is critical
	// before the model is asked, so only a person at the terminal, with
	// the break-glass phrase, may allow it.
	Production    string `json:"production,omitempty"`
	ProductionWhy string `json:"production_why,omitempty"`
	// ClientCannotAllow says why an API client's allow of this question
	// would not stand (only a person at the terminal passed with the
	// request could allow it), or is empty: a client asks its person
	// only what their answer can decide.
	ClientCannotAllow string    `json:"client_cannot_allow,omitempty"`
	CreatedAt         time.Time `json:"created_at"`
	ExpiresAt         time.Time `json:"expires_at"`
}

// Answer is one answer to a question: who gave it (SourceClient for an
// API client, SourceHuman for the person at the terminal the client
// passed), and the decision.
type Answer struct {
	Allow  bool
	Note   string
	Source broker.Source
	// Decision is a person's own, whole (the terminal's).
	Decision *broker.Decision
}

// Errors of Questions.
var (
	// ErrNoQuestion: no pending question of the caller's has this id
	// (another uid's is not told apart from none).
	ErrNoQuestion = errors.New("daemon: no such question")
	// ErrAnswered: the question has an answer already, or was withdrawn.
	ErrAnswered = errors.New("daemon: the question was answered or withdrawn")
	// ErrTooMany: the caller has as many questions waiting as it may.
	ErrTooMany = errors.New("daemon: too many questions wait")
)

// Questions is the daemon's one queue of questions for a person. Each
// has one answer: the first to come (an API client, the terminal a
// client passed, later the approvals page) wins, later ones are refused
// (ErrAnswered), and expiry or the end of the run withdraws it, which
// denies. It is safe for concurrent use.
type Questions struct {
	wait   time.Duration
	maxUID int
	now    func() time.Time
	// mu guards byID and waiting.
	mu sync.Mutex
	// byID holds the pending questions and, until they would have
	// expired, the closed ones (so a late answer gets ErrAnswered).
	byID map[string]*pending
	// waiting counts each uid's open questions.
	waiting map[int]int
}

// pending is one question in the queue.
type pending struct {
	q   Question
	uid int
	// answer takes the first answer (buffered: one).
	answer chan Answer
	closed bool
}

// NewQuestions returns a queue whose questions expire after wait (0:
// 60 s), at most maxPerUID open at once for a uid (0: 16).
func NewQuestions(wait time.Duration, maxPerUID int) *Questions {
	if wait <= 0 {
		wait = 60 * time.Second
	}
	if maxPerUID <= 0 {
		maxPerUID = 16
	}
	return &Questions{wait: wait, maxUID: maxPerUID, now: time.Now, byID: map[string]*pending{}, waiting: map[int]int{}}
}

// Ticket is a question in the queue, for the one who asked it.
type Ticket struct {
	qs *Questions
	p  *pending
}

// Question is the question as asked (its id and expiry set).
func (t *Ticket) Question() Question { return t.p.q }

// Ask puts q in the queue for uid, with a fresh id and expiry.
func (qs *Questions) Ask(uid int, q Question) (*Ticket, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.pruneLocked()
	if qs.waiting[uid] >= qs.maxUID {
		return nil, ErrTooMany
	}
	q.ID = hex.EncodeToString(b[:])
	q.CreatedAt = qs.now()
	q.ExpiresAt = q.CreatedAt.Add(qs.wait)
	p := &pending{q: q, uid: uid, answer: make(chan Answer, 1)}
	qs.byID[q.ID] = p
	qs.waiting[uid]++
	return &Ticket{qs: qs, p: p}, nil
}

// Wait waits for the first answer, the question's expiry or ctx's end,
// and withdraws the question: ok is false when no answer came, and why
// says what happened instead (a sentence safe to show).
func (t *Ticket) Wait(ctx context.Context) (a Answer, ok bool, why string) {
	timer := time.NewTimer(t.p.q.ExpiresAt.Sub(t.qs.now()))
	defer timer.Stop()
	select {
	case a = <-t.p.answer:
		ok = true
	case <-timer.C:
		why = "no answer in time"
	case <-ctx.Done():
		why = "the question was withdrawn before it was answered"
	}
	t.qs.close(t.p)
	if !ok {
		// An answer that won the race with the expiry still counts.
		select {
		case a = <-t.p.answer:
			ok, why = true, ""
		default:
		}
	}
	return a, ok, why
}

// close withdraws p: no answer is taken after this.
func (qs *Questions) close(p *pending) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	if qs.waiting[p.uid]--; qs.waiting[p.uid] <= 0 {
		delete(qs.waiting, p.uid)
	}
}

// Answer gives uid's question id its answer: ErrNoQuestion when uid has
// no such question, ErrAnswered when it has one already or was
// withdrawn.
func (qs *Questions) Answer(uid int, id string, a Answer) error {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	p, ok := qs.byID[id]
	if !ok || p.uid != uid {
		return ErrNoQuestion
	}
	if p.closed {
		return ErrAnswered
	}
	select {
	case p.answer <- a:
	default:
		return ErrAnswered
	}
	// Answered: closed now, so nothing else is taken.
	p.closed = true
	if qs.waiting[p.uid]--; qs.waiting[p.uid] <= 0 {
		delete(qs.waiting, p.uid)
	}
	return nil
}

// Waiting counts the open questions of every uid.
func (qs *Questions) Waiting() int {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	n := 0
	for _, w := range qs.waiting {
		n += w
	}
	return n
}

// Pending lists uid's open questions, oldest first.
func (qs *Questions) Pending(uid int) []Question {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.pruneLocked()
	out := []Question{}
	for _, p := range qs.byID {
		if p.uid == uid && !p.closed {
			out = append(out, p.q)
		}
	}
	sortQuestions(out)
	return out
}

// pruneLocked forgets closed questions past their expiry.
func (qs *Questions) pruneLocked() {
	now := qs.now()
	for id, p := range qs.byID {
		if p.closed && now.After(p.q.ExpiresAt) {
			delete(qs.byID, id)
		}
	}
}

// sortQuestions orders qs oldest first (then by id, for a stable list).
func sortQuestions(qs []Question) {
	slices.SortFunc(qs, func(a, b Question) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// Get is uid's open question id.
func (qs *Questions) Get(uid int, id string) (Question, bool) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	p, ok := qs.byID[id]
	if !ok || p.uid != uid || p.closed {
		return Question{}, false
	}
	return p.q, true
}
