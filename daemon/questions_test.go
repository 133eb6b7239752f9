package daemon

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
)

// Of many answers racing for one question exactly one is taken; the
// others are refused as answered, and the asker gets the winner's.
func TestQuestionFirstAnswerWins(t *testing.T) {
	qs := NewQuestions(time.Minute, 4)
	for range 50 {
		tk, err := qs.Ask(1000, Question{Path: "/x"})
		if err != nil {
			t.Fatal(err)
		}
		id := tk.Question().ID
		var won atomic.Int32
		var winner atomic.Value
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := Answer{Allow: i%2 == 0, Note: string(rune('a' + i)), Source: broker.SourceClient}
				switch err := qs.Answer(1000, id, a); {
				case err == nil:
					won.Add(1)
					winner.Store(a.Note)
				case !errors.Is(err, ErrAnswered):
					t.Errorf("a losing answer: %v", err)
				}
			}()
		}
		a, ok, _ := tk.Wait(context.Background())
		wg.Wait()
		if !ok || won.Load() != 1 || a.Note != winner.Load() {
			t.Fatalf("answers taken %d, asker got %+v (ok %v), winner %v", won.Load(), a, ok, winner.Load())
		}
		if err := qs.Answer(1000, id, Answer{}); !errors.Is(err, ErrAnswered) {
			t.Fatalf("an answer after the first: %v", err)
		}
	}
	if n := len(qs.Pending(1000)); n != 0 {
		t.Fatalf("%d questions still open", n)
	}
}

// Another uid neither sees nor answers a question; an unknown id is
// told apart from nothing.
func TestQuestionOwnUIDOnly(t *testing.T) {
	qs := NewQuestions(time.Minute, 4)
	tk, _ := qs.Ask(1000, Question{Path: "/x"})
	id := tk.Question().ID
	if len(id) != 32 {
		t.Fatalf("id %q", id)
	}
	if got := qs.Pending(1001); len(got) != 0 {
		t.Fatalf("another uid lists %v", got)
	}
	if err := qs.Answer(1001, id, Answer{Allow: true}); !errors.Is(err, ErrNoQuestion) {
		t.Fatalf("another uid answered: %v", err)
	}
	if err := qs.Answer(1000, "nope", Answer{Allow: true}); !errors.Is(err, ErrNoQuestion) {
		t.Fatalf("an unknown id: %v", err)
	}
	if got := qs.Pending(1000); len(got) != 1 || got[0].ID != id {
		t.Fatalf("the owner lists %v", got)
	}
}

