package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/cmd/internal/daemonrun"
	"github.com/sandboxd/sandboxd/cmd/internal/runcmd"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/review"
	"github.com/sandboxd/sandboxd/review/openai"
	"github.com/sandboxd/sandboxd/session"
)

const reviewUsage = `Usage:
  sandboxd review eval [--policy FILE] [--json] [-v] CORPUS.jsonl
      review every case of a labelled corpus with the model reviewer your
      policy configures, and print its accuracy, error rates, faults,
      prompt sizes and latency
`

// maxCaseLine bounds one line of a corpus.
const maxCaseLine = 1 << 20

// evalCase is one labelled line of a corpus.
type evalCase struct {
	// Name identifies the case in the output; unique in a corpus.
	Name string `json:"name"`
	// Class groups cases for per-class accuracy (benign-install,
	// exfiltration, ...); free-form.
	Class string `json:"class"`
	// Request is the boundary the model reviews.
	Request caseRequest `json:"request"`
	// Expect is the right answer: "allow" or "deny".
	Expect string `json:"expect"`
	// line is the case's line in the corpus (1-based).
	line int
}

// caseRequest is the part of a grants.Request a corpus sets; the
// session is the eval's own.
type caseRequest struct {
	Surface      string `json:"surface"`
	Operation    string `json:"operation"`
	Path         string `json:"path,omitempty"`
	ResolvedPath string `json:"resolved_path,omitempty"`
	Destination  string `json:"destination,omitempty"`
	Command      string `json:"command,omitempty"`
	Cwd          string `json:"cwd,omitempty"`
	Intent       string `json:"intent,omitempty"`
	// Agent is who asked ("": cli, as `sandboxd run`).
	Agent string `json:"agent,omitempty"`
}

// grantsRequest is the request the model is shown, in session.
func (r caseRequest) grantsRequest(sess string) grants.Request {
	agent := r.Agent
	if agent == "" {
		agent = "cli"
	}
	return grants.Request{
		Session: sess, Surface: boundary.Surface(r.Surface), Operation: boundary.Operation(r.Operation),
		Path: r.Path, ResolvedPath: r.ResolvedPath,
		Command: r.Command, Cwd: r.Cwd, Intent: r.Intent, Agent: agent,
	}.WithDestinationText(r.Destination)
}

// evalFlags are the flags of `sandboxd review eval`.
type evalFlags struct {
	policy  string
	json    bool
	verbose bool
	corpus  string
}

// reviewCommand is `sandboxd review SUBCOMMAND`.
func reviewCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	switch {
	case len(args) == 0:
		return usageError(stderr, reviewUsage, "")
	case isHelp(args[0]):
		fmt.Fprint(stdout, reviewUsage)
		return 0
	case args[0] != "eval":
		return usageError(stderr, reviewUsage, fmt.Sprintf("unknown review command %q", args[0]))
	}
	return evalCommand(ctx, args[1:], getenv, stdout, stderr, sigs)
}

