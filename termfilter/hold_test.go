package termfilter

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a writing goroutine and a
// checking one.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until buf holds want, and fails the test if it does not
// within a few seconds.
func waitFor(t *testing.T, buf *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for buf.String() != want {
		if time.Now().After(deadline) {
			t.Fatalf("got %q, want %q", buf.String(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkGoroutines fails the test if it leaves goroutines behind. Call it
// first, so that it runs after the test's other cleanups.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				t.Errorf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

func TestWriterHold(t *testing.T) {
	// Each step writes (w), holds (h), releases (r) or resets (x), then
	// checks everything the terminal has been shown so far.
	type step struct {
		op, in, shown string
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"held until released", []step{
			{"w", "a", "a"}, {"h", "", "a"}, {"w", "b", "a"}, {"w", "c", "a"}, {"r", "", "abc"}, {"w", "d", "abcd"},
		}},
		{"holds nest", []step{
			{"h", "", ""}, {"w", "a", ""}, {"h", "", ""}, {"w", "b", ""}, {"r", "", ""}, {"w", "c", ""}, {"r", "", "abc"},
		}},
		{"two questions in a row", []step{
			{"h", "", ""}, {"w", "a", ""}, {"r", "", "a"}, {"h", "", "a"}, {"w", "b", "a"}, {"r", "", "ab"},
		}},
		{"release without hold", []step{
			{"r", "", ""}, {"w", "a", "a"}, {"h", "", "a"}, {"w", "b", "a"}, {"r", "", "ab"},
		}},
		{"held output is filtered", []step{
			{"h", "", ""}, {"w", "\x1b[2Jx\x1b[7;1my", ""}, {"r", "", "x\x1b[1my"},
		}},
		{"sequence split across a hold", []step{
			{"w", "\x1b[3", ""}, {"h", "", ""}, {"w", "1mred", ""}, {"r", "", "\x1b[31mred"},
		}},
		{"reset while held keeps what is held", []step{
			{"h", "", ""}, {"w", "a\x1b[3", ""}, {"x", "", ""}, {"w", "1m", ""}, {"r", "", "a1m"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			w := New(&b)
			for i, s := range tc.steps {
				switch s.op {
				case "w":
					if n, err := w.Write([]byte(s.in)); n != len(s.in) || err != nil {
						t.Fatalf("step %d: Write = %d, %v", i, n, err)
					}
				case "h":
					w.Hold()
				case "r":
					w.Release()
				case "x":
					w.Reset()
				}
				if got := b.String(); got != s.shown {
					t.Fatalf("step %d (%s %q): shown %q, want %q", i, s.op, s.in, got, s.shown)
				}
			}
		})
	}
}

// Lines written by several goroutines while held come out after Release,
// each whole and each goroutine's in the order it wrote them.
func TestWriterHoldConcurrent(t *testing.T) {
	checkGoroutines(t)
	const writers, lines = 8, 200
	var dst syncBuffer
	w := New(&dst)
	write := func(g int) {
		for i := range lines {
			fmt.Fprintf(w, "g%d-%03d\n", g, i)
		}
	}

	w.Hold()
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() { write(g) })
	}
	wg.Wait()
	if got := dst.String(); got != "" {
		t.Fatalf("shown while held: %q", got)
	}
	w.Release()
	checkLines(t, dst.String(), writers, lines)

	// The same with Hold, Release and Reset racing the writers.
	dst = syncBuffer{}
	w = New(&dst)
	stop := make(chan struct{})
	var toggler sync.WaitGroup
	toggler.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			w.Hold()
			w.Reset()
			time.Sleep(50 * time.Microsecond)
			w.Release()
		}
	})
	for g := range writers {
		wg.Go(func() { write(g) })
	}
	wg.Wait()
	close(stop)
	toggler.Wait()
	checkLines(t, dst.String(), writers, lines)
}

func checkLines(t *testing.T, out string, writers, lines int) {
	t.Helper()
	next := make([]int, writers)
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, l := range got {
		var g, i int
		if _, err := fmt.Sscanf(l, "g%d-%03d", &g, &i); err != nil || g < 0 || g >= writers || fmt.Sprintf("g%d-%03d", g, i) != l {
			t.Fatalf("mangled line %q", l)
		}
		if i != next[g] {
			t.Fatalf("writer %d: line %d after line %d", g, i, next[g]-1)
		}
		next[g]++
	}
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
}

// A held Writer keeps up to maxHeld and then makes the command wait;
// Release lets everything through, in order, with nothing dropped.
func TestWriterHoldBound(t *testing.T) {
	checkGoroutines(t)
	var dst syncBuffer
	w := New(&dst)
	w.Hold()
	in := make([]byte, maxHeld+maxHeld/2)
	for i := range in {
		in[i] = 'a' + byte(i%26)
	}
	done := make(chan error, 1)
	go func() {
		_, err := w.Write(in)
		done <- err
	}()

	deadline := time.Now().Add(5 * time.Second)
	for held(w) < maxHeld {
		if time.Now().After(deadline) {
			t.Fatalf("held %d bytes, want at least %d", held(w), maxHeld)
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Write returned (%v) while held past the bound", err)
	case <-time.After(100 * time.Millisecond):
	}
	if n := held(w); n > maxHeld+3*holdStep+maxSeq {
		t.Fatalf("held %d bytes, bound %d", n, maxHeld)
	}
	if got := dst.String(); got != "" {
		t.Fatalf("shown %d bytes while held", len(got))
	}

	w.Release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Write still waiting after Release")
	}
	if got := dst.String(); got != string(in) {
		t.Fatalf("shown %d bytes, want the %d written, in order", len(got), len(in))
	}
}

func held(w *Writer) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.held)
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

// Output held back belongs to Writes that already returned, so an error
// showing it goes to the next Write.
func TestWriterReleaseError(t *testing.T) {
	gone := errors.New("terminal gone")
	w := New(failWriter{gone})
	w.Hold()
	if _, err := w.Write([]byte("a")); err != nil {
		t.Fatalf("held Write: %v", err)
	}
	w.Release()
	if _, err := w.Write([]byte("b")); !errors.Is(err, gone) {
		t.Fatalf("Write after Release: %v, want %v", err, gone)
	}
}
