package report

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/suggest"
	"github.com/sandboxd/sandboxd/termfilter"
)

// Options say what a report covers and how it suggests rules.
type Options struct {
	// Since: records before it are left out.
	Since time.Time
	// UID, if set: only this caller's records.
	UID *int
	// MinAllows: a boundary allowed at least this often and never
	// denied gets a suggested rule (0: DefaultMinAllows).
	MinAllows int
	// Slowest: how many of the slowest reviews are listed (0: 5).
	Slowest int
	// Home, PolicyFile and Before are the suggester's (suggest.Allowed):
	// the caller's home, own policy file and, for a run in a directory,
	// its broker's denials before any allow rule (nil: no rule is
	// offered). A rule is offered only when no directory the boundary
	// was met in denies it before the allow rules.
	Home, PolicyFile string
	Before           func(cwd string) suggest.BeforeAllow
}

// DefaultMinAllows is how often a boundary must have been allowed, and
// never denied, before the report suggests a rule for it.
const DefaultMinAllows = 3

// Report is what `sandboxd audit report` shows.
type Report struct {
	Since     time.Time `json:"since"`
	Records   int       `json:"records"`
	Decisions int       `json:"decisions"`
	// Counts are the decisions by surface, outcome and source.
	Counts []Count `json:"counts"`
	// Slowest are the reviews that took longest.
	Slowest []Review `json:"slowest_reviews"`
	// Reviewers: how often each source that judges allowed.
	Reviewers []ReviewerStat `json:"reviewers"`
	// ModelDenials is how often the model denied; PersonAnswered how
	// many of those a person (or a client for one) answered, and
	// PersonOverrode how many of those they allowed.
	ModelDenials   int `json:"model_denials"`
	PersonAnswered int `json:"person_answered"`
	PersonOverrode int `json:"person_overrode"`
	// PersonAnswers is every decision a person (or client) made;
	// MedianAnswerMS the median time from review start to their answer.
	PersonAnswers  int   `json:"person_answers"`
	MedianAnswerMS int64 `json:"median_answer_ms"`
	// Events counts the records that are no decision, by kind.
	Events map[audit.Kind]int `json:"events"`
	// Suggestions are rules for boundaries allowed at least MinAllows
	// times and never denied; TOML is them as one snippet.
	Suggestions []Suggested `json:"suggestions"`
	TOML        string      `json:"toml,omitempty"`
	MinAllows   int         `json:"min_allows"`
}

// Count is how many decisions had one surface, outcome and source.
type Count struct {
	Surface string `json:"surface"`
	Outcome string `json:"decision"`
	Source  string `json:"source"`
	N       int    `json:"n"`
}

// Review is one review, for the slowest list.
type Review struct {
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	Surface   string    `json:"surface"`
	Operation string    `json:"operation"`
	Target    string    `json:"target"`
	Outcome   string    `json:"decision"`
	Source    string    `json:"source"`
	ReviewMS  int64     `json:"review_ms"`
}

// ReviewerStat is how often one source allowed what it decided.
type ReviewerStat struct {
	Source  string `json:"source"`
	Decided int    `json:"decided"`
	Allowed int    `json:"allowed"`
}

// Suggested is a suggested rule and its evidence.
type Suggested struct {
	Surface   string `json:"surface"`
	Operation string `json:"operation"`
	Target    string `json:"target"`
	Allows    int    `json:"allows"`
	Rule      string `json:"rule"`
}

// judges are the sources whose allow rates the report shows.
var judges = []broker.Source{broker.SourceReviewer, broker.SourceHuman, broker.SourceClient, broker.SourcePage, broker.SourcePolicy}

// redactedMark is how the reviewer's redactor marks what it hid: a
// target holding one (or audit.CutMark) is not the name that was met,
// so no rule is suggested for it.
const redactedMark = "[REDACTED:"

// key is one boundary: surface, operation, target.
type key struct{ surface, op, target string }

// Build reads files (a rotation set, or a view) and reports on
// the records opts selects.
func Build(ctx context.Context, files []string, opts Options) (Report, error) {
	if opts.MinAllows <= 0 {
		opts.MinAllows = DefaultMinAllows
	}
	if opts.Slowest <= 0 {
		opts.Slowest = 5
	}
	b := &builder{opts: opts, counts: map[Count]int{}, judged: map[broker.Source]*ReviewerStat{},
		allows: map[key]int{}, denied: map[key]bool{}, cwds: map[key]map[string]bool{},
		rep: Report{Since: opts.Since, Events: map[audit.Kind]int{}, MinAllows: opts.MinAllows}}
	err := audit.Scan(ctx, files, func(r audit.Record) error {
		b.add(r)
		return nil
	})
	if err != nil {
		return Report{}, err
	}
	return b.finish(), nil
}

