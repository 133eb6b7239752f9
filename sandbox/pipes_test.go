package sandbox_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/sandbox"
)

// TestPipes: a pipe in Spec.Pipes reaches the command as descriptor 3
// (in both the transactional and the direct run), and nothing else does; any descriptor but
// a pipe's write end is refused before anything runs.
func TestPipes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (make test runs as root)")
	}
	e := newLeakEnv(t)
	log := slog.New(slog.DiscardHandler)
	for _, txn := range []bool{true, false} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 1)
		go func() { b, _ := io.ReadAll(r); got <- string(b) }()
		spec := e.spec("sh", "-c", `pwd -P >&3; ls /proc/self/fd | sort -n | tr '\n' ' ' >&3`)
		spec.Transaction, spec.Pipes = txn, []*os.File{w}
		spec.Stdout, spec.Stderr = io.Discard, io.Discard
		res, err := sandbox.Run(context.Background(), spec, log)
		w.Close()
		if err != nil {
			t.Fatalf("transaction %v: %v", txn, err)
		}
		if res.Layer != nil {
			res.Layer.Close()
		}
		out := <-got
		r.Close()
		// ls's own descriptor for /proc/self/fd is 3 or 4; 0-3 and that one
		// are all there is.
		if want := e.ws + "\n0 1 2 3 "; !strings.HasPrefix(out, want) || len(strings.Fields(strings.TrimPrefix(out, e.ws+"\n"))) > 5 {
			t.Errorf("transaction %v: the pipe read %q, want %q and ls's own", txn, out, want)
		}
	}
	f, err := os.Create(filepath.Join(e.base, "file"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, _ := os.Pipe()
	defer w.Close()
	defer r.Close()
	for name, p := range map[string]*os.File{"file": f, "read end": r, "nil": nil} {
		marker := filepath.Join(e.ws, "ran")
		spec := e.spec("sh", "-c", "touch "+marker)
		spec.Pipes = []*os.File{p}
		if _, err := sandbox.Run(context.Background(), spec, log); err == nil {
			t.Errorf("%s: Run took it", name)
		}
		if _, err := os.Lstat(marker); err == nil {
			t.Errorf("%s: the command ran", name)
		}
	}
}
