package detect

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/kernelaudit"
)

// fakeKernel hands a Hub records a test writes, as the audit multicast
// group would, and counts how often it was opened and closed.
type fakeKernel struct {
	recs         chan fakeRec
	lostCount    atomic.Uint32
	opens, close atomic.Int32
	failOpen     error
}

type fakeRec struct {
	typ  int
	text string
	err  error
}

type fakeSource struct {
	k      *fakeKernel
	closed chan struct{}
	once   sync.Once
}

func (s *fakeSource) Next() (int, string, error) {
	select {
	case r := <-s.k.recs:
		return r.typ, r.text, r.err
	case <-s.closed:
		return 0, "", kernelaudit.ErrClosed
	}
}

func (s *fakeSource) Close() error {
	s.once.Do(func() { s.k.close.Add(1); close(s.closed) })
	return nil
}

func newFakeHub() (*Hub, *fakeKernel) {
	k := &fakeKernel{recs: make(chan fakeRec)}
	h := newHub(nil, func() (source, error) {
		if k.failOpen != nil {
			return nil, k.failOpen
		}
		k.opens.Add(1)
		return &fakeSource{k: k, closed: make(chan struct{})}, nil
	}, func() (uint32, error) { return k.lostCount.Load(), nil })
	return h, k
}

// send hands records to the reader and returns once it has dispatched
// them all (the record after the last is taken only then).
func (k *fakeKernel) send(recs ...fakeRec) {
	for _, r := range recs {
		k.recs <- r
	}
	k.recs <- fakeRec{typ: 1300, text: "audit(1.2:1): arch=c000003e syscall=257"}
}

var serial atomic.Uint64

func header() string { return fmt.Sprintf("audit(1.2:%d):", serial.Add(1)) }

func read(domain, path string) fakeRec {
	return fakeRec{typ: 1423, text: fmt.Sprintf(`%s domain=%s blockers=fs.read_file path="%s" dev="vda" ino=5`, header(), domain, path)}
}

func signal(domain string) fakeRec {
	return fakeRec{typ: 1423, text: fmt.Sprintf(`%s domain=%s blockers=scope.signal opid=27 ocomm="sleep"`, header(), domain)}
}

// probe is the helper's deliberate denial.
func probe(domain string, pid int) fakeRec {
	return fakeRec{typ: 1423, text: fmt.Sprintf(`%s domain=%s blockers=fs.write_file path="/proc/%d/comm" dev="proc" ino=9`, header(), domain, pid)}
}

func allocated(domain string, pid int) fakeRec {
	return fakeRec{typ: 1424, text: fmt.Sprintf(`%s domain=%s status=allocated mode=enforcing pid=%d uid=0 exe="/x" comm="x"`, header(), domain, pid)}
}

func deallocated(domain string, denials int) fakeRec {
	return fakeRec{typ: 1424, text: fmt.Sprintf(`%s domain=%s status=deallocated denials=%d`, header(), domain, denials)}
}

// announce is how a run's records begin: the probe, then the kernel's
// announcement of the domain that made it.
func announce(domain string, pid int) []fakeRec {
	return []fakeRec{probe(domain, pid), allocated(domain, pid)}
}

func start(t *testing.T, h *Hub, pid int) *Audit {
	t.Helper()
	a, err := h.Start()
	if err != nil {
		t.Fatal(err)
	}
	a.Own(pid)
	t.Cleanup(a.Stop)
	return a
}

func paths(ds []Denial) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Path)
	}
	return out
}