type builder struct {
	opts    Options
	rep     Report
	counts  map[Count]int
	judged  map[broker.Source]*ReviewerStat
	answers []int64
	allows  map[key]int
	denied  map[key]bool
	cwds    map[key]map[string]bool
}

// add counts one record.
func (b *builder) add(r audit.Record) {
	if !r.IsEvent() || r.Time.Before(b.opts.Since) {
		return // a stub, the log's own record, or too old
	}
	if b.opts.UID != nil && (r.UID == nil || *r.UID != *b.opts.UID) {
		return
	}
	b.rep.Records++
	if r.Kind != audit.KindDecision {
		b.rep.Events[r.Kind]++
		return
	}
	b.rep.Decisions++
	b.counts[Count{Surface: r.Surface, Outcome: r.Outcome, Source: r.Source}]++
	src := broker.Source(r.Source)
	if slices.Contains(judges, src) {
		st := b.judged[src]
		if st == nil {
			st = &ReviewerStat{Source: r.Source}
			b.judged[src] = st
		}
		st.Decided++
		if r.Outcome == string(broker.Allow) {
			st.Allowed++
		}
	}
	if r.ModelOutcome == string(broker.Deny) {
		b.rep.ModelDenials++
		if r.AnswerSource != "" {
			b.rep.PersonAnswered++
			if r.Outcome == string(broker.Allow) {
				b.rep.PersonOverrode++
			}
		}
	}
	if r.AnswerSource != "" {
		b.rep.PersonAnswers++
		b.answers = append(b.answers, r.ReviewMS)
	}
	if r.ReviewMS > 0 {
		b.slow(r)
	}
	k := key{r.Surface, r.Operation, r.Target}
	switch {
	case r.Outcome != string(broker.Allow):
		b.denied[k] = true
	case src == broker.SourceReviewer || src == broker.SourceHuman || src == broker.SourceClient || src == broker.SourcePage:
		b.allows[k]++
		if b.cwds[k] == nil {
			b.cwds[k] = map[string]bool{}
		}
		b.cwds[k][r.Cwd] = true
	}
}

// slow keeps r among the slowest reviews.
func (b *builder) slow(r audit.Record) {
	b.rep.Slowest = append(b.rep.Slowest, Review{Seq: r.Seq, Time: r.Time, Surface: r.Surface, Operation: r.Operation,
		Target: r.Target, Outcome: r.Outcome, Source: r.Source, ReviewMS: r.ReviewMS})
	slices.SortStableFunc(b.rep.Slowest, func(x, y Review) int { return cmp.Compare(y.ReviewMS, x.ReviewMS) })
	if len(b.rep.Slowest) > b.opts.Slowest {
		b.rep.Slowest = b.rep.Slowest[:b.opts.Slowest]
	}
}

// finish sorts what was counted and suggests the rules.
func (b *builder) finish() Report {
	rep := b.rep
	for c, n := range b.counts {
		c.N = n
		rep.Counts = append(rep.Counts, c)
	}
	slices.SortFunc(rep.Counts, func(x, y Count) int {
		return cmp.Or(cmp.Compare(y.N, x.N), cmp.Compare(x.Surface, y.Surface), cmp.Compare(x.Outcome, y.Outcome), cmp.Compare(x.Source, y.Source))
	})
	for _, src := range judges {
		if st := b.judged[src]; st != nil {
			rep.Reviewers = append(rep.Reviewers, *st)
		}
	}
	if n := len(b.answers); n > 0 {
		slices.Sort(b.answers)
		rep.MedianAnswerMS = b.answers[n/2]
		if n%2 == 0 {
			rep.MedianAnswerMS = (b.answers[n/2-1] + b.answers[n/2]) / 2
		}
	}
	rep.Suggestions = b.suggestions()
	var rules []string
	for _, s := range rep.Suggestions {
		rules = append(rules, s.Rule)
	}
	if len(rules) > 0 {
		rep.TOML = suggest.TOML(b.opts.PolicyFile, rules)
	}
	return rep
}

