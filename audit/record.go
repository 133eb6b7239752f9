package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Kind says what a record is about.
type Kind string

// The kinds of record. Checkpoint, Genesis and Retention are the log's
// own: Append refuses them from a caller.
const (
	KindDecision       Kind = "decision"
	KindGrantIssued    Kind = "grant_issued"
	KindGrantConsumed  Kind = "grant_consumed"
	KindGrantRejected  Kind = "grant_rejected"
	KindGrantExpired   Kind = "grant_expired"
	KindReviewFault    Kind = "review_fault"
	KindOverride       Kind = "override"
	KindBreakGlass     Kind = "break_glass"
	KindAnswer         Kind = "answer"
	KindBreakerTripped Kind = "breaker_tripped"
	// KindIntent: a person's intent for a session was issued or revoked
	// (Note says which; Intent and Scope name it). Its uses are the
	// decisions with source intent.
	KindIntent         Kind = "intent"
	KindLostDetections Kind = "lost_detections"
	KindDaemonStart    Kind = "daemon_start"
	KindDaemonStop     Kind = "daemon_stop"
	KindRetention      Kind = "retention"
	KindCheckpoint     Kind = "checkpoint"
	KindGenesis        Kind = "genesis"
)

// MaxLine bounds one line of the log, its newline included. Append cuts
// the longest fields of an event to fit (see cutEvent); the verifier
// refuses a longer line.
const MaxLine = 64 << 10

// CutMark ends a text that was shortened to fit (by Append, or by a
// recorder's bounds): a reader takes no name that holds it for exact.
const CutMark = "…[cut]"

// Event is what a writer is given; the envelope (seq, time, prev) is the
// log's. Every field but Kind is optional.
type Event struct {
	Kind          Kind       `json:"kind,omitempty"`
	UID           *int       `json:"uid,omitempty"` // the caller's uid (nil: the daemon itself)
	Session       string     `json:"session,omitempty"`
	Agent         string     `json:"agent,omitempty"`
	Command       string     `json:"command,omitempty"`
	Cwd           string     `json:"cwd,omitempty"`
	Surface       string     `json:"surface,omitempty"`
	Operation     string     `json:"operation,omitempty"`
	Target        string     `json:"target,omitempty"` // a path or host:port
	RequestHash   string     `json:"request_hash,omitempty"`
	Outcome       string     `json:"outcome,omitempty"`
	Source        string     `json:"source,omitempty"`
	Risk          string     `json:"risk,omitempty"`
	Authorization string     `json:"authorization,omitempty"`
	Rationale     string     `json:"rationale,omitempty"`
	Production    string     `json:"production,omitempty"`    // the production marker matched, if any
	ModelOutcome  string     `json:"model_outcome,omitempty"` // the model's verdict a person reviewed
	ModelRisk     string     `json:"model_risk,omitempty"`
	AnswerSource  string     `json:"answer_source,omitempty"` // person, client, page
	ReviewMS      int64      `json:"review_ms,omitempty"`     // how long the review took
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
	Why           string     `json:"why,omitempty"`
	Count         int        `json:"count,omitempty"` // lost detections, etc.
	Note          string     `json:"note,omitempty"`
	Intent        string     `json:"intent,omitempty"` // a person's intent: its id
	Scope         string     `json:"scope,omitempty"`  // and the scope it approved
}

// Record is one line of the log: the envelope, the event and, for the
// log's own kinds, their body. The field order is the line's: seq and
// prev first, so the verifier reads them without decoding the line.
type Record struct {
	Seq  uint64 `json:"seq"`
	Prev string `json:"prev"` // hex SHA-256 of the previous line's bytes (without its newline)
	// Hash is set only on a view's stub (View): the hash of the line the
	// stub stands for. A stub has no time, kind or content.
	Hash string    `json:"hash,omitempty"`
	Time time.Time `json:"time,omitzero"`
	Event
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	Retention  *Retention  `json:"retention,omitempty"`
	Genesis    *Genesis    `json:"genesis,omitempty"`
}

// Checkpoint is the body of a checkpoint record: an Ed25519 signature,
// by the log's key, over the chain id, the record's seq, its prev (the
// hash of the chain up to it) and its time (checkpointMessage).
type Checkpoint struct {
	Chain string `json:"chain"`
	Sig   string `json:"sig"` // base64
}