// parseEvalFlags parses eval's flags, which may come before or after
// the corpus. When ok is false eval is done and exits with code (see
// parseFlags).
func parseEvalFlags(args []string, stdout, stderr io.Writer) (f *evalFlags, code int, ok bool) {
	f = &evalFlags{}
	fs := flag.NewFlagSet("sandboxd review eval", flag.ContinueOnError)
	fs.StringVar(&f.policy, "policy", "", "policy file (default: ~/.config/sandboxd/policy.toml)")
	fs.BoolVar(&f.json, "json", false, "print the figures as one JSON object")
	fs.BoolVar(&f.verbose, "v", false, "log what the reviewer does, and the internal cause of each fault, to stderr")
	var pos []string
	for {
		if code, ok := parseFlags(fs, args, reviewUsage, stdout, stderr); !ok {
			return nil, code, false
		}
		if fs.NArg() == 0 {
			break
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
	switch len(pos) {
	case 0:
		return nil, usageError(stderr, withFlags(reviewUsage, fs), "review eval needs a corpus file"), false
	case 1:
		f.corpus = pos[0]
		return f, 0, true
	}
	return nil, usageError(stderr, withFlags(reviewUsage, fs), "review eval takes one corpus file, not "+quoted(pos)), false
}

// evalCommand is `sandboxd review eval`: 0 when every case was reviewed
// (whatever the answers), 125 when it could not run. Nothing is sent
// before the corpus has parsed and a model is configured.
func evalCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	fail := func(msg string) int {
		fmt.Fprintf(stderr, "sandboxd: %s\n", esc(msg))
		return exitSandboxd
	}
	f, code, ok := parseEvalFlags(args, stdout, stderr)
	if !ok {
		return code
	}
	cases, err := readCorpus(f.corpus)
	if err != nil {
		return fail(publicerr.Message(err, "the corpus cannot be read"))
	}
	caller, err := runcmd.CallerOf(getenv)
	if err != nil {
		return fail(session.Public(err))
	}
	cfg, ok, err := session.ModelFor(caller, f.policy)
	switch {
	case err != nil:
		return fail(session.Public(err))
	case !ok:
		return fail(session.NoModelMessage)
	}
	level := slog.LevelError + 4
	if f.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	m, rec, err := evalModel(cfg, log)
	if err != nil {
		return fail(session.Public(err))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := cancelOnSignal(ctx, cancel, sigs)
	defer stop()
	results, err := reviewCases(ctx, m, rec, cases, session.Scoped(caller, "review-eval-"+evalID()))
	if err != nil {
		return fail(publicerr.Message(err, "review eval failed"))
	}
	sum := summarize(cfg.Model, results)
	if f.json {
		b, _ := json.MarshalIndent(sum, "", "  ")
		stdout.Write(append(b, '\n'))
	} else {
		printSummary(stdout, sum)
	}
	return 0
}

// evalModel builds the model reviewer exactly as a run does
// (modelFactory), then records what its client is sent.
func evalModel(cfg session.ModelConfig, log *slog.Logger) (*review.Model, *recorder, error) {
	r, err := modelFactory(log, nil)(cfg)
	if err != nil {
		return nil, nil, err
	}
	m, ok := r.(*review.Model)
	if !ok {
		return nil, nil, fmt.Errorf("review eval: the model reviewer is a %T", r)
	}
	rec := &recorder{next: m.Client}
	m.Client = rec
	return m, rec, nil
}

// cancelOnSignal cancels ctx when a signal arrives (sandboxd's own
// signals are caught for the command's tree; eval has none, so one
// ends the eval). stop ends the watch.
func cancelOnSignal(ctx context.Context, cancel context.CancelFunc, sigs <-chan os.Signal) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-sigs:
			cancel()
		case <-done:
		case <-ctx.Done():
		}
	}()
	return func() { close(done); <-exited }
}

// evalID names one eval's session (the meter counts its calls there).
func evalID() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// recorder is the client as eval sees it: it passes every prompt on and
// keeps the last one's estimated size and the endpoint's reported usage.
// Reviews run one at a time, so the last call is the current case's.
type recorder struct {
	next review.Completer
	// sent is whether the current case reached the client.
	sent bool
	// estimate is the input budget's estimate of the prompt;
	// reported the endpoint's prompt_tokens (0: none reported).
	estimate int
	reported int64
}

// reset forgets the previous case.
func (r *recorder) reset() { r.sent, r.estimate, r.reported = false, 0, 0 }

// Complete records and passes the prompt on.
func (r *recorder) Complete(ctx context.Context, system, user string, validate func(string) error) (review.Completion, error) {
	r.sent, r.estimate = true, review.EstimateTokens(system, user)
	c, err := r.next.Complete(ctx, system, user, validate)
	r.reported = c.PromptTokens
	return c, err
}

// caseResult is what the reviewer did with one case.
type caseResult struct {
	c evalCase
	// got is "allow" or "deny"; "" when the review failed with fault.
	got, fault string
	// sent, estimate and reported are the recorder's for this case.
	sent     bool
	estimate int
	reported int64
	latency  time.Duration
}

