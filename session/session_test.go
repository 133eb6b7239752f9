package session

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/sandbox"
)

// world is a caller with a home, a workspace and a policy that allows
// creating exactly one file outside the workspace.
type world struct {
	caller  Caller
	ws      string
	allowed string // the path the policy allows creating
	denied  string // a path nothing allows
}

func newWorld(t *testing.T) world {
	t.Helper()
	root := t.TempDir()
	home := filepath.Join(root, "home")
	ws := filepath.Join(home, "proj")
	out := filepath.Join(root, "outside")
	for _, d := range []string{ws, out, filepath.Join(home, ".config", "sandboxd")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w := world{ws: ws, allowed: filepath.Join(out, "new-file"), denied: filepath.Join(out, "other")}
	pol := fmt.Sprintf("[boundaries]\nallow = [\"fs make_reg %s\"]\n", w.allowed)
	if err := os.WriteFile(filepath.Join(home, ".config", "sandboxd", "policy.toml"), []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := NewCaller(os.Getuid(), os.Getgid(), []string{"HOME=" + home, "PATH=/usr/bin:/bin"}, ws, 0o022)
	if err != nil {
		t.Fatal(err)
	}
	// The test process is the caller, groups and all, as the CLI's is.
	if c.Groups, err = os.Getgroups(); err != nil {
		t.Fatal(err)
	}
	w.caller = c
	return w
}

func fsDenial(op boundary.Operation, path string) sandbox.Denial {
	return sandbox.Denial{Surface: "filesystem", Operation: op, Path: path}
}

func job(retries int) Job {
	return Job{Argv: []string{"bash", "-c", "touch x"}, Command: "touch x", Agent: "test", Retries: retries}
}

// boundaries returns the report's boundaries as "attempt op path
// decision/source grant" lines.
func boundaries(rep *Report) []string {
	var out []string
	for _, b := range rep.Boundaries {
		target := b.Path
		if b.Destination != "" {
			target = b.Destination
		}
		s := fmt.Sprintf("%d %s %s %s/%s", b.Attempt, b.Operation, filepath.Base(target), b.Decision, b.Source)
		if b.Grant != "" {
			s += " " + b.Grant
		}
		if b.Held {
			s += " held"
		}
		out = append(out, s)
	}
	return out
}

// The attempt loop through each of its branches, with the real broker,
// policy and grant store and a scripted sandbox.
func TestAttemptLoop(t *testing.T) {
	clock := time.Now()
	var clockMu sync.Mutex
	now := func() time.Time { clockMu.Lock(); defer clockMu.Unlock(); return clock }
	advance := func(d time.Duration) { clockMu.Lock(); clock = clock.Add(d); clockMu.Unlock() }

	for _, tc := range []struct {
		name     string
		retries  int
		script   func(w world) []attemptFunc
		on       func(Event) // runs on each event
		attempts int
		exit     int
		want     []string // boundaries
		kinds    []Kind   // events, in order, boundary events included
		err      bool
	}{
		{
			name:    "all allowed: retry with exactly the grant",
			retries: 2,
			script: func(w world) []attemptFunc {
				return []attemptFunc{
					denies(1, fsDenial("make_reg", w.allowed)),
					func(_ context.Context, spec sandbox.Spec, _ During) (sandbox.Result, error) {
						if len(spec.Exceptions) != 1 || spec.Exceptions[0].Path != w.allowed || spec.Exceptions[0].Operation != "make_reg" {
							return sandbox.Result{}, fmt.Errorf("retry got exceptions %+v", spec.Exceptions)
						}
						return denies(0)(nil, spec, nil)
					},
				}
			},
			attempts: 2, exit: 0,
			want:  []string{"1 make_reg new-file allow/policy consumed"},
			kinds: []Kind{KindBoundary, KindReviewed, KindRetrying},
		},
		{
			name:    "one denied: no retry",
			retries: 2,
			script: func(w world) []attemptFunc {
				return []attemptFunc{denies(1, fsDenial("make_reg", w.allowed), fsDenial("write_file", w.denied))}
			},
			attempts: 1, exit: 1,
			want:  []string{"1 make_reg new-file allow/policy issued", "1 write_file other deny/no-reviewer"},
			kinds: []Kind{KindBoundary, KindBoundary, KindReviewed},
		},
		{
			name:    "stale grant: the object changed before the retry",
			retries: 2,
			script: func(w world) []attemptFunc {
				return []attemptFunc{
					denies(1, fsDenial("make_reg", w.allowed)),
					func(context.Context, sandbox.Spec, During) (sandbox.Result, error) {
						return sandbox.Result{}, fmt.Errorf("sandbox: grant to create %s: %w (it exists now)", w.allowed, sandbox.ErrGrantStale)
					},
				}
			},
			attempts: 1, exit: 1,
			want:  []string{"1 make_reg new-file allow/policy rejected"},
			kinds: []Kind{KindBoundary, KindReviewed, KindRetrying, KindNotRetrying},
		},
		{
			name:    "expired grant: no retry",
			retries: 2,
			script: func(w world) []attemptFunc {
				return []attemptFunc{denies(1, fsDenial("make_reg", w.allowed))}
			},
			on: func(e Event) {
				if e.Kind == KindBoundary {
					advance(broker.DefaultGrantTTL + time.Second)
				}
			},
			attempts: 1, exit: 1,
			want:  []string{"1 make_reg new-file allow/policy expired"},
			kinds: []Kind{KindBoundary, KindReviewed, KindNotRetrying},
		},
		{
			name:    "retries exhausted",
			retries: 1,
			script: func(w world) []attemptFunc {
				d := fsDenial("make_reg", w.allowed)
				return []attemptFunc{denies(1, d), denies(1, d)}
			},
			attempts: 2, exit: 1,
			want:  []string{"1 make_reg new-file allow/policy consumed", "2 make_reg new-file allow/policy issued"},
			kinds: []Kind{KindBoundary, KindReviewed, KindRetrying, KindBoundary, KindReviewed},
		},
		{
			name:    "held boundaries neither trigger nor block a retry",
			retries: 2,
			script: func(w world) []attemptFunc {
				return []attemptFunc{
					func(ctx context.Context, spec sandbox.Spec, during During) (sandbox.Result, error) {
						// A connection the proxy held, denied while the attempt ran.
						if r := during(ctx, sandbox.Denial{Surface: "network", Operation: "connect", Destination: "example.org:443"}); r.Decision.Outcome != broker.Deny {
							return sandbox.Result{}, fmt.Errorf("held connect: %+v", r.Decision)
						}
						return denies(1, fsDenial("make_reg", w.allowed))(ctx, spec, nil)
					},
					func(ctx context.Context, spec sandbox.Spec, during During) (sandbox.Result, error) {
						return denies(0)(ctx, spec, nil)
					},
				}
			},
			attempts: 2, exit: 0,
			want:  []string{"1 connect example.org:443 deny/hard-deny held", "1 make_reg new-file allow/policy consumed"},
			kinds: []Kind{KindBoundary, KindBoundary, KindReviewed, KindRetrying},
		},
		{
			name:    "quiet writes are no boundaries and do not block a retry",
			retries: 2,
			script: func(w world) []attemptFunc {
				tele := filepath.Join(w.caller.Home, ".config", "go", "telemetry", "local", "go@x.count")
				return []attemptFunc{denies(1, fsDenial("make_reg", tele), fsDenial("make_reg", w.allowed)), denies(0, fsDenial("make_reg", tele))}
			},
			attempts: 2, exit: 0,
			want:  []string{"1 make_reg new-file allow/policy consumed"},
			kinds: []Kind{KindBoundary, KindReviewed, KindRetrying},
		},
		{
			name:    "no boundaries: one attempt",
			retries: 2,
			script: func(w world) []attemptFunc {
				return []attemptFunc{denies(0)}
			},
			attempts: 1, exit: 0, want: nil, kinds: nil,
		},
		{
			name:    "sandboxd fails: exit 125, a public sentence only",
			retries: 2,
			script: func(w world) []attemptFunc {
				return []attemptFunc{func(context.Context, sandbox.Spec, During) (sandbox.Result, error) {
					return sandbox.Result{}, errors.New("sandbox: socketpair: too many open files")
				}}
			},
			attempts: 0, exit: ExitSandboxd, err: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			fake := &fakeSandbox{script: tc.script(w)}
			store := grants.NewStore(grants.WithClock(now))
			r := New(Config{Sandbox: fake, Grants: store})
			ev := &recorder{on: tc.on}
			rep, err := r.Run(context.Background(), w.caller, job(tc.retries), ev)
			if (err != nil) != tc.err {
				t.Fatalf("err %v", err)
			}
			if fake.overrun {
				t.Fatalf("the loop ran more attempts than scripted")
			}
			if rep.Attempts != tc.attempts || rep.ExitCode != tc.exit {
				t.Fatalf("attempts %d exit %d, want %d %d (error %q)", rep.Attempts, rep.ExitCode, tc.attempts, tc.exit, rep.Error)
			}
			if got := boundaries(rep); !slices.Equal(got, tc.want) {
				t.Fatalf("boundaries\n got %q\nwant %q", got, tc.want)
			}
			if got := ev.kinds(); !slices.Equal(got, tc.kinds) {
				t.Fatalf("events %q, want %q", got, tc.kinds)
			}
			if tc.err && (rep.Error == "" || strings.Contains(rep.Error, "socketpair")) {
				t.Fatalf("report error %q is not a public sentence", rep.Error)
			}
			// Nothing issued for the run outlives it, not even the
			// grant of an allow no retry used.
			if store.Len() != 0 {
				t.Fatalf("%d grants outstanding after the run", store.Len())
			}
		})
	}
}

// A session's grants and breaker belong to the caller's uid: the same
// session name from another uid is another session.
func TestSessionScopedByCaller(t *testing.T) {
	a, b := Caller{UID: 1000}, Caller{UID: 1001}
	if scopedSession(a, "s1") == scopedSession(b, "s1") {
		t.Fatal("two uids share a session")
	}
	if scopedSession(a, "") == scopedSession(a, "") {
		t.Fatal("two runs without a session share one")
	}
	if !strings.Contains(scopedSession(a, "uid 1001: s1"), "uid 1000:") {
		t.Fatal("a session name can reach another uid's session")
	}
}

// A Runner is safe for concurrent use: runs share its grant store and
// stay apart.
func TestConcurrentRuns(t *testing.T) {
	w := newWorld(t)
	store := grants.NewStore()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fake := &fakeSandbox{script: []attemptFunc{denies(1, fsDenial("make_reg", w.allowed)), denies(0)}}
			rep, err := New(Config{Sandbox: fake, Grants: store}).Run(context.Background(), w.caller, job(1), nil)
			if err != nil || rep.Attempts != 2 || rep.Boundaries[0].Grant != "consumed" {
				errs <- fmt.Errorf("run: %v %+v", err, rep)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if store.Len() != 0 {
		t.Fatalf("%d grants outstanding", store.Len())
	}
}

// The final attempt's layer is committed; what the commit refuses (a git
// hook in a repository of the workspace) is a boundary of that attempt,
// and the rest is committed.
func TestCommitRefusal(t *testing.T) {
	w := newWorld(t)
	gd := filepath.Join(w.ws, ".git")
	for _, d := range []string{"objects", "refs/heads", "hooks"} {
		if err := os.MkdirAll(filepath.Join(gd, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(gd, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	started := time.Now().Add(-time.Second)
	layerDir := t.TempDir()
	upper := filepath.Join(layerDir, "upper")
	os.MkdirAll(filepath.Join(upper, ".git", "hooks"), 0o755)
	os.WriteFile(filepath.Join(upper, ".git", "hooks", "pre-commit"), []byte("#!/bin/sh\ntouch /tmp/pwned\n"), 0o755)
	os.WriteFile(filepath.Join(upper, "result.txt"), []byte("built\n"), 0o644)
	root, err := os.Open(layerDir)
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := os.Getuid(), os.Getgid()
	fake := &fakeSandbox{script: []attemptFunc{func(context.Context, sandbox.Spec, During) (sandbox.Result, error) {
		return sandbox.Result{Isolation: sandbox.Namespaces, Transaction: sandbox.Transaction{Mode: "layer"},
			Layer: &sandbox.Layer{Root: root, Started: started, HostUID: uid, HostGID: gid, UID: uid, GID: gid}}, nil
	}}}
	ev := &recorder{}
	rep, err := New(Config{Sandbox: fake}).Run(context.Background(), w.caller, job(2), ev)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := boundaries(rep), []string{"1 persist pre-commit deny/hard-deny"}; !slices.Equal(got, want) {
		t.Fatalf("boundaries %q, want %q", got, want)
	}
	if _, err := os.Lstat(filepath.Join(gd, "hooks", "pre-commit")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the hook reached the workspace: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(w.ws, "result.txt")); err != nil || string(b) != "built\n" {
		t.Fatalf("the rest was not committed: %q %v", b, err)
	}
	if got := ev.kinds(); !slices.Equal(got, []Kind{KindCommitted}) {
		t.Fatalf("events %q", got)
	}
	if rep.Transaction == nil || rep.Transaction.Mode != "layer" || rep.Transaction.Committed == nil {
		t.Fatalf("transaction %+v", rep.Transaction)
	}
}
