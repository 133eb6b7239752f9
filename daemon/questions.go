package daemon

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/review"
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
	// Workspace is the project the exec named (empty: sandboxd finds it
	// from Cwd).
	Workspace string `json:"workspace,omitempty"`
	Session   string `json:"session,omitempty"`
	Intent    string `json:"intent,omitempty"`
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
	ClientCannotAllow string `json:"client_cannot_allow,omitempty"`
	// Critical: the model judged it critical, or it is a production
	// target; a person allows it only with the break-glass phrase.
	Critical  bool      `json:"critical,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Answer is one answer to a question: who gave it (SourceClient for an
// API client, SourceHuman for the person at the terminal the client
// passed), and the decision.
type Answer struct {
	Allow bool
	Note  string
	// Redirect: the deny is an instruction back to the agent (Note),
	// instead of an approval.
	Redirect bool
	Source   broker.Source
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
	// ErrPhrase: an allow of a critical question without its break-glass
	// phrase typed exactly.
	ErrPhrase = errors.New("daemon: the break-glass phrase is not the one shown")
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
	// history holds each uid's last closed questions, newest last.
	history map[int][]Closed
}

// pending is one question in the queue.
type pending struct {
	q   Question
	uid int
	// code is the break-glass code of a critical question ("" for
	// others): the approvals page shows it on the card and takes an
	// allow only with "BREAK-GLASS "+code typed back.
	code string
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
	return &Questions{wait: wait, maxUID: maxPerUID, now: time.Now, byID: map[string]*pending{}, waiting: map[int]int{}, history: map[int][]Closed{}}
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
	_, err := rand.Read(b[:])
	if err != nil {
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
	if q.Critical {
		if p.code, err = review.BreakGlassCode(); err != nil {
			return nil, err
		}
	}
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
	t.qs.remember(t.p, a, ok, why)
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
	return qs.answer(uid, id, a, func(*pending) error { return nil })
}

// AnswerPhrase is Answer for a front end that shows a critical
// question's break-glass code (the approvals page): an allow of a
// critical question stands only with phrase "BREAK-GLASS CODE" typed
// exactly (ErrPhrase otherwise, and the question stays open).
func (qs *Questions) AnswerPhrase(uid int, id string, a Answer, phrase string) error {
	return qs.answer(uid, id, a, func(p *pending) error {
		if a.Allow && p.code != "" && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(phrase)), []byte("BREAK-GLASS "+p.code)) != 1 {
			return ErrPhrase
		}
		return nil
	})
}

// answer gives p its answer a when check lets it.
func (qs *Questions) answer(uid int, id string, a Answer, check func(*pending) error) error {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	p, ok := qs.byID[id]
	if !ok || p.uid != uid {
		return ErrNoQuestion
	}
	if p.closed {
		return ErrAnswered
	}
	if err := check(p); err != nil {
		return err
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

// BreakGlass is the break-glass code of uid's open question id, for the
// front end that shows it to the person ("" when the question is not
// critical or not uid's open one).
func (qs *Questions) BreakGlass(uid int, id string) string {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	p, ok := qs.byID[id]
	if !ok || p.uid != uid || p.closed {
		return ""
	}
	return p.code
}

// maxHistory bounds each uid's history of closed questions.
const maxHistory = 100

// Closed is a question that is no longer open, for the history: how it
// ended and when.
type Closed struct {
	Question Question `json:"question"`
	// Answered: someone answered (Source); otherwise Why says what
	// happened instead (it expired, or its run ended first).
	Answered bool          `json:"answered"`
	Allow    bool          `json:"allow,omitempty"`
	Redirect bool          `json:"redirect,omitempty"`
	Note     string        `json:"note,omitempty"`
	Source   broker.Source `json:"source,omitempty"`
	Why      string        `json:"why,omitempty"`
	At       time.Time     `json:"at"`
}

// remember puts p, closed, in its uid's history.
func (qs *Questions) remember(p *pending, a Answer, ok bool, why string) {
	c := Closed{Question: p.q, Answered: ok, Why: why, At: qs.now()}
	if ok {
		c.Allow, c.Redirect, c.Note, c.Source = a.Allow, a.Redirect, a.Note, a.Source
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	h := append(qs.history[p.uid], c)
	if len(h) > maxHistory {
		h = slices.Clone(h[len(h)-maxHistory:])
	}
	qs.history[p.uid] = h
}

// History is uid's closed questions, newest first (at most maxHistory).
func (qs *Questions) History(uid int) []Closed {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	h := slices.Clone(qs.history[uid])
	slices.Reverse(h)
	return h
}