// Each run gets the records of its own domain and no other's; records
// of domains no run owns are dropped and counted.
func TestHubGivesEachRunItsOwnRecords(t *testing.T) {
	h, k := newFakeHub()
	a, b := start(t, h, 10), start(t, h, 20)
	var recs []fakeRec
	recs = append(recs, announce("a1", 10)...)
	recs = append(recs, announce("b2", 20)...)
	recs = append(recs, read("a1", "/a/secret"), read("b2", "/b/secret"),
		// Another program's domain, announced and not.
		probe("f3", 99), allocated("f3", 99), read("f3", "/f/secret"), read("f4", "/g/secret"),
		read("a1", "/a/secret"), read("a1", "/a/other"),
		probe("a1", 10), probe("b2", 20))
	k.send(recs...)
	for _, tc := range []struct {
		run  *Audit
		want []string
	}{{a, []string{"/a/secret", "/a/other"}}, {b, []string{"/b/secret"}}} {
		got, det := tc.run.Collect(time.Second)
		if !slices.Equal(paths(got), tc.want) || det.Lost != 0 || det.Detector != "audit" {
			t.Errorf("pid %d: denials %q, detection %+v; want %q, nothing lost", tc.run.pid, paths(got), det, tc.want)
		}
	}
	k.send(deallocated("a1", 5), deallocated("f3", 2))
	if st := h.Stats(); st.Unknown != 5 || st.Records != 16 {
		t.Errorf("stats %+v: want 16 records, 5 of them unknown (f3's four, f4's one)", st)
	}
}

// A domain announced before its first record (or after) is the same.
func TestHubAnnouncementBeforeProbe(t *testing.T) {
	h, k := newFakeHub()
	a := start(t, h, 10)
	k.send(allocated("a1", 10), probe("a1", 10), read("a1", "/x"), probe("a1", 10))
	got, det := a.Collect(time.Second)
	if !slices.Equal(paths(got), []string{"/x"}) || det.Lost != 0 {
		t.Errorf("denials %q, detection %+v", paths(got), det)
	}
}

