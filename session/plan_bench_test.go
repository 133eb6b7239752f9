package session

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxd/sandboxd/policy"
)

// benchUserPolicy is a user policy of the README's kinds of keys.
const benchUserPolicy = `profile = "default"
[filesystem]
secrets = ["~/.config/mytool/token", "~/work/*.pem"]
allow_secrets = ["~/.npmrc"]
[env]
deny = ["MY_*_TOKEN"]
[boundaries]
allow = [
  "net connect registry.npmjs.org:443",
  "net connect pypi.org:443", "net connect files.pythonhosted.org:443",
  "net connect github.com:443", "net connect *.githubusercontent.com:443",
  "net connect proxy.golang.org:443", "net connect sum.golang.org:443",
]
ask = ["net connect *:443"]
deny = ["net connect *.internal.example.com:*"]
[network]
grant_scope = "run"
hold_timeout = "300s"
[transaction]
no_transaction = ["npm run dev*", "npx vite*", "* --watch*"]
[quiet]
deny = ["~/.cache/thing/**"]
`

// benchWorkspacePolicy is a workspace policy that tightens.
const benchWorkspacePolicy = `[limits]
pids = 2048
[boundaries]
deny = ["net connect *:25"]
[filesystem]
protected = ["scripts/hooks"]
`

// BenchmarkPlan plans `true` for the process's own user, as the
// daemon's exec does (newPlan: as the caller, the policy, the
// credential scan, the spec and the broker), with one Runner kept
// across the plans as the daemon keeps its own: without policy files
// (the defaults, as bench/launch runs) and with a user policy and a
// workspace policy.
func BenchmarkPlan(b *testing.B) {
	wd, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	ws := b.TempDir()
	pol := filepath.Join(b.TempDir(), "policy.toml")
	if err := os.WriteFile(pol, []byte(benchUserPolicy), 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, workspaceFile), []byte(benchWorkspacePolicy), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		cwd  string
		job  Job
	}{
		{"defaults", wd, Job{Argv: []string{"true"}}},
		{"files", ws, Job{Argv: []string{"true"}, Workspace: ws, Policy: pol}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := NewCaller(os.Getuid(), os.Getgid(), os.Environ(), bc.cwd, 0o022)
			if err != nil {
				b.Fatal(err)
			}
			r := New(Config{Sandbox: &fakeSandbox{}})
			b.ReportAllocs()
			for b.Loop() {
				if _, err := r.newPlan(context.Background(), c, bc.job); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFoundStores is the plan's credential scan alone, for the
// process's own user with its own home and the default policy, as the
// daemon's plan runs it (one Runner, so one index cache, kept across
// the scans).
func BenchmarkFoundStores(b *testing.B) {
	wd, err := os.Getwd()
	if err != nil {
		b.Fatal(err)
	}
	c, err := NewCaller(os.Getuid(), os.Getgid(), os.Environ(), wd, 0o022)
	if err != nil {
		b.Fatal(err)
	}
	r := New(Config{Sandbox: &fakeSandbox{}})
	pol, err := r.policies.Load(c.UID, r.machine, c.Layout().Policy(), false)
	if err != nil {
		b.Fatal(err)
	}
	res, err := r.policies.Resolve(pol, policy.Dirs{Home: c.Home, ConfigDir: c.ConfigHome, StateDir: c.StateHome, Root: c.UID == 0, Getenv: c.Getenv})
	if err != nil {
		b.Fatal(err)
	}
	p := &plan{ws: wd, cwd: wd, policy: res}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := r.foundStores(context.Background(), c, p); err != nil {
			b.Fatal(err)
		}
	}
}