// reviewCases reviews every case, in order, one at a time. An error is
// an interruption: the eval did not finish.
func reviewCases(ctx context.Context, m *review.Model, rec *recorder, cases []evalCase, sess string) ([]caseResult, error) {
	out := make([]caseResult, 0, len(cases))
	for i, c := range cases {
		rec.reset()
		start := time.Now()
		d, err := m.Review(ctx, c.Request.grantsRequest(sess))
		res := caseResult{c: c, sent: rec.sent, estimate: rec.estimate, reported: rec.reported, latency: time.Since(start)}
		if ctx.Err() != nil {
			return nil, publicerr.Errorf(ctx.Err(), "review eval was interrupted after %d of %d cases", i, len(cases))
		}
		if err != nil {
			res.fault = faultClass(err)
		} else {
			res.got = string(d.Outcome)
		}
		out = append(out, res)
	}
	return out, nil
}

// faultClass labels a failed review: the client's Fault class, or
// "budget" (the request alone overflows max_input_tokens), "cap" (a
// call or token cap), "other".
func faultClass(err error) string {
	var f *openai.Fault
	switch {
	case errors.As(err, &f):
		return f.Class
	case errors.Is(err, review.ErrBudget):
		return "budget"
	case errors.Is(err, review.ErrCapped):
		return "cap"
	}
	return "other"
}

// readCorpus reads a JSONL corpus; every error names the file and line.
func readCorpus(path string) ([]evalCase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, publicerr.Errorf(err, "the corpus %s cannot be read%s", path, daemonrun.KernelReason(err))
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxCaseLine)
	var cases []evalCase
	names := map[string]int{}
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		c, err := parseCase(line)
		if err != nil {
			return nil, publicerr.Errorf(err, "%s:%d: %s", path, n, err) // parseCase's errors are its own words about the line
		}
		if first, dup := names[c.Name]; dup {
			return nil, publicerr.Errorf(nil, "%s:%d: case %q is also on line %d", path, n, c.Name, first)
		}
		c.line, names[c.Name] = n, n
		cases = append(cases, c)
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return nil, publicerr.Errorf(sc.Err(), "%s: a line is longer than %d bytes", path, maxCaseLine)
	}
	if err := sc.Err(); err != nil {
		return nil, publicerr.Errorf(err, "the corpus %s cannot be read%s", path, daemonrun.KernelReason(err))
	}
	if len(cases) == 0 {
		return nil, publicerr.Errorf(nil, "%s: no cases", path)
	}
	return cases, nil
}

// parseCase decodes and checks one line: exact keys, one object, a
// request of a known surface and operation, an answer to expect.
func parseCase(line []byte) (evalCase, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var c evalCase
	if err := dec.Decode(&c); err != nil {
		return c, caseJSONError(err)
	}
	if dec.More() {
		return c, errors.New("more than one JSON value on the line")
	}
	r := c.Request
	switch {
	case c.Name == "":
		return c, errors.New("no name")
	case c.Class == "":
		return c, errors.New("no class")
	case c.Expect != "allow" && c.Expect != "deny":
		return c, fmt.Errorf("expect must be allow or deny, not %q", c.Expect)
	case !boundary.Operation(r.Operation).Of(boundary.Surface(r.Surface)):
		return c, fmt.Errorf("operation %q is not one of surface %q", r.Operation, r.Surface)
	case r.Surface == string(boundary.Filesystem) && r.Path == "":
		return c, errors.New("a filesystem request needs a path")
	case r.Surface == string(boundary.Network) && r.Destination == "":
		return c, errors.New("a network request needs a destination")
	case r.Surface == string(boundary.Command) && r.Command == "":
		return c, errors.New("a command request needs a command")
	}
	return c, nil
}

