package review

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sandboxd/sandboxd/evidence"
)

// localView opens views served by the real reader in this process, over
// pipes: the test's own eyes stand in for the command's (the sandbox
// part is tested in the integration suite). opened counts the views.
func localView(t *testing.T, opened *atomic.Int64) func(ctx context.Context) (View, error) {
	t.Helper()
	return func(context.Context) (View, error) {
		if opened != nil {
			opened.Add(1)
		}
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() {
			err := evidence.Serve(inR, outW)
			outW.CloseWithError(io.EOF)
			done <- err
		}()
		return evidence.NewClient(inW, outR, func() error { inW.Close(); outR.Close(); return <-done }), nil
	}
}

// fakeView answers as a command's view does: from files, a map of
// resolved paths to contents; links, a map of paths to where they lead;
// refused, paths the command may not read. It records every path it
// was asked about.
type fakeView struct {
	files   map[string]string
	links   map[string]string
	refused map[string]error
	mu      sync.Mutex
	asked   []string
	closed  bool
}

func (v *fakeView) note(p string) {
	v.mu.Lock()
	v.asked = append(v.asked, p)
	v.mu.Unlock()
}

func (v *fakeView) Resolve(p string) (string, error) {
	v.note("resolve " + p)
	if err, ok := v.refused[p]; ok {
		return "", err
	}
	if to, ok := v.links[p]; ok {
		return to, nil
	}
	if _, ok := v.files[p]; ok {
		return p, nil
	}
	return "", evidence.ErrNotFound
}

func (v *fakeView) Read(p string, limit int) ([]byte, error) {
	v.note("read " + p)
	c, ok := v.files[p]
	if !ok {
		return nil, evidence.ErrNotFound
	}
	if len(c) > limit+1 {
		c = c[:limit+1]
	}
	return []byte(c), nil
}

func (v *fakeView) Close() error { v.closed = true; return nil }

// InspectScripts reads only what the view shows, asks it nothing about
// a denied path, never reads where a link to one leads, and says why
// each file was left out.
func TestInspectThroughTheView(t *testing.T) {
	secret := "/home/u/.ssh"
	denied := func(p string) bool { return p == secret || strings.HasPrefix(p, secret+"/") }
	v := &fakeView{
		files: map[string]string{
			"/ws/build.sh":   "source ./lib.sh\nbash /tmp/host.sh\n. /ws/.env\n",
			"/ws/lib.sh":     "echo lib\n",
			"/ws/.env":       "X=1\n",
			secret + "/x.sh": "SSHCANARY",
		},
		links:   map[string]string{"/ws/key.sh": secret + "/x.sh"},
		refused: map[string]error{"/root/private/x.sh": evidence.ErrDenied, "/ws/odd.sh": evidence.ErrChanged},
	}
	cmd := "bash ./build.sh; sh /root/private/x.sh; bash ./key.sh; bash " + secret + "/x.sh; ./odd.sh; bash /run/user/0/x.sh"
	scripts, skipped := InspectScripts(cmd, "/ws", denied, func() (View, error) { return v, nil })
	var paths []string
	for _, s := range scripts {
		paths = append(paths, s.Path)
		if strings.Contains(s.Content, "SSHCANARY") {
			t.Errorf("read %s: a secret's content", s.Path)
		}
	}
	if want := []string{"/ws/build.sh", "/ws/lib.sh", "/ws/.env"}; !slices.Equal(paths, want) {
		t.Errorf("scripts %v, want %v", paths, want)
	}
	want := map[string]string{
		"/tmp/host.sh":       "not there as the command sees it",
		"/root/private/x.sh": "the command may not read it",
		"/ws/key.sh":         "a link to a protected file, never read",
		secret + "/x.sh":     "a protected file, never read",
		"/ws/odd.sh":         "changed while it was read",
		"/run/user/0/x.sh":   "not there as the command sees it",
	}
	for p, why := range want {
		if !slices.ContainsFunc(skipped, func(s string) bool { return strings.HasPrefix(s, p+": ") && strings.Contains(s, why) }) {
			t.Errorf("skipped %q: no %q for %s", skipped, why, p)
		}
	}
	for _, a := range v.asked {
		if strings.Contains(a, secret) {
			t.Errorf("the view was asked %q", a)
		}
	}
	if !v.closed {
		t.Error("the view was not closed")
	}
}

// Without a view nothing is read, and each script says why; a view
// that cannot be opened reads nothing either; a command that runs no
// script opens none.
func TestInspectNotAtAll(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "build.sh"), []byte("NOVIEWCANARY\n"), 0o644)
	never := func(string) bool { return false }
	for name, open := range map[string]func() (View, error){
		"no view":       nil,
		"view fails":    func() (View, error) { return nil, errors.New("no sandbox") },
		"view is empty": func() (View, error) { return &fakeView{}, nil },
	} {
		scripts, skipped := InspectScripts("bash build.sh", dir, never, open)
		if len(scripts) != 0 || len(skipped) != 1 || !strings.HasPrefix(skipped[0], filepath.Join(dir, "build.sh")+": not") {
			t.Errorf("%s: %v %q", name, scripts, skipped)
		}
	}
	opened := false
	InspectScripts("echo hi > out.txt", dir, never, func() (View, error) { opened = true; return &fakeView{}, nil })
	if opened {
		t.Error("a view was opened for a command that runs no script")
	}
}

// The reviews of one attempt share one inspection and one view; the
// next attempt reads again.
func TestModelInspectsOncePerAttempt(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "build.sh"), []byte("echo building\n"), 0o644)
	var opened atomic.Int64
	c := &slowCompleter{}
	m := &Model{Client: c, Redactor: NewRedactor(nil), OpenView: localView(t, &opened)}
	req := writeReq("/home/u/out.txt")
	req.Cwd, req.Command = dir, "bash build.sh; cp out.txt /home/u/"
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req
			r.Path = filepath.Join("/home/u", string(rune('a'+i)))
			m.Review(context.Background(), r)
		}()
	}
	wg.Wait()
	if n := opened.Load(); n != 1 {
		t.Errorf("%d views for one attempt's reviews", n)
	}
	req.Attempt = 2
	m.Review(context.Background(), req)
	if n := opened.Load(); n != 2 {
		t.Errorf("%d views after a second attempt", n)
	}
}