// Every way records can go missing is counted against the runs they
// could have belonged to, and only those.
func TestHubLosses(t *testing.T) {
	type run struct {
		pid    int
		domain string
	}
	for _, tc := range []struct {
		name string
		// before starts A (pid 10, domain a1, announced) and B (pid 20,
		// not announced yet, or b2 if announceB); then act runs.
		announceB bool
		keep      int
		limbo     int
		act       func(h *Hub, k *fakeKernel)
		wait      time.Duration
		// wantA and wantB are the Lost each run reports, after each
		// sends its end marker (b2 only when announceB).
		wantA, wantB int
		// whyA and whyB are in the runs' reasons (whyB "": B's says
		// only that its domain never came, when it did not).
		whyA, whyB string
	}{
		{name: "nothing lost", announceB: true},
		{name: "overrun: every live run", announceB: true, act: func(h *Hub, k *fakeKernel) {
			k.send(fakeRec{err: kernelaudit.ErrOverrun})
		}, wantA: -1, wantB: -1, whyA: "dropped"},
		{name: "kernel lost counter rose", announceB: true, act: func(h *Hub, k *fakeKernel) {
			k.lostCount.Add(1)
		}, wantA: -1, wantB: -1, whyA: "dropped"},
		{name: "deallocation counts more than came", announceB: true, act: func(h *Hub, k *fakeKernel) {
			k.send(deallocated("a1", 6)) // 2 probes + 2 reads came
		}, wantA: 2},
		{name: "unreadable record of a known domain: its run only", announceB: true, act: func(h *Hub, k *fakeKernel) {
			k.send(fakeRec{typ: 1423, text: `audit(1.2:3): domain=a1 blockers=fs.read_file path=ZZ`})
		}, wantA: -1, whyA: "could not be read"},
		{name: "unreadable record without a domain: every live run", announceB: true, act: func(h *Hub, k *fakeKernel) {
			k.send(fakeRec{typ: 1423, text: `garbage`})
		}, wantA: -1, wantB: -1, whyA: "could not be read"},
		{name: "unreadable record of an unknown domain: runs not yet announced", act: func(h *Hub, k *fakeKernel) {
			k.send(fakeRec{typ: 1423, text: `audit(1.2:3): domain=zz blockers=fs.read_file path=ZZ`})
		}, wantB: -1, whyB: "could not be read"},
		{name: "evicted probe: runs not yet announced", limbo: 2, act: func(h *Hub, k *fakeKernel) {
			k.send(probe("f1", 91), probe("f2", 92), probe("f3", 93))
		}, wantB: -1, whyB: "never claimed"},
		{name: "foreign records do not evict", limbo: 2, act: func(h *Hub, k *fakeKernel) {
			k.send(read("f1", "/1"), read("f2", "/2"), read("f3", "/3"), probe("f4", 94), allocated("f4", 94))
		}},
		{name: "second domain for the helper", announceB: true, act: func(h *Hub, k *fakeKernel) {
			k.send(allocated("a9", 10))
		}, wantA: -1, whyA: "second"},
		// The reader's error is logged; the reason has its errno only.
		{name: "reader failed", announceB: true, act: func(h *Hub, k *fakeKernel) {
			k.recs <- fakeRec{err: fmt.Errorf("kernelaudit: receive: %w", syscall.EIO)}
			<-h.done
		}, wantA: -1, wantB: -1, whyA: "the kernel audit reader failed (input/output error)"},
		{name: "reader failed, no errno", announceB: true, act: func(h *Hub, k *fakeKernel) {
			k.recs <- fakeRec{err: errors.New("kernelaudit: boom")}
			<-h.done
		}, wantA: -1, wantB: -1, whyA: "the kernel audit reader failed (an internal error)"},
		{name: "buffer full: counted exactly", announceB: true, keep: 4, act: func(h *Hub, k *fakeKernel) {
			// a1 holds its probe and two reads; one more fits.
			k.send(read("a1", "/3"), read("a1", "/4"), read("a1", "/5"), read("a1", "/3"))
		}, wantA: 2, whyA: "counted, not kept"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, k := newFakeHub()
			if tc.keep != 0 {
				h.keep = tc.keep
			}
			if tc.limbo != 0 {
				h.limboCap = tc.limbo
			}
			a, b := start(t, h, 10), start(t, h, 20)
			k.send(append(announce("a1", 10), read("a1", "/1"), read("a1", "/2"))...)
			if tc.announceB {
				k.send(announce("b2", 20)...)
			}
			if tc.act != nil {
				tc.act(h, k)
			}
			if !closed(h.done) {
				k.send(probe("a1", 10))
				if tc.announceB {
					k.send(probe("b2", 20))
				}
			}
			wait := 200 * time.Millisecond
			_, detA := a.Collect(wait)
			_, detB := b.Collect(wait)
			if !tc.announceB && tc.wantB == 0 {
				// B's domain never came: that alone is a loss.
				tc.wantB = -1
			}
			if detA.Lost != tc.wantA || detB.Lost != tc.wantB || !strings.Contains(detA.Why, tc.whyA) {
				t.Errorf("A %+v, B %+v; want A lost %d (%q), B lost %d", detA, detB, tc.wantA, tc.whyA, tc.wantB)
			}
			switch never := "the run's Landlock domain was never announced"; {
			case tc.whyB != "" && !strings.Contains(detB.Why, tc.whyB):
				t.Errorf("B: %+v, want the reason to say %q", detB, tc.whyB)
			case tc.whyB == "" && !tc.announceB && detB.Why != never:
				t.Errorf("B: %+v, want %q only", detB, never)
			}
		})
	}
}

// A run that starts after a loss is not charged with it.
func TestHubLossOnlyForLiveRuns(t *testing.T) {
	h, k := newFakeHub()
	a := start(t, h, 10)
	k.send(fakeRec{err: kernelaudit.ErrOverrun})
	b := start(t, h, 20)
	k.send(append(announce("a1", 10), probe("a1", 10))...)
	k.send(append(announce("b2", 20), read("b2", "/b"), probe("b2", 20))...)
	if _, det := a.Collect(time.Second); det.Lost != -1 {
		t.Errorf("A, live at the overrun: %+v", det)
	}
	if got, det := b.Collect(time.Second); det.Lost != 0 || !slices.Equal(paths(got), []string{"/b"}) {
		t.Errorf("B, started after it: %q %+v", paths(got), det)
	}
}