// evalSummary is eval's output (--json prints it as is). Every case is
// exactly one of correct, a false allow, a false deny or a fault.
type evalSummary struct {
	Model         string `json:"model"`
	Cases         int    `json:"cases"`
	Correct       int    `json:"correct"`
	FalseAllows   int    `json:"false_allows"`
	FalseDenies   int    `json:"false_denies"`
	Faults        int    `json:"faults"`
	ExpectedAllow int    `json:"expected_allow"`
	ExpectedDeny  int    `json:"expected_deny"`
	// Accuracy is Correct/Cases (a fault is not correct).
	Accuracy float64 `json:"accuracy"`
	// FalseAllowRate is FalseAllows/ExpectedDeny: the dangerous miss.
	FalseAllowRate float64 `json:"false_allow_rate"`
	// FalseDenyRate is FalseDenies/ExpectedAllow.
	FalseDenyRate float64        `json:"false_deny_rate"`
	FaultsByClass map[string]int `json:"faults_by_class"`
	PromptTokens  tokenFigures   `json:"prompt_tokens"`
	// LatencyMS are nearest-rank percentiles of each case's review.
	LatencyMS latencyFigures `json:"latency_ms"`
	Classes   []classFigures `json:"classes"`
	Misses    []evalMiss     `json:"misses"`
}

// tokenFigures are prompt sizes per case sent (nearest rank).
type tokenFigures struct {
	// Sent is how many cases reached the endpoint.
	Sent int `json:"sent"`
	// Median, P95 and Max are the input budget's estimate (Prompt.Tokens).
	Median int `json:"median"`
	P95    int `json:"p95"`
	Max    int `json:"max"`
	// ReportedMedian is the endpoint's prompt_tokens, when it reported any.
	ReportedMedian int64 `json:"reported_median,omitempty"`
}

// latencyFigures are review latencies in milliseconds.
type latencyFigures struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// classFigures are one class's cases.
type classFigures struct {
	Class    string  `json:"class"`
	Cases    int     `json:"cases"`
	Correct  int     `json:"correct"`
	Accuracy float64 `json:"accuracy"`
}

// evalMiss is a case answered wrong or not at all.
type evalMiss struct {
	Name   string `json:"name"`
	Class  string `json:"class"`
	Line   int    `json:"line"`
	Expect string `json:"expect"`
	// Got is "allow", "deny" or "fault: CLASS".
	Got string `json:"got"`
}

// summarize computes the figures of results.
func summarize(model string, results []caseResult) evalSummary {
	s := evalSummary{Model: model, Cases: len(results), FaultsByClass: map[string]int{}, Classes: []classFigures{}, Misses: []evalMiss{}}
	var est []int
	var rep []int64
	var lat []time.Duration
	byClass := map[string]*classFigures{}
	for _, r := range results {
		cf := byClass[r.c.Class]
		if cf == nil {
			cf = &classFigures{Class: r.c.Class}
			byClass[r.c.Class] = cf
		}
		cf.Cases++
		if r.c.Expect == "allow" {
			s.ExpectedAllow++
		} else {
			s.ExpectedDeny++
		}
		got := r.got
		switch {
		case r.fault != "":
			s.Faults++
			s.FaultsByClass[r.fault]++
			got = "fault: " + r.fault
		case r.got == r.c.Expect:
			s.Correct++
			cf.Correct++
		case r.got == "allow":
			s.FalseAllows++
		default:
			s.FalseDenies++
		}
		if got != r.c.Expect {
			s.Misses = append(s.Misses, evalMiss{Name: r.c.Name, Class: r.c.Class, Line: r.c.line, Expect: r.c.Expect, Got: got})
		}
		if r.sent {
			est = append(est, r.estimate)
			if r.reported > 0 {
				rep = append(rep, r.reported)
			}
		}
		lat = append(lat, r.latency)
	}
	s.Accuracy, s.FalseAllowRate, s.FalseDenyRate = ratio(s.Correct, s.Cases), ratio(s.FalseAllows, s.ExpectedDeny), ratio(s.FalseDenies, s.ExpectedAllow)
	s.PromptTokens = tokenFigures{Sent: len(est), Median: rank(est, 0.5), P95: rank(est, 0.95), Max: rank(est, 1), ReportedMedian: rank(rep, 0.5)}
	ms := func(p float64) float64 { return float64(rank(lat, p).Microseconds()) / 1000 }
	s.LatencyMS = latencyFigures{P50: ms(0.5), P95: ms(0.95), P99: ms(0.99)}
	for _, name := range slices.Sorted(maps.Keys(byClass)) {
		cf := byClass[name]
		cf.Accuracy = ratio(cf.Correct, cf.Cases)
		s.Classes = append(s.Classes, *cf)
	}
	return s
}

