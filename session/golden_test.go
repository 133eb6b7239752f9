package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/internal/golden"
	"github.com/sandboxd/sandboxd/layer"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/suggest"
)

// The events an agent's front end hears, as a daemon would stream them
// (NDJSON), for runs through the loop's branches: every sentence in them
// is pinned here.
func TestEventsGolden(t *testing.T) {
	var out bytes.Buffer
	scenarios := []struct {
		name   string
		script func(w world) []attemptFunc
		clock  bool
		setup  func(t *testing.T, w world, j *Job) // changes the job or the caller's files
	}{
		{"retry", func(w world) []attemptFunc {
			return []attemptFunc{denies(1, fsDenial("make_reg", w.allowed)), denies(0)}
		}, false, nil},
		{"denied", func(w world) []attemptFunc {
			return []attemptFunc{denies(1, fsDenial("read_file", filepath.Join(w.caller.Home, ".ssh", "id_rsa")), fsDenial("write_file", w.denied))}
		}, false, nil},
		{"stale", func(w world) []attemptFunc {
			return []attemptFunc{denies(1, fsDenial("make_reg", w.allowed)), func(context.Context, sandbox.Spec, During) (sandbox.Result, error) {
				return sandbox.Result{}, fmt.Errorf("x: %w", sandbox.ErrGrantStale)
			}}
		}, false, nil},
		{"expired", func(w world) []attemptFunc {
			return []attemptFunc{denies(1, fsDenial("make_reg", w.allowed))}
		}, true, nil},
		{"quiet", func(w world) []attemptFunc {
			tele := filepath.Join(w.caller.Home, ".config", "go", "telemetry", "local")
			return []attemptFunc{denies(0, fsDenial("make_reg", filepath.Join(tele, "go@a.count")),
				fsDenial("write_file", filepath.Join(tele, "go@b.count")), fsDenial("make_dir", filepath.Join(w.caller.Home, ".config", "procps")))}
		}, false, nil},
		{"warnings", func(w world) []attemptFunc {
			return []attemptFunc{func(context.Context, sandbox.Spec, During) (sandbox.Result, error) {
				return sandbox.Result{ExitCode: 124, TimedOut: true, Isolation: sandbox.LandlockOnly, Degraded: []string{"no namespaces"},
					Detection:   sandbox.Detection{Detector: "audit", Lost: 2, Why: "the kernel dropped records"},
					Persistence: []sandbox.Persisted{{Path: ".envrc", Action: "quarantined", Why: "direnv runs it", Quarantine: "/q/.envrc"}}}, nil
			}}
		}, false, nil},
		// sandboxd's own failures: the report's error is a public
		// sentence, never the internal cause (a path of sandboxd's state,
		// a syscall's text), which is for the log.
		{"internal failure", func(w world) []attemptFunc {
			return []attemptFunc{func(context.Context, sandbox.Spec, During) (sandbox.Result, error) {
				return sandbox.Result{}, fmt.Errorf("sandbox: state directory: %w", &fs.PathError{Op: "mkdir", Path: w.caller.Layout().State, Err: syscall.EACCES})
			}}
		}, false, nil},
		{"missing workspace", nil, false, func(t *testing.T, w world, j *Job) {
			j.Workspace = filepath.Join(w.ws, "missing")
		}},
		{"policy unreadable", nil, false, func(t *testing.T, w world, j *Job) {
			j.Policy = filepath.Join(w.ws, "policy-dir")
			if err := os.Mkdir(j.Policy, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		// A production target: critical before any reviewer, and with
		// nobody to ask, denied, saying which name matched which marker.
		{"production", func(w world) []attemptFunc {
			return []attemptFunc{denies(1, fsDenial("write_file", filepath.Join(w.caller.Home, ".kube", "prod", "config")))}
		}, false, func(t *testing.T, w world, j *Job) {
			j.Policy = filepath.Join(w.ws, "prod.toml")
			if err := os.WriteFile(j.Policy, []byte("[filesystem]\nallow_secrets = [\"~/.kube\"]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"policy unresolvable", nil, false, func(t *testing.T, w world, j *Job) {
			j.Policy = filepath.Join(w.ws, "bad.toml")
			if err := os.WriteFile(j.Policy, []byte("[filesystem]\nwritable = [\"relative/dir\"]\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, sc := range scenarios {
		w := newWorld(t)
		clock := time.Unix(1e9, 0)
		opts := []grants.Option{}
		if sc.clock {
			opts = append(opts, grants.WithClock(func() time.Time { return clock }))
		}
		ev := &recorder{}
		if sc.clock {
			ev.on = func(e Event) {
				if e.Kind == KindBoundary {
					clock = clock.Add(time.Hour)
				}
			}
		}
		j := job(2)
		j.Timeout = 3 * time.Second
		var script []attemptFunc
		if sc.script != nil {
			script = sc.script(w)
		}
		if sc.setup != nil {
			sc.setup(t, w, &j)
		}
		rep, _ := New(Config{Sandbox: &fakeSandbox{script: script}, Grants: grants.NewStore(opts...)}).Run(context.Background(), w.caller, j, ev)
		fmt.Fprintf(&out, "# %s\n", sc.name)
		for _, e := range ev.events {
			b, _ := json.Marshal(e)
			out.Write(normalize(b, w))
			out.WriteByte('\n')
		}
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(&out, "# %s report\n%s\n", sc.name, normalize(b, w))
	}
	golden.Check(t, "events.golden", out.Bytes())
}

// normalize replaces a world's temporary directories with fixed names.
func normalize(b []byte, w world) []byte {
	s := string(b)
	s = strings.ReplaceAll(s, filepath.Dir(w.caller.Home), "$ROOT")
	return []byte(s)
}

// The report JSON contract (docs/ARCHITECTURE.md §3.3), every field filled.
func TestReportGolden(t *testing.T) {
	rep := Report{
		ExitCode: 1, Attempts: 2, LandlockABI: 7, NetworkMode: "netns", Isolation: "namespaces",
		Boundaries: []Boundary{
			{Attempt: 1, Surface: boundary.Filesystem, Operation: boundary.OpWriteFile, Path: "/etc/x", Decision: "deny", Source: "policy", Rationale: "a policy deny rule matches",
				Suggestion: &suggest.Suggestion{Rule: "fs write_file /etc/x", TOML: "[boundaries]\nallow = [\"fs write_file /etc/x\"]\n", Why: "why none is offered"}},
			{Attempt: 1, Surface: boundary.Network, Operation: boundary.OpConnect, Destination: "example.org:443", Decision: "allow", Source: "reviewer", Grant: "consumed", Held: true},
			{Attempt: 1, Surface: boundary.Network, Operation: boundary.OpConnect, Destination: "prod-eu.example.org:443", Decision: "deny", Source: "no-reviewer", Production: "prod",
				Rationale: "the name prod in the host prod-eu.example.org matches the production marker prod; a production target is critical: only a person may allow it, with the break-glass phrase, and nobody can be asked (no terminal to ask a person on)"},
		},
		Detection:   &sandbox.Detection{Detector: "audit+seccomp"},
		Degraded:    []string{"no memory cgroup"},
		Containment: "pids cgroup (v1)", TimedOut: true, Signal: 15,
		Persistence: []sandbox.Persisted{{Path: ".envrc", Action: "quarantined", Why: "direnv", Quarantine: "/q"}},
		Transaction: &Transaction{Mode: "layer", LayerSize: 1 << 30, Discarded: 1, Committed: &layer.Outcome{}, Recovered: []layer.Recovered{}},
		Session:     "s1", Workspace: "/home/u/proj", Command: []string{"bash", "-c", "make"}, SetupMS: 4.5, Error: "",
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "report.golden", append(b, '\n'))
}

// A failure's public sentence is in the report; its cause, which names
// sandboxd's state and the syscall's text, is in the log (-v) only.
func TestFailureCauseLogged(t *testing.T) {
	w := newWorld(t)
	cause := fmt.Errorf("sandbox: state directory: %w", &fs.PathError{Op: "mkdir", Path: w.caller.Layout().State, Err: syscall.EACCES})
	public := publicerr.Wrap(cause, "the sandbox could not be set up for the command (run with -v to log why)")
	for _, err := range []error{cause, fmt.Errorf("attempt: %w", public)} {
		var log bytes.Buffer
		sb := &fakeSandbox{script: []attemptFunc{func(context.Context, sandbox.Spec, During) (sandbox.Result, error) { return sandbox.Result{}, err }}}
		r := New(Config{Sandbox: sb, Grants: grants.NewStore(), Log: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		rep, _ := r.Run(context.Background(), w.caller, job(0), &recorder{})
		if strings.Contains(rep.Error, w.caller.Layout().State) || strings.Contains(rep.Error, "permission denied") {
			t.Errorf("the report's error carries the cause: %q", rep.Error)
		}
		if want := "mkdir " + w.caller.Layout().State + ": permission denied"; !strings.Contains(log.String(), want) {
			t.Errorf("the log does not have the cause %q:\n%s", want, log.String())
		}
	}
}