// Genesis is the body of the record that starts a chain (seq 0).
type Genesis struct {
	Chain string `json:"chain"` // random, hex
	Key   string `json:"key"`   // hex SHA-256 of the public key (fingerprint)
}

// Retention is the body of a record that says which rotated files
// retention removes: every record up to LastSeq, whose line hashed to
// LastHash. It is appended before the files are removed, so it may also
// stand in a set that still holds them.
type Retention struct {
	Chain    string   `json:"chain"`
	Files    []string `json:"files"`
	FirstSeq uint64   `json:"first_seq"`
	LastSeq  uint64   `json:"last_seq"`
	LastHash string   `json:"last_hash"`
}

// zeroHash is the prev of a genesis record.
const zeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// own reports whether k is one of the log's own kinds.
func (k Kind) own() bool { return k == KindCheckpoint || k == KindGenesis || k == KindRetention }

// validKind: non-empty lower-case letters and underscores, so the
// verifier can read a kind without unescaping it.
func validKind(k Kind) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if c := k[i]; (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

// encodeLine is r's line, without the newline: json.Marshal's output,
// which parseRecord requires byte for byte.
func encodeLine(r *Record) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("audit: encode record %d: %w", r.Seq, err)
	}
	return b, nil
}

// encodeBounded encodes r, cutting its event's longest text fields until
// the line (and its newline) fits in MaxLine: a long command or rationale
// never makes Append fail.
func encodeBounded(r *Record) ([]byte, error) {
	for try := 0; ; try++ {
		b, err := encodeLine(r)
		if err != nil {
			return nil, err
		}
		if len(b)+1 <= MaxLine {
			return b, nil
		}
		f := longestField(&r.Event)
		if f == nil || try > 200 {
			return nil, fmt.Errorf("audit: record %d does not fit in a line", r.Seq)
		}
		excess := len(b) + 1 - MaxLine
		keep := min(len(*f)-excess-len(CutMark), len(*f)/2)
		*f = cutString(*f, max(keep, 0)) + CutMark
	}
}

// textFields are the event's text fields.
func textFields(ev *Event) []*string {
	return []*string{&ev.Session, &ev.Agent, &ev.Command, &ev.Cwd, &ev.Surface, &ev.Operation,
		&ev.Target, &ev.RequestHash, &ev.Outcome, &ev.Source, &ev.Risk, &ev.Authorization, &ev.Rationale,
		&ev.Production, &ev.ModelOutcome, &ev.ModelRisk, &ev.AnswerSource, &ev.Why, &ev.Note, &ev.Intent, &ev.Scope}
}

// validText replaces the bytes of ev's text that are not UTF-8 with
// U+FFFD, as json.Marshal would, but as the character itself:
// json.Marshal writes an invalid byte as the escape \ufffd, which decodes
// to a character it writes unescaped, so the line would not be in the
// log's one form and no reader (Scan, View) would take it again.
func validText(ev *Event) {
	for _, f := range textFields(ev) {
		*f = strings.ToValidUTF8(*f, "\uFFFD")
	}
}

// longestField is the event's longest text field, nil if none is longer
// than a marker.
func longestField(ev *Event) *string {
	var best *string
	for _, f := range textFields(ev) {
		if len(*f) > 2*len(CutMark) && (best == nil || len(*f) > len(*best)) {
			best = f
		}
	}
	return best
}

// cutString is s's first n bytes or fewer, ending on a whole character.
func cutString(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// parseRecord decodes one line (without its newline). It accepts only
// what encodeLine writes: one JSON object with known fields, in
// json.Marshal's form, byte for byte, so that a record's meaning has one
// spelling and a line that says the same with other bytes is refused.
func parseRecord(line []byte) (Record, error) {
	var r Record
	if len(line)+1 > MaxLine {
		return r, fmt.Errorf("audit: line of %d bytes is over the limit", len(line))
	}
	// The verifier reads only this prefix of most lines: a line must
	// start as it says (a stub is nothing more; a record has a time and
	// a kind) for the two readers to agree.
	var h lineHead
	if !readHead(line, &h) {
		return r, fmt.Errorf("audit: the line does not start as a record does")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("audit: decode record: %w", err)
	}
	if dec.More() {
		return r, fmt.Errorf("audit: decode record: data after the object")
	}
	again, err := encodeLine(&r)
	if err != nil {
		return r, err
	}
	if !bytes.Equal(again, line) {
		return r, fmt.Errorf("audit: record %d is not in the log's form", r.Seq)
	}
	return r, nil
}
