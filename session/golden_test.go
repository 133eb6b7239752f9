package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/internal/golden"
	"github.com/sandboxd/sandboxd/layer"
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
	}{
		{"retry", func(w world) []attemptFunc {
			return []attemptFunc{denies(1, fsDenial("make_reg", w.allowed)), denies(0)}
		}, false},
		{"denied", func(w world) []attemptFunc {
			return []attemptFunc{denies(1, fsDenial("read_file", filepath.Join(w.caller.Home, ".ssh", "id_rsa")), fsDenial("write_file", w.denied))}
		}, false},
		{"stale", func(w world) []attemptFunc {
			return []attemptFunc{denies(1, fsDenial("make_reg", w.allowed)), func(context.Context, sandbox.Spec, During) (sandbox.Result, error) {
				return sandbox.Result{}, fmt.Errorf("x: %w", sandbox.ErrGrantStale)
			}}
		}, false},
		{"expired", func(w world) []attemptFunc {
			return []attemptFunc{denies(1, fsDenial("make_reg", w.allowed))}
		}, true},
		{"quiet", func(w world) []attemptFunc {
			tele := filepath.Join(w.caller.Home, ".config", "go", "telemetry", "local")
			return []attemptFunc{denies(0, fsDenial("make_reg", filepath.Join(tele, "go@a.count")),
				fsDenial("write_file", filepath.Join(tele, "go@b.count")), fsDenial("make_dir", filepath.Join(w.caller.Home, ".config", "procps")))}
		}, false},
		{"warnings", func(w world) []attemptFunc {
			return []attemptFunc{func(context.Context, sandbox.Spec, During) (sandbox.Result, error) {
				return sandbox.Result{ExitCode: 124, TimedOut: true, Isolation: sandbox.LandlockOnly, Degraded: []string{"no namespaces"},
					Detection:   sandbox.Detection{Detector: "audit", Lost: 2, Why: "the kernel dropped records"},
					Persistence: []sandbox.Persisted{{Path: ".envrc", Action: "quarantined", Why: "direnv runs it", Quarantine: "/q/.envrc"}}}, nil
			}}
		}, false},
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
		rep, _ := New(Config{Sandbox: &fakeSandbox{script: sc.script(w)}, Grants: grants.NewStore(opts...)}).Run(context.Background(), w.caller, j, ev)
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

// The report JSON contract (DESIGN.md §3.1), every field filled.
func TestReportGolden(t *testing.T) {
	rep := Report{
		ExitCode: 1, Attempts: 2, LandlockABI: 7, NetworkMode: "netns", Isolation: "namespaces",
		Boundaries: []Boundary{
			{Attempt: 1, Surface: grants.Filesystem, Operation: grants.OpWriteFile, Path: "/etc/x", Decision: "deny", Source: "policy", Rationale: "a policy deny rule matches",
				Suggestion: &suggest.Suggestion{Rule: "fs write_file /etc/x", TOML: "[boundaries]\nallow = [\"fs write_file /etc/x\"]\n", Why: "why none is offered"}},
			{Attempt: 1, Surface: grants.Network, Operation: grants.OpConnect, Destination: "example.org:443", Decision: "allow", Source: "reviewer", Grant: "consumed", Held: true},
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
