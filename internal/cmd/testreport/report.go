package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (see `go doc test2json`).
type event struct {
	Time       time.Time
	Action     string
	Package    string
	Test       string
	Elapsed    float64 // seconds, on a test's or package's result
	Output     string
	ImportPath string // on build-output
}

// testKey names one test (or subtest) of one package.
type testKey struct{ pkg, test string }

// result is one finished test.
type result struct {
	testKey
	action string // pass, fail or skip
	// took is the test's wall time from its start, or from its resumption
	// if it was paused by t.Parallel, to its result: go test's own elapsed
	// time leaves out the parallel subtests a test waits for, and would
	// call a tree of them 0s.
	took time.Duration
}

// report turns the event stream into go test's plain output: a test's
// output is held until its result, dropped when it passed or was
// skipped, printed when it failed (a subtest's under its parent's).
type report struct {
	w       io.Writer
	held    map[testKey][]string // output of tests without a result yet
	started map[string][]string  // each package's tests, in order of their first event
	// since is when each running test started, or resumed after its
	// t.Parallel pause; paused holds the tests in that pause.
	since   map[testKey]time.Time
	paused  map[testKey]bool
	results []result
}

func newReport(w io.Writer) *report {
	return &report{w: w, held: map[testKey][]string{}, started: map[string][]string{},
		since: map[testKey]time.Time{}, paused: map[testKey]bool{}}
}

// read handles every line of r until its end. A line that is not an
// event (go test says some things before any test runs) is printed as is.
func (r *report) read(in io.Reader) error {
	br := bufio.NewReader(in)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var e event
			if json.Unmarshal(line, &e) != nil || e.Action == "" {
				r.w.Write(line)
			} else {
				r.handle(e)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (r *report) handle(e event) {
	switch {
	case e.Action == "build-output":
		io.WriteString(r.w, e.Output)
	case e.Test == "" && e.Action == "output":
		// A package's FAIL line comes after whatever its unfinished
		// tests said (a timeout's or a panic's last words).
		if strings.HasPrefix(e.Output, "FAIL") {
			r.flush(e.Package)
		}
		if e.Output != "PASS\n" {
			io.WriteString(r.w, e.Output)
		}
	case e.Test == "" && e.Action == "fail":
		r.flush(e.Package)
	case e.Test == "":
	case e.Action == "run":
		r.since[testKey{e.Package, e.Test}] = e.Time
	case e.Action == "pause":
		r.paused[testKey{e.Package, e.Test}] = true
	case e.Action == "cont":
		k := testKey{e.Package, e.Test}
		if r.paused[k] {
			r.since[k] = e.Time
			delete(r.paused, k)
		}
	case e.Action == "output":
		k := testKey{e.Package, e.Test}
		if _, ok := r.held[k]; !ok {
			r.started[e.Package] = append(r.started[e.Package], e.Test)
		}
		// The run/pause/continue markers are verbose mode's; plain go
		// test prints none.
		if !strings.HasPrefix(e.Output, "=== ") {
			r.held[k] = append(r.held[k], e.Output)
		} else if r.held[k] == nil {
			r.held[k] = []string{}
		}
	case e.Action == "pass" || e.Action == "skip" || e.Action == "fail":
		k := testKey{e.Package, e.Test}
		took := time.Duration(e.Elapsed * float64(time.Second))
		if since, ok := r.since[k]; ok && !since.IsZero() && !e.Time.IsZero() {
			took = max(took, e.Time.Sub(since))
		}
		delete(r.since, k)
		r.results = append(r.results, result{k, e.Action, took})
		out := r.held[k]
		delete(r.held, k)
		if e.Action != "fail" {
			return
		}
		if i := strings.LastIndexByte(e.Test, '/'); i >= 0 {
			parent := testKey{e.Package, e.Test[:i]}
			r.held[parent] = append(r.held[parent], out...)
			return
		}
		for _, s := range out {
			io.WriteString(r.w, s)
		}
	}
}

// flush prints the held output of pkg's tests that have no result (the
// test binary died under them), in the order they started.
func (r *report) flush(pkg string) {
	for _, test := range r.started[pkg] {
		k := testKey{pkg, test}
		for _, s := range r.held[k] {
			io.WriteString(r.w, s)
		}
		delete(r.held, k)
	}
	delete(r.started, pkg)
}

// writeSlowest names the n slowest top-level tests with their wall times.
func (r *report) writeSlowest(n int) {
	var top []result
	for _, res := range r.results {
		if !strings.Contains(res.test, "/") {
			top = append(top, res)
		}
	}
	if n <= 0 || len(top) == 0 {
		return
	}
	slices.SortStableFunc(top, func(a, b result) int { return int(b.took - a.took) })
	top = top[:min(n, len(top))]
	// Times right-aligned, names in a column of their own.
	timeW, nameW := 0, 0
	for _, res := range top {
		timeW = max(timeW, len(fmt.Sprintf("%.1f", res.took.Seconds())))
		nameW = max(nameW, len(res.test))
	}
	fmt.Fprintf(r.w, "\nthe %d slowest tests, by wall time:\n", len(top))
	for _, res := range top {
		note := ""
		if res.action != "pass" {
			note = "  (" + res.action + ")"
		}
		fmt.Fprintf(r.w, "  %*.1fs  %-*s  %s%s\n", timeW, res.took.Seconds(), nameW, res.test, res.pkg, note)
	}
}
