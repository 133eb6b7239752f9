package session

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/sandbox"
)

// fakeCommits records what a Runner tells its Commits.
type fakeCommits struct {
	fail  error
	begun []InFlight
	ended int
}

func (f *fakeCommits) Begin(c InFlight) (func(), error) {
	if f.fail != nil {
		return nil, f.fail
	}
	f.begun = append(f.begun, c)
	return func() { f.ended++ }, nil
}

// layerAttempt is an attempt whose layer holds one new file.
func layerAttempt(t *testing.T) attemptFunc {
	t.Helper()
	layerDir := t.TempDir()
	os.MkdirAll(filepath.Join(layerDir, "upper"), 0o755)
	os.WriteFile(filepath.Join(layerDir, "upper", "result.txt"), []byte("built\n"), 0o644)
	root, err := os.Open(layerDir)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-time.Second)
	uid, gid := os.Getuid(), os.Getgid()
	return func(context.Context, sandbox.Spec, During) (sandbox.Result, error) {
		return sandbox.Result{Isolation: sandbox.Namespaces, Transaction: sandbox.Transaction{Mode: "layer"},
			Layer: &sandbox.Layer{Root: root, Started: started, HostUID: uid, HostGID: gid, UID: uid, GID: gid}}, nil
	}
}

// A commit is recorded in flight, with what a recovery needs (the
// caller's identity and state directory), before it starts, and the
// record ends with it; a commit that cannot be recorded does not start.
func TestCommitsRecordsInFlight(t *testing.T) {
	w := newWorld(t)
	commits := &fakeCommits{}
	fake := &fakeSandbox{script: []attemptFunc{layerAttempt(t)}}
	if _, err := New(Config{Sandbox: fake, Commits: commits}).Run(context.Background(), w.caller, job(0), nil); err != nil {
		t.Fatal(err)
	}
	if len(commits.begun) != 1 || commits.ended != 1 {
		t.Fatalf("begun %d, ended %d", len(commits.begun), commits.ended)
	}
	c := commits.begun[0]
	if c.UID != w.caller.UID || c.GID != w.caller.GID || !slices.Equal(c.Groups, w.caller.Groups) || c.Umask != w.caller.Umask ||
		c.StateDir != w.caller.Layout().State || c.Workspace != w.ws || c.RunID == "" {
		t.Fatalf("recorded %+v for caller %+v", c, w.caller.ID())
	}
	if b, err := os.ReadFile(filepath.Join(w.ws, "result.txt")); err != nil || string(b) != "built\n" {
		t.Fatalf("not committed: %q %v", b, err)
	}

	w = newWorld(t)
	commits = &fakeCommits{fail: errors.New("disk full")}
	fake = &fakeSandbox{script: []attemptFunc{layerAttempt(t)}}
	rep, err := New(Config{Sandbox: fake, Commits: commits}).Run(context.Background(), w.caller, job(0), nil)
	if err == nil || rep.ExitCode != ExitSandboxd {
		t.Fatalf("an unrecorded commit went ahead: %v %+v", err, rep)
	}
	if _, err := os.Lstat(filepath.Join(w.ws, "result.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the workspace changed: %v", err)
	}
}

// Recover refuses a record that names no caller's state directory.
func TestRecoverRefusesBadRecord(t *testing.T) {
	for _, c := range []InFlight{{StateDir: "relative"}, {StateDir: "/x", UID: -1}, {StateDir: "/x", GID: -1}} {
		if _, err := Recover(c, nil); err == nil {
			t.Errorf("Recover(%+v) went ahead", c)
		}
	}
}