// Expiry and the asker going away withdraw a question: no answer, a
// sentence why, and a later answer refused.
func TestQuestionWithdrawn(t *testing.T) {
	qs := NewQuestions(50*time.Millisecond, 4)
	tk, _ := qs.Ask(1000, Question{})
	if _, ok, why := tk.Wait(context.Background()); ok || why != "no answer in time" {
		t.Fatalf("expiry: ok %v, %q", ok, why)
	}
	if err := qs.Answer(1000, tk.Question().ID, Answer{Allow: true}); !errors.Is(err, ErrAnswered) {
		t.Fatalf("an answer after expiry: %v", err)
	}
	qs = NewQuestions(time.Minute, 4)
	tk, _ = qs.Ask(1000, Question{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok, why := tk.Wait(ctx); ok || why == "" {
		t.Fatalf("withdrawn: ok %v, %q", ok, why)
	}
	if len(qs.Pending(1000)) != 0 {
		t.Fatal("a withdrawn question is listed")
	}
}

// A uid has at most its bound of questions open; answering one makes
// room; another uid is not counted against it.
func TestQuestionBound(t *testing.T) {
	qs := NewQuestions(time.Minute, 2)
	a, _ := qs.Ask(1000, Question{})
	if _, err := qs.Ask(1000, Question{}); err != nil {
		t.Fatal(err)
	}
	if _, err := qs.Ask(1000, Question{}); !errors.Is(err, ErrTooMany) {
		t.Fatalf("over the bound: %v", err)
	}
	if _, err := qs.Ask(1001, Question{}); err != nil {
		t.Fatalf("another uid: %v", err)
	}
	qs.Answer(1000, a.Question().ID, Answer{})
	if _, err := qs.Ask(1000, Question{}); err != nil {
		t.Fatalf("after an answer: %v", err)
	}
}

func TestReadAnswer(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{`{"allow":true}`, ""},
		{`{"allow":false,"note":"use the cache instead"}`, ""},
		{`{}`, "must say"},
		{`{"allow":"yes"}`, "not a JSON object"},
		{`{"allow":true,"source":"human"}`, "not a JSON object"},
		{`{"allow":true,"note":"a\u001b[2Jb"}`, "control"},
		{`{"allow":true,"note":"a\u202eb"}`, "control"},
		{`{"allow":true}{"allow":false}`, "more than one"},
	} {
		_, err := readAnswer([]byte(tc.in))
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !contains(err.Error(), tc.err)) {
			t.Errorf("readAnswer(%s) = %v, want %q", tc.in, err, tc.err)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// Whatever a client sends, a taken answer says yes or no and carries a
// bounded note of printable text.
func FuzzReadAnswer(f *testing.F) {
	f.Add([]byte(`{"allow":true,"note":"ok"}`))
	f.Add([]byte(`{"allow":false}`))
	f.Add([]byte(`{"allow":null,"note":"\u0000"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := readAnswer(in)
		if err != nil {
			return
		}
		if a.Allow == nil || len([]rune(a.Note)) > maxNote {
			t.Fatalf("out of bounds: %+v", a)
		}
		for _, r := range a.Note {
			if r < 0x20 || r == 0x7f || r == 0x202e {
				t.Fatalf("a control character in the note: %q", a.Note)
			}
		}
	})
}

// A question about a production target says so, and that no API client
// may allow it: it carries the marker and the name that matched, not a
// model's judgement (the model was not asked).
func TestQuestionProduction(t *testing.T) {
	req := grants.Request{Session: "s", Cwd: "/w", Command: "curl", Surface: boundary.Network, Operation: boundary.OpConnect}.
		WithDestinationText("prod-eu.example.com:443")
	why := "the name prod in the host prod-eu.example.com matches the production marker prod"
	ctx := broker.WithDeferred(context.Background(), broker.Decision{Outcome: broker.Deny, RiskLevel: broker.RiskCritical,
		Source: broker.SourceNoReviewer, Production: "prod", Rationale: why})
	q := questionOf(ctx, req)
	if q.Production != "prod" || q.ProductionWhy != why || q.Model != nil {
		t.Fatalf("question %+v", q)
	}
	if q.ClientCannotAllow != "it is a production target: "+why || clientMayAllow(q) {
		t.Fatalf("a client may allow it: %q", q.ClientCannotAllow)
	}
	// A model's critical deny is still the model's.
	ctx = broker.WithDeferred(context.Background(), broker.Decision{Outcome: broker.Deny, RiskLevel: broker.RiskCritical, Rationale: "keys"})
	if q := questionOf(ctx, req); q.Model == nil || q.Production != "" || q.ClientCannotAllow != "the model judged it critical" {
		t.Fatalf("model question %+v", q)
	}
}

// A critical question is allowed through AnswerPhrase only with its own
// break-glass phrase (a wrong one leaves it open), a deny needs none;
// every closed question lands in its uid's history, newest first, with
// who answered, and another uid's history holds none of it.
func TestQuestionPhraseAndHistory(t *testing.T) {
	qs := NewQuestions(time.Minute, 4)
	crit, err := qs.Ask(1000, Question{Path: "/etc/x", Critical: true})
	if err != nil {
		t.Fatal(err)
	}
	id := crit.Question().ID
	code := qs.BreakGlass(1000, id)
	if len(code) != 8 || qs.BreakGlass(1001, id) != "" {
		t.Fatalf("the code: %q, another uid's: %q", code, qs.BreakGlass(1001, id))
	}
	for _, wrong := range []string{"", "y", "BREAK-GLASS", "BREAK-GLASS " + strings.ToLower(code), "BREAK-GLASS XXXXXXXX"} {
		if err := qs.AnswerPhrase(1000, id, Answer{Allow: true, Source: broker.SourcePage}, wrong); !errors.Is(err, ErrPhrase) {
			t.Fatalf("phrase %q: %v", wrong, err)
		}
	}
	if err := qs.AnswerPhrase(1000, id, Answer{Allow: true, Source: broker.SourcePage}, " BREAK-GLASS "+code+" "); err != nil {
		t.Fatal(err)
	}
	if a, ok, _ := crit.Wait(context.Background()); !ok || !a.Allow || a.Source != broker.SourcePage {
		t.Fatalf("the answer: %+v %v", a, ok)
	}
	plain, _ := qs.Ask(1000, Question{Path: "/y"})
	if qs.BreakGlass(1000, plain.Question().ID) != "" {
		t.Fatal("a question that is not critical has a code")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	plain.Wait(ctx)
	h := qs.History(1000)
	if len(h) != 2 || h[0].Answered || h[0].Why == "" || !h[1].Answered || h[1].Source != broker.SourcePage || !h[1].Allow {
		t.Fatalf("the history: %+v", h)
	}
	if len(qs.History(1001)) != 0 {
		t.Fatal("another uid's history holds the questions")
	}
}

// The history keeps each uid's last maxHistory closed questions.
func TestQuestionHistoryBounded(t *testing.T) {
	qs := NewQuestions(time.Minute, 4)
	for i := range maxHistory + 5 {
		tk, _ := qs.Ask(1000, Question{Path: "/" + string(rune('a'+i%26))})
		qs.Answer(1000, tk.Question().ID, Answer{Source: broker.SourceClient})
		tk.Wait(context.Background())
	}
	if n := len(qs.History(1000)); n != maxHistory {
		t.Fatalf("%d in the history", n)
	}
}

// An answer on the approvals page decides as the page (a person), and a
// redirect is a deny whose rationale is the person's instruction.
func TestPageDecision(t *testing.T) {
	for _, tc := range []struct {
		a       Answer
		outcome broker.Outcome
		why     string
	}{
		{Answer{Allow: true, Source: broker.SourcePage}, broker.Allow, "allowed once by a person on the approvals page"},
		{Answer{Source: broker.SourcePage, Note: "not now"}, broker.Deny, "denied by a person on the approvals page: not now"},
		{Answer{Source: broker.SourcePage, Redirect: true, Note: "use the mirror"}, broker.Deny, "not allowed; the person redirects you instead: use the mirror"},
	} {
		d := decisionOf(tc.a)
		if d.Outcome != tc.outcome || d.Source != broker.SourcePage || d.Rationale != tc.why {
			t.Errorf("%+v: %+v", tc.a, d)
		}
	}
}
