package session

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/evidence"
	"github.com/sandboxd/sandboxd/sandbox"
)

// The reader's sandbox keeps everything that makes the command's view
// and drops everything that acts.
func TestReaderSpec(t *testing.T) {
	sigs := make(chan os.Signal)
	run := sandbox.Spec{
		Argv: []string{"bash", "-c", "make"}, Env: []string{"HOME=/h", "PATH=/bin"}, Dir: "/w/sub",
		Workspace: "/w", Writable: []string{"/extra"}, Caches: []string{"/s/cache"},
		CacheLayers: []sandbox.CacheLayer{{Name: "go-build", Dir: "/s/cache/go"}},
		Read:        []string{"/"}, Deny: []string{"/h/.ssh"}, ListCarved: true, Protected: []string{".envrc"},
		Home: "/h", StateDir: "/s", RuntimeDir: "/run/user/1", Isolation: "namespaces", Umask: 0o22,
		HostUID: 100000, HostGID: 100000, Limits: sandbox.Limits{Pids: 64, TmpSize: 1 << 20},
		Copies:     []sandbox.Copy{{Path: "/h/.npmrc", Data: []byte("registry=x\n")}},
		Exceptions: []sandbox.Exception{{Operation: boundary.OpWriteFile, Path: "/etc/x"}},
		Egress:     &sandbox.Egress{Port: 1}, OnWatch: func() {}, Signals: sigs,
		Transaction: true, LayerSize: 1 << 20, Timeout: time.Hour,
		Stdin: os.Stdin, Stdout: io.Discard, Stderr: io.Discard, Pipes: []*os.File{os.Stdout},
	}
	s := readerSpec(run, []string{"/proc/self/exe", evidence.ReaderArg})
	if !slices.Equal(s.Argv, []string{"/proc/self/exe", evidence.ReaderArg}) || s.Env != nil || s.Dir != "/" {
		t.Errorf("argv %q, env %q, dir %q", s.Argv, s.Env, s.Dir)
	}
	// The view: the same.
	if s.Workspace != run.Workspace || !slices.Equal(s.Writable, run.Writable) || !slices.Equal(s.Read, run.Read) ||
		!slices.Equal(s.Deny, run.Deny) || s.ListCarved != run.ListCarved || s.Home != run.Home ||
		s.RuntimeDir != run.RuntimeDir || s.Isolation != run.Isolation || s.HostUID != run.HostUID ||
		s.StateDir != run.StateDir || len(s.Copies) != 1 || s.Limits != run.Limits {
		t.Errorf("the view changed: %+v", s)
	}
	// What acts: gone.
	if !s.ReadOnly || !s.NoDetect || s.Transaction || s.Exceptions != nil || s.Egress != nil || s.OnWatch != nil ||
		s.Signals != nil || s.Caches != nil || s.CacheLayers != nil || s.Stdin != nil || s.Stdout != nil || s.Stderr != nil || s.Pipes != nil {
		t.Errorf("the reader's sandbox acts: %+v", s)
	}
	if s.Timeout != evidenceTimeout {
		t.Errorf("timeout %v", s.Timeout)
	}
}

// readerSandbox serves the reader in this process with the spec's
// streams, as the real sandbox runs it as the command; it records the
// specs it was given.
type readerSandbox struct {
	specs chan sandbox.Spec
	code  int
}

func (f *readerSandbox) Run(ctx context.Context, spec sandbox.Spec, _ During, _ *slog.Logger) (sandbox.Result, error) {
	f.specs <- spec
	if f.code != 0 {
		return sandbox.Result{ExitCode: f.code}, nil
	}
	evidence.Serve(spec.Stdin, spec.Stdout)
	return sandbox.Result{}, nil
}

// The opener starts one reader sandbox per view, the view reads through
// it, and closing the view ends it and everything the opener started; a
// reader that fails makes every read fail, never a read of the host.
func TestViewOpener(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "build.sh")
	os.WriteFile(script, []byte("echo hi\n"), 0o644)
	goroutines := runtime.NumGoroutine()
	fake := &readerSandbox{specs: make(chan sandbox.Spec, 4)}
	r := New(Config{Sandbox: fake, EvidenceReader: []string{"/reader", evidence.ReaderArg}})
	open := r.viewOpener(sandbox.Spec{Workspace: dir, Argv: []string{"make"}})
	v, err := open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	real, err := v.Resolve(script)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := v.Read(real, 100); err != nil || string(b) != "echo hi\n" {
		t.Fatalf("read %q, %v", b, err)
	}
	if err := v.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if s := <-fake.specs; s.Argv[0] != "/reader" || !s.ReadOnly {
		t.Errorf("the reader ran with %+v", s)
	}
	fake.code = 126
	v, _ = open(context.Background())
	if _, err := v.Resolve(script); err == nil {
		t.Error("a reader that never ran answered")
	}
	if err := v.Close(); err == nil {
		t.Error("a reader that exited 126 closed cleanly")
	}
	<-fake.specs
	for range 100 {
		if runtime.NumGoroutine() <= goroutines {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("%d goroutines left (before %d)", n, goroutines)
	}
	if New(Config{}).viewOpener(sandbox.Spec{}) != nil {
		t.Error("a view without a reader")
	}
}