// ratio is n/d, 0 when d is.
func ratio(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// rank is the nearest-rank p-quantile of xs (the zero value when empty).
func rank[T int | int64 | time.Duration](xs []T, p float64) T {
	if len(xs) == 0 {
		var zero T
		return zero
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// printSummary prints s as plain text, one figure a line; names come
// from the corpus and are escaped.
func printSummary(w io.Writer, s evalSummary) {
	fmt.Fprintf(w, "model: %s\n", esc(s.Model))
	fmt.Fprintf(w, "cases: %d (%d expect allow, %d expect deny)\n", s.Cases, s.ExpectedAllow, s.ExpectedDeny)
	fmt.Fprintf(w, "accuracy: %.3f (%d/%d)\n", s.Accuracy, s.Correct, s.Cases)
	fmt.Fprintf(w, "false-allow rate: %.3f (%d/%d expected deny)\n", s.FalseAllowRate, s.FalseAllows, s.ExpectedDeny)
	fmt.Fprintf(w, "false-deny rate: %.3f (%d/%d expected allow)\n", s.FalseDenyRate, s.FalseDenies, s.ExpectedAllow)
	var faults []string
	for _, k := range slices.Sorted(maps.Keys(s.FaultsByClass)) {
		faults = append(faults, fmt.Sprintf("%s %d", k, s.FaultsByClass[k]))
	}
	fmt.Fprintf(w, "faults: %d", s.Faults)
	if len(faults) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(faults, ", "))
	}
	fmt.Fprintln(w)
	t := s.PromptTokens
	fmt.Fprintf(w, "prompt tokens per case (estimate, %d sent): median %d, p95 %d, max %d\n", t.Sent, t.Median, t.P95, t.Max)
	if t.ReportedMedian > 0 {
		fmt.Fprintf(w, "prompt tokens per case (endpoint's usage): median %d\n", t.ReportedMedian)
	}
	fmt.Fprintf(w, "latency: p50 %.1fms, p95 %.1fms, p99 %.1fms\n", s.LatencyMS.P50, s.LatencyMS.P95, s.LatencyMS.P99)
	fmt.Fprintln(w, "per class:")
	for _, c := range s.Classes {
		fmt.Fprintf(w, "  %-20s %.3f (%d/%d)\n", esc(c.Class), c.Accuracy, c.Correct, c.Cases)
	}
	if len(s.Misses) > 0 {
		fmt.Fprintln(w, "misses:")
		for _, m := range s.Misses {
			fmt.Fprintf(w, "  line %d %s (%s): expected %s, got %s\n", m.Line, esc(m.Name), esc(m.Class), m.Expect, m.Got)
		}
	}
}

// caseJSONError says what is wrong with a corpus line that does not
// decode, in sandboxd's words: encoding/json's own text names Go types.
func caseJSONError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Errorf("not valid JSON (at byte %d)", syn.Offset)
	case errors.As(err, &typ) && typ.Field != "":
		return fmt.Errorf("%s must be %s, not a JSON %s", typ.Field, jsonKind(typ.Type), typ.Value)
	case errors.As(err, &typ):
		return fmt.Errorf("a case must be %s, not a JSON %s", jsonKind(typ.Type), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the JSON value ends early")
	}
	// "json: unknown field \"NAME\"": the name is the line's own.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s", name)
	}
	return errors.New("not a JSON object of a case")
}

// jsonKind names the JSON a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}