// A repeated record is kept once but counted each time, so a command
// repeating one denial fills no buffer, and the blockers that are no
// file or network access still count every time.
func TestHubRepeatsKeptOnce(t *testing.T) {
	h, k := newFakeHub()
	h.keep = 3
	a := start(t, h, 10)
	k.send(announce("a1", 10)...)
	for range 100 {
		k.send(read("a1", "/x"), signal("a1"))
	}
	k.send(probe("a1", 10), deallocated("a1", 202))
	got, det := a.Collect(time.Second)
	if !slices.Equal(paths(got), []string{"/x"}) || det.Lost != 0 || det.Other != 100 {
		t.Errorf("denials %q, detection %+v; want /x, nothing lost, 100 others", paths(got), det)
	}
}

// The reader runs while some run does: the first Start opens it, the
// last Stop closes it, and a failed reader is replaced by the next
// Start.
func TestHubReaderLifetime(t *testing.T) {
	goroutines := runtime.NumGoroutine()
	h, k := newFakeHub()
	a, _ := h.Start()
	b, _ := h.Start()
	a.Stop()
	a.Stop() // twice is harmless
	if k.opens.Load() != 1 || k.close.Load() != 0 {
		t.Fatalf("one run left: opened %d, closed %d", k.opens.Load(), k.close.Load())
	}
	b.Stop()
	if k.close.Load() != 1 {
		t.Fatalf("last run gone: closed %d times", k.close.Load())
	}
	c, _ := h.Start()
	k.recs <- fakeRec{err: errors.New("boom")}
	<-h.done
	d, _ := h.Start()
	if k.opens.Load() != 3 {
		t.Errorf("opened %d times, want 3 (first run, after idle, after a failure)", k.opens.Load())
	}
	c.Stop()
	d.Stop()
	if k.close.Load() != 3 {
		t.Errorf("closed %d times, want 3", k.close.Load())
	}
	k.failOpen = errors.New("no audit")
	if _, err := h.Start(); err == nil {
		t.Error("Start without kernel audit succeeded")
	}
	if g := runtime.NumGoroutine(); g > goroutines {
		time.Sleep(100 * time.Millisecond)
		if g = runtime.NumGoroutine(); g > goroutines {
			t.Errorf("%d goroutines, %d before", g, goroutines)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.live)+len(h.byPid)+len(h.byDomain)+len(h.limbo) != 0 {
		t.Errorf("state left: %d live, %d pids, %d domains, %d in limbo", len(h.live), len(h.byPid), len(h.byDomain), len(h.limbo))
	}
}

// Many runs at once, their records interleaved with each other's and
// with another program's: each gets exactly its own.
func TestHubConcurrentRuns(t *testing.T) {
	h, k := newFakeHub()
	const runs, reads = 16, 50
	// Held open by a run of the test's own, so the reader lives
	// throughout.
	keeper, _ := h.Start()
	defer keeper.Stop()
	stop := make(chan struct{})
	noise := make(chan struct{})
	go func() {
		defer close(noise)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case k.recs <- read(fmt.Sprintf("f%d", i%7), "/foreign"):
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pid, domain := 1000+i, fmt.Sprintf("d%d", i)
			a, err := h.Start()
			if err != nil {
				t.Error(err)
				return
			}
			defer a.Stop()
			a.Own(pid)
			var want []string
			recs := announce(domain, pid)
			for j := range reads {
				p := fmt.Sprintf("/run%d/%d", i, j%(reads/2))
				recs = append(recs, read(domain, p))
				if !slices.Contains(want, p) {
					want = append(want, p)
				}
			}
			recs = append(recs, probe(domain, pid))
			for _, r := range recs {
				k.recs <- r
			}
			got, det := a.Collect(5 * time.Second)
			if det.Lost != 0 || !slices.Equal(paths(got), want) {
				t.Errorf("run %d: %d denials, detection %+v", i, len(got), det)
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-noise
	if st := h.Stats(); st.Evicted != 0 || st.Records < runs*(reads+3) {
		t.Errorf("stats %+v", st)
	}
}
