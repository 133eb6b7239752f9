package daemon

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/broker"
)

// AnswerRequest is the body of POST /v1/questions/{id}/answer.
type AnswerRequest struct {
	// Allow is required: an answer says yes or no.
	Allow *bool `json:"allow"`
	// Note is said to the agent with the decision.
	Note string `json:"note,omitempty"`
}

// maxNote bounds an answer's note, in runes.
const maxNote = 300

// readAnswer reads and checks an answer's body: one JSON object of the
// known fields, allow given, a note of at most maxNote printable runes.
func readAnswer(body []byte) (AnswerRequest, error) {
	var a AnswerRequest
	if err := strictJSON(body, &a); err != nil {
		return a, err
	}
	switch {
	case a.Allow == nil:
		return a, errors.New(`the answer must say "allow": true or false`)
	}
	return a, CheckNote(a.Note)
}

// CheckNote checks a note for the agent (an answer's, a redirect's): at
// most maxNote printable runes of UTF-8. Its error is a sentence safe to
// show.
func CheckNote(note string) error {
	switch {
	case !utf8.ValidString(note) || utf8.RuneCountInString(note) > maxNote:
		return fmt.Errorf("the note must be UTF-8 text of at most %d characters", maxNote)
	case strings.ContainsFunc(note, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }):
		return errors.New("the note must hold no control characters")
	}
	return nil
}

// listQuestions answers GET /v1/questions: the caller's open questions.
func (d *Daemon) listQuestions(w http.ResponseWriter, r *http.Request, c caller) {
	writeJSON(w, http.StatusOK, map[string]any{"questions": d.questions.Pending(c.UID)})
}

// answerQuestion answers POST /v1/questions/{id}/answer for the
// question's own uid, as source client: the broker holds the answer to
// what a reviewer may allow.
func (d *Daemon) answerQuestion(w http.ResponseWriter, r *http.Request, c caller) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the request is over %d KiB", MaxRequest>>10))
		return
	}
	a, err := readAnswer(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	id := r.PathValue("id")
	if *a.Allow {
		// Refused here as well as by the broker: the client learns that
		// a person at a terminal (or the page) must answer this one.
		if q, ok := d.questions.Get(c.UID, id); ok && !clientMayAllow(q) {
			writeError(w, http.StatusForbidden, "needs_a_person", "an API client cannot allow this question ("+clientRefusal(q)+"); a person at your terminal can, and the question stays open for them until it expires; you may still deny it")
			return
		}
	}
	err = d.questions.Answer(c.UID, id, Answer{Allow: *a.Allow, Note: a.Note, Source: broker.SourceClient})
	switch {
	case errors.Is(err, ErrNoQuestion):
		writeError(w, http.StatusNotFound, "no_question", "you have no question with this id")
	case errors.Is(err, ErrAnswered):
		writeError(w, http.StatusConflict, "answered", "the question was answered already, or withdrawn (expired, or its run ended)")
	case err != nil:
		writeError(w, http.StatusInternalServerError, "answer", "the answer could not be taken")
	default:
		writeJSON(w, http.StatusOK, map[string]any{"answered": true})
	}
}

// clientMayAllow reports whether an API client's allow of q could stand:
// the model judged it, below critical, and at high risk with the user's
// authorization (broker.consistent decides; this only tells the client
// early).
func clientMayAllow(q Question) bool { return clientRefusal(q) == "" }

// clientRefusal says why a client's allow of q cannot stand ("": it can).
func clientRefusal(q Question) string {
	switch m := q.Model; {
	case q.Production != "":
		return "it is a production target: " + q.ProductionWhy
	case m == nil || m.RiskLevel == "":
		return "no model judged its risk, as in a lockdown"
	case m.RiskLevel == broker.RiskCritical:
		return "the model judged it critical"
	case m.RiskLevel == broker.RiskHigh && m.UserAuthorization != broker.AuthMedium && m.UserAuthorization != broker.AuthHigh:
		return "the model judged it high risk without your clear authorization"
	}
	return ""
}