// suggestions are the rules for boundaries allowed at least MinAllows
// times and never denied, most allowed first.
func (b *builder) suggestions() []Suggested {
	var out []Suggested
	for k, n := range b.allows {
		if n < b.opts.MinAllows || b.denied[k] || strings.Contains(k.target, redactedMark) || strings.Contains(k.target, audit.CutMark) {
			continue
		}
		bd := suggest.Boundary{Surface: boundary.Surface(k.surface), Operation: boundary.Operation(k.op),
			Decision: broker.Allow, Source: broker.SourceReviewer}
		if bd.Surface == boundary.Network {
			bd.Destination = k.target
		} else {
			bd.Path = k.target
		}
		rule := b.rule(bd, k)
		if rule == "" {
			continue
		}
		out = append(out, Suggested{Surface: k.surface, Operation: k.op, Target: k.target, Allows: n, Rule: rule})
	}
	slices.SortFunc(out, func(x, y Suggested) int { return cmp.Or(cmp.Compare(y.Allows, x.Allows), cmp.Compare(x.Rule, y.Rule)) })
	return out
}

// rule is the suggester's rule for bd, or "" when it offers none in any
// of the directories the boundary was met in.
func (b *builder) rule(bd suggest.Boundary, k key) string {
	if b.opts.Before == nil {
		return ""
	}
	cwds := slices.Sorted(maps.Keys(b.cwds[k]))
	rule := ""
	for _, cwd := range cwds {
		s := suggest.Allowed(bd, b.opts.Home, b.opts.PolicyFile, b.opts.Before(cwd))
		if s.Rule == "" || (rule != "" && s.Rule != rule) {
			return ""
		}
		rule = s.Rule
	}
	return rule
}

// WriteText writes the report for a person: every name from a record is
// escaped for the terminal.
func (rep Report) WriteText(w io.Writer) error {
	e := termfilter.Escape
	var b strings.Builder
	fmt.Fprintf(&b, "Since %s: %d records, %d decisions.\n", rep.Since.Format(time.DateTime), rep.Records, rep.Decisions)
	if len(rep.Counts) > 0 {
		b.WriteString("\nDecisions by surface, decision and source:\n")
		for _, c := range rep.Counts {
			fmt.Fprintf(&b, "  %6d  %-10s %-5s %s\n", c.N, e(c.Surface), e(c.Outcome), e(c.Source))
		}
	}
	if len(rep.Reviewers) > 0 {
		b.WriteString("\nHow often each allowed:\n")
		for _, r := range rep.Reviewers {
			fmt.Fprintf(&b, "  %-10s allowed %d of %d (%s)\n", r.Source, r.Allowed, r.Decided, percent(r.Allowed, r.Decided))
		}
	}
	fmt.Fprintf(&b, "\nThe model denied %d; a person answered %d of those and allowed %d (%s).\n",
		rep.ModelDenials, rep.PersonAnswered, rep.PersonOverrode, percent(rep.PersonOverrode, rep.PersonAnswered))
	if rep.PersonAnswers > 0 {
		fmt.Fprintf(&b, "A person answered %d questions; the median answer came after %s.\n", rep.PersonAnswers,
			(time.Duration(rep.MedianAnswerMS) * time.Millisecond).String())
	}
	if len(rep.Slowest) > 0 {
		b.WriteString("\nSlowest reviews:\n")
		for _, r := range rep.Slowest {
			fmt.Fprintf(&b, "  %8s  %s %s %s: %s by %s\n", (time.Duration(r.ReviewMS) * time.Millisecond).String(),
				e(r.Surface), e(r.Operation), e(r.Target), e(r.Outcome), e(r.Source))
		}
	}
	if len(rep.Events) > 0 {
		b.WriteString("\nOther records:\n")
		kinds := make([]string, 0, len(rep.Events))
		for k := range rep.Events {
			kinds = append(kinds, string(k))
		}
		slices.Sort(kinds)
		for _, k := range kinds {
			fmt.Fprintf(&b, "  %6d  %s\n", rep.Events[audit.Kind(k)], k)
		}
	}
	if len(rep.Suggestions) == 0 {
		fmt.Fprintf(&b, "\nNo boundary was allowed %d times or more and never denied: no rule is suggested.\n", rep.MinAllows)
	} else {
		fmt.Fprintf(&b, "\nAllowed %d times or more and never denied; nothing is applied unless you add it:\n", rep.MinAllows)
		for _, s := range rep.Suggestions {
			fmt.Fprintf(&b, "  %d allows: %s\n", s.Allows, e(s.Rule))
		}
		b.WriteString("\n" + rep.TOML)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func percent(n, of int) string {
	if of == 0 {
		return "none"
	}
	return fmt.Sprintf("%.0f %%", 100*float64(n)/float64(of))
}
