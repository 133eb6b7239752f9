package report

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/suggest"
)

// dec is a decision record.
func dec(uid int, op, target, outcome, source string, ms int64, model, answer string) audit.Event {
	return audit.Event{Kind: audit.KindDecision, UID: &uid, Surface: "filesystem", Operation: op, Target: target,
		Outcome: outcome, Source: source, ReviewMS: ms, ModelOutcome: model, AnswerSource: answer, Cwd: "/w"}
}

// A scripted log, reported by value: counts, allow rates, overrides, the
// median answer, the slowest reviews, and rules only for what was
// allowed often enough, never denied, named as met and past the hard
// denies; another uid's records are not counted.
func TestBuild(t *testing.T) {
	dir := t.TempDir()
	l, err := audit.Open(context.Background(), audit.Config{Dir: filepath.Join(dir, "log"), KeyFile: filepath.Join(dir, "key")})
	if err != nil {
		t.Fatal(err)
	}
	var evs []audit.Event
	for range 3 { // suggested: 3 allows by the model, never denied
		evs = append(evs, dec(1000, "write_file", "/srv/data/out.csv", "allow", "reviewer", 200, "allow", ""))
	}
	for range 3 { // allowed 3 times but denied once: none
		evs = append(evs, dec(1000, "write_file", "/srv/flaky", "allow", "reviewer", 100, "allow", ""))
	}
	evs = append(evs, dec(1000, "write_file", "/srv/flaky", "deny", "reviewer", 100, "deny", ""))
	for range 2 { // allowed twice only: none
		evs = append(evs, dec(1000, "write_file", "/srv/twice", "allow", "reviewer", 100, "allow", ""))
	}
	for range 3 { // the target was redacted: none
		evs = append(evs, dec(1000, "write_file", "/srv/[REDACTED:token]", "allow", "reviewer", 100, "allow", ""))
	}
	for range 3 { // a start-up location: none, whatever the record says
		evs = append(evs, dec(1000, "write_file", "/home/u/.bashrc", "allow", "human", 100, "", "person"))
	}
	// The model denied 4 more; a person answered 3 of them, allowing 2.
	evs = append(evs,
		dec(1000, "read_file", "/etc/a", "allow", "human", 4000, "deny", "person"),
		dec(1000, "read_file", "/etc/b", "allow", "client", 8000, "deny", "client"),
		dec(1000, "read_file", "/etc/c", "deny", "human", 6000, "deny", "person"),
		dec(1000, "read_file", "/etc/d", "deny", "reviewer", 300, "deny", ""),
		dec(1000, "read_file", "/etc/e", "allow", "policy", 0, "", ""),
		audit.Event{Kind: audit.KindGrantConsumed, UID: ptr(1000)},
		audit.Event{Kind: audit.KindReviewFault, UID: ptr(1000)},
		dec(2000, "write_file", "/srv/data/out.csv", "deny", "reviewer", 99999, "deny", ""), // another uid
	)
	for _, ev := range evs {
		if _, err := l.Append(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	l.Close(context.Background())
	files, err := audit.Files(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	before := func(cwd string) suggest.BeforeAllow {
		return func(req grants.Request) (string, bool) {
			return "a start-up location", req.Path == "/home/u/.bashrc"
		}
	}
	rep, err := Build(context.Background(), files, Options{UID: ptr(1000), Home: "/home/u", PolicyFile: "/home/u/.config/sandboxd/policy.toml", Before: before})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, got, want any) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	check("records", rep.Records, 22)
	check("decisions", rep.Decisions, 20)
	check("model denials", rep.ModelDenials, 5) // /etc/a-d and /srv/flaky
	check("answered", rep.PersonAnswered, 3)
	check("overrode", rep.PersonOverrode, 2)
	check("person answers", rep.PersonAnswers, 6)
	check("median answer", rep.MedianAnswerMS, int64(2050)) // 100 100 100 4000 6000 8000
	check("faults", rep.Events[audit.KindReviewFault], 1)
	check("consumed", rep.Events[audit.KindGrantConsumed], 1)
	check("slowest", rep.Slowest[0].ReviewMS, int64(8000))
	check("slowest listed", len(rep.Slowest), 5)
	if len(rep.Suggestions) != 1 || rep.Suggestions[0].Rule != "fs write_file /srv/data/out.csv" || rep.Suggestions[0].Allows != 3 {
		t.Fatalf("suggestions %+v", rep.Suggestions)
	}
	rates := map[string][2]int{}
	for _, r := range rep.Reviewers {
		rates[r.Source] = [2]int{r.Allowed, r.Decided}
	}
	check("model rate", rates["reviewer"], [2]int{11, 13})
	check("human rate", rates["human"], [2]int{4, 5})
	check("client rate", rates["client"], [2]int{1, 1})
	check("policy rate", rates["policy"], [2]int{1, 1})
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"20 decisions", "allowed 11 of 13", "The model denied 5; a person answered 3 of those and allowed 2 (67 %)",
		"median answer came after 2.05s", "3 allows: fs write_file /srv/data/out.csv", "allow = [\n  \"fs write_file /srv/data/out.csv\",\n]"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the text lacks %q:\n%s", want, b.String())
		}
	}
	// Since leaves older records out.
	rep, err = Build(context.Background(), files, Options{UID: ptr(1000), Since: time.Now().Add(time.Hour)})
	if err != nil || rep.Records != 0 {
		t.Fatalf("since: %d records, %v", rep.Records, err)
	}
}

func ptr(i int) *int { return &i }
