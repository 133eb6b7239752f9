package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stream is a go test -json run of two packages (in the order go 1.26
// writes events): one passes, one has a failing subtest beside a passing
// parallel one, a skipped test, and a test the binary died in (a
// timeout).
const stream = `{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestQuick"}
{"Action":"output","Package":"ex/a","Test":"TestQuick","Output":"=== RUN   TestQuick\n"}
{"Action":"output","Package":"ex/a","Test":"TestQuick","Output":"    a_test.go:5: only verbose mode shows this\n"}
{"Action":"output","Package":"ex/a","Test":"TestQuick","Output":"--- PASS: TestQuick (0.50s)\n"}
{"Action":"pass","Package":"ex/a","Test":"TestQuick","Elapsed":0.5}
{"Action":"output","Package":"ex/a","Output":"PASS\n"}
{"Action":"output","Package":"ex/a","Output":"ok  \tex/a\t0.6s\n"}
{"Action":"pass","Package":"ex/a","Elapsed":0.6}
{"Action":"start","Package":"ex/b"}
{"Action":"run","Package":"ex/b","Test":"TestTree"}
{"Action":"output","Package":"ex/b","Test":"TestTree","Output":"=== RUN   TestTree\n"}
{"Action":"run","Package":"ex/b","Test":"TestTree/ok"}
{"Action":"output","Package":"ex/b","Test":"TestTree/ok","Output":"=== RUN   TestTree/ok\n"}
{"Action":"output","Package":"ex/b","Test":"TestTree/ok","Output":"=== PAUSE TestTree/ok\n"}
{"Action":"pause","Package":"ex/b","Test":"TestTree/ok"}
{"Action":"run","Package":"ex/b","Test":"TestTree/bad"}
{"Action":"output","Package":"ex/b","Test":"TestTree/bad","Output":"=== RUN   TestTree/bad\n"}
{"Action":"output","Package":"ex/b","Test":"TestTree/bad","Output":"    b_test.go:9: boom\n"}
{"Action":"output","Package":"ex/b","Test":"TestTree/ok","Output":"=== CONT  TestTree/ok\n"}
{"Action":"cont","Package":"ex/b","Test":"TestTree/ok"}
{"Action":"output","Package":"ex/b","Test":"TestTree/bad","Output":"--- FAIL: TestTree/bad (2.00s)\n"}
{"Action":"fail","Package":"ex/b","Test":"TestTree/bad","Elapsed":2}
{"Action":"output","Package":"ex/b","Test":"TestTree/ok","Output":"--- PASS: TestTree/ok (11.90s)\n"}
{"Action":"pass","Package":"ex/b","Test":"TestTree/ok","Elapsed":11.9}
{"Action":"output","Package":"ex/b","Test":"TestTree","Output":"--- FAIL: TestTree (12.00s)\n"}
{"Action":"fail","Package":"ex/b","Test":"TestTree","Elapsed":12}
{"Action":"run","Package":"ex/b","Test":"TestSkipped"}
{"Action":"output","Package":"ex/b","Test":"TestSkipped","Output":"--- SKIP: TestSkipped (0.00s)\n"}
{"Action":"skip","Package":"ex/b","Test":"TestSkipped","Elapsed":0}
{"Action":"run","Package":"ex/b","Test":"TestHangs"}
{"Action":"output","Package":"ex/b","Test":"TestHangs","Output":"=== RUN   TestHangs\n"}
{"Action":"output","Package":"ex/b","Test":"TestHangs","Output":"panic: test timed out after 25m0s\n"}
{"Action":"output","Package":"ex/b","Output":"FAIL\tex/b\t1500.0s\n"}
{"Action":"fail","Package":"ex/b","Elapsed":1500}
`

const want = `ok  	ex/a	0.6s
    b_test.go:9: boom
--- FAIL: TestTree/bad (2.00s)
--- FAIL: TestTree (12.00s)
panic: test timed out after 25m0s
FAIL	ex/b	1500.0s

the 3 slowest tests, by wall time:
  12.0s  TestTree     ex/b  (fail)
   0.5s  TestQuick    ex/a
   0.0s  TestSkipped  ex/b  (skip)
`

func TestReport(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	if err := r.read(strings.NewReader(stream + "go: a line that is not an event\n")); err != nil {
		t.Fatal(err)
	}
	r.writeSlowest(10)
	if got := out.String(); got != strings.Replace(want, "\n\nthe", "\ngo: a line that is not an event\n\nthe", 1) {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	out.Reset()
	r.writeSlowest(1)
	if got := out.String(); got != "\nthe 1 slowest tests, by wall time:\n  12.0s  TestTree  ex/b  (fail)\n" {
		t.Fatalf("slowest 1: got\n%s", got)
	}
}

// TestRunExitStatus: testreport passes go test its arguments after
// -json, keeps the events in the -json file, and exits with go test's
// status, after the slowest tests.
func TestRunExitStatus(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "go")
	events := filepath.Join(dir, "events.json")
	input := filepath.Join(dir, "stream")
	if err := os.WriteFile(input, []byte(stream), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"$*\" >&2\ncat " + input + "\nexit 3\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"-go", fake, "-json", events, "--", "-count=1", "./..."}, &stdout, &stderr)
	if code != 3 {
		t.Fatalf("exit status %d, want go test's 3\n%s", code, stderr.String())
	}
	if got := stderr.String(); got != "test -json -count=1 ./...\n" {
		t.Fatalf("go test's arguments: %q", got)
	}
	if stdout.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", stdout.String(), want)
	}
	if b, err := os.ReadFile(events); err != nil || string(b) != stream {
		t.Fatalf("the kept events differ from go test's: %v\n%s", err, b)
	}
}

// TestSlowestParallelTree: a parallel test's time is its wall time from
// its resumption to its result, subtests included, where go test says
// 0s for a test whose subtests are parallel.
func TestSlowestParallelTree(t *testing.T) {
	const tree = `{"Time":"2026-01-01T10:00:00Z","Action":"run","Package":"ex/c","Test":"TestTree"}
{"Time":"2026-01-01T10:00:00Z","Action":"pause","Package":"ex/c","Test":"TestTree"}
{"Time":"2026-01-01T10:00:01Z","Action":"run","Package":"ex/c","Test":"TestSerial"}
{"Time":"2026-01-01T10:01:41Z","Action":"pass","Package":"ex/c","Test":"TestSerial","Elapsed":100}
{"Time":"2026-01-01T10:01:41Z","Action":"cont","Package":"ex/c","Test":"TestTree"}
{"Time":"2026-01-01T10:01:41Z","Action":"run","Package":"ex/c","Test":"TestTree/a"}
{"Time":"2026-01-01T10:01:41Z","Action":"pause","Package":"ex/c","Test":"TestTree/a"}
{"Time":"2026-01-01T10:01:41Z","Action":"cont","Package":"ex/c","Test":"TestTree/a"}
{"Time":"2026-01-01T10:01:45Z","Action":"cont","Package":"ex/c","Test":"TestTree/a"}
{"Time":"2026-01-01T10:04:11Z","Action":"pass","Package":"ex/c","Test":"TestTree/a","Elapsed":150}
{"Time":"2026-01-01T10:04:11Z","Action":"pass","Package":"ex/c","Test":"TestTree","Elapsed":0}
`
	var out bytes.Buffer
	r := newReport(&out)
	if err := r.read(strings.NewReader(tree)); err != nil {
		t.Fatal(err)
	}
	r.writeSlowest(10)
	want := "\nthe 2 slowest tests, by wall time:\n  150.0s  TestTree    ex/c\n  100.0s  TestSerial  ex/c\n"
	if got := out.String(); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
