package evidence

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// serve starts Serve over pipes in this process (no sandbox: the view
// is the test's own) and returns a Client speaking to it.
func serve(t *testing.T) *Client {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Serve(inR, outW)
		outW.CloseWithError(io.EOF)
		done <- err
	}()
	c := NewClient(inW, outR, func() error {
		inW.Close()
		outR.Close()
		return <-done
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestServe(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	script := write("ws/build.sh", "echo build\n")
	big := write("ws/big.sh", strings.Repeat("x", 100))
	os.Symlink("build.sh", filepath.Join(dir, "ws", "link.sh"))
	os.Symlink(filepath.Join(dir, "ws"), filepath.Join(dir, "wslink"))
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644)
	c := serve(t)
	tests := []struct {
		name, path string
		real       string // "": the resolve fails with resolveErr
		resolveErr error
		limit      int
		want       string
		readErr    error
	}{
		{name: "regular file", path: script, real: script, limit: 1024, want: "echo build\n"},
		{name: "file link", path: filepath.Join(dir, "ws", "link.sh"), real: script, limit: 1024, want: "echo build\n"},
		{name: "directory link on the way", path: filepath.Join(dir, "wslink", "build.sh"), real: script, limit: 1024, want: "echo build\n"},
		{name: "cut at limit+1", path: big, real: big, limit: 10, want: strings.Repeat("x", 11)},
		{name: "exactly the limit", path: big, real: big, limit: 100, want: strings.Repeat("x", 100)},
		{name: "missing", path: filepath.Join(dir, "nothing.sh"), resolveErr: ErrNotFound},
		{name: "missing directory", path: filepath.Join(dir, "nowhere", "x.sh"), resolveErr: ErrNotFound},
		{name: "directory", path: filepath.Join(dir, "sub"), real: filepath.Join(dir, "sub"), limit: 10, readErr: ErrNotRegular},
		{name: "fifo", path: filepath.Join(dir, "fifo"), real: filepath.Join(dir, "fifo"), limit: 10, readErr: ErrNotRegular},
		{name: "relative", path: "ws/build.sh", resolveErr: ErrInvalid},
		{name: "unclean", path: dir + "/ws/../ws/build.sh", resolveErr: ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			real, err := c.Resolve(tc.path)
			if tc.real == "" {
				if !errors.Is(err, tc.resolveErr) {
					t.Fatalf("Resolve(%q) = %q, %v; want %v", tc.path, real, err, tc.resolveErr)
				}
				return
			}
			if err != nil || real != tc.real {
				t.Fatalf("Resolve(%q) = %q, %v; want %q", tc.path, real, err, tc.real)
			}
			b, err := c.Read(real, tc.limit)
			if tc.readErr != nil {
				if !errors.Is(err, tc.readErr) {
					t.Fatalf("Read(%q) = %q, %v; want %v", real, b, err, tc.readErr)
				}
				return
			}
			if err != nil || string(b) != tc.want {
				t.Fatalf("Read(%q) = %q, %v; want %q", real, b, err, tc.want)
			}
		})
	}
	// A read follows no link, not even one the path had all along: a
	// link that appears after the resolve is refused.
	for _, p := range []string{filepath.Join(dir, "ws", "link.sh"), filepath.Join(dir, "wslink", "build.sh")} {
		if b, err := c.Read(p, 10); !errors.Is(err, ErrChanged) {
			t.Errorf("Read(%q) through a link = %q, %v; want ErrChanged", p, b, err)
		}
	}
	if os.Geteuid() != 0 {
		private := write("private.sh", "secret\n")
		os.Chmod(private, 0)
		if b, err := c.Read(private, 10); !errors.Is(err, ErrDenied) {
			t.Errorf("Read of a mode-0 file = %q, %v; want ErrDenied", b, err)
		}
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := c.Resolve(script); err == nil {
		t.Error("a closed Client still answers")
	}
}

// fakeReader is a reader that answers every request with reply.
func fakeReader(t *testing.T, reply []byte) *Client {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		// Take one request, answer, then end.
		readFrame(inR, requestMax)
		outW.Write(reply)
		outW.CloseWithError(io.EOF)
		io.Copy(io.Discard, inR)
	}()
	return NewClient(inW, outR, func() error { inW.Close(); outR.Close(); return nil })
}

func frame(kind byte, payload string) []byte {
	var b bytes.Buffer
	writeFrame(&b, kind, []byte(payload))
	return b.Bytes()
}

// A reader that answers what it was not asked, or too much, ends the
// session; nothing it sent is returned as content.
func TestClientRefusesBadReplies(t *testing.T) {
	tests := []struct {
		name  string
		reply []byte
		read  bool
	}{
		{"data to a resolve", frame(repData, "/etc/passwd"), false},
		{"relative path", frame(repPath, "etc/passwd"), false},
		{"unclean path", frame(repPath, "/a/../etc/passwd"), false},
		{"path with NUL", frame(repPath, "/a\x00b"), false},
		{"path to a read", frame(repPath, "/x"), true},
		{"more than limit+1", frame(repData, strings.Repeat("x", 12)), true},
		{"unknown kind", frame('z', ""), true},
		{"unknown error code", frame(repErr, "q"), true},
		{"long error", frame(repErr, "nn"), true},
		{"empty error", frame(repErr, ""), true},
		{"cut short", frame(repData, "abcdef")[:8], true},
		{"oversized header", []byte{repData, 0xff, 0xff, 0xff, 0xff}, true},
		{"nothing", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fakeReader(t, tc.reply)
			defer c.Close()
			var err error
			if tc.read {
				var b []byte
				b, err = c.Read("/x", 10)
				if b != nil {
					t.Errorf("content %q returned", b)
				}
			} else {
				var p string
				p, err = c.Resolve("/x")
				if p != "" {
					t.Errorf("path %q returned", p)
				}
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if _, again := c.Resolve("/x"); again == nil {
				t.Error("the session went on")
			}
		})
	}
}

func TestFrameRoundTrip(t *testing.T) {
	for _, payload := range []string{"", "/", "a\x00b", strings.Repeat("p", MaxPath)} {
		var b bytes.Buffer
		if err := writeFrame(&b, reqResolve, []byte(payload)); err != nil {
			t.Fatal(err)
		}
		k, got, err := readFrame(&b, requestMax)
		if err != nil || k != reqResolve || string(got) != payload {
			t.Errorf("round trip of %d bytes: %q %d bytes %v", len(payload), k, len(got), err)
		}
	}
	var b bytes.Buffer
	writeFrame(&b, reqResolve, []byte(strings.Repeat("p", MaxPath+1)))
	if _, _, err := readFrame(&b, requestMax); !errors.Is(err, ErrProtocol) {
		t.Errorf("an oversized frame: %v", err)
	}
}

// FuzzReadFrame: whatever bytes arrive, a frame is either refused or
// within its kind's bound, and reads exactly its header and payload.
func FuzzReadFrame(f *testing.F) {
	f.Add(frame(repPath, "/home/u/ws/build.sh"))
	f.Add(frame(repData, "echo hi\n"))
	f.Add(frame(repErr, "n"))
	f.Add([]byte{repData, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{repData, 0, 0})
	f.Add(append(frame(repPath, "/a"), frame(repData, "b")...))
	max := func(k byte) int {
		switch k {
		case repPath:
			return MaxPath
		case repData:
			return 64
		case repErr:
			return 1
		}
		return -1
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			before := r.Len()
			k, p, err := readFrame(r, max)
			if err != nil {
				if p != nil {
					t.Fatalf("an error %v came with a payload", err)
				}
				return
			}
			if max(k) < 0 || len(p) > max(k) {
				t.Fatalf("accepted a frame of kind %q with %d bytes", k, len(p))
			}
			if before-r.Len() != headerLen+len(p) {
				t.Fatalf("read %d bytes for a frame of %d", before-r.Len(), headerLen+len(p))
			}
		}
	})
}

// FuzzClient: whatever a reader answers, the Client returns only a
// valid path to a resolve and at most limit+1 bytes to a read, or an
// error.
func FuzzClient(f *testing.F) {
	f.Add(frame(repPath, "/home/u/ws/build.sh"), false)
	f.Add(frame(repData, "echo hi\n"), true)
	f.Add(frame(repErr, "a"), true)
	f.Add(frame(repData, strings.Repeat("x", 17)), true)
	f.Add([]byte{repPath, 0, 0, 0, 1, '/'}, false)
	f.Fuzz(func(t *testing.T, reply []byte, read bool) {
		c := fakeReader(t, reply)
		defer c.Close()
		if read {
			b, err := c.Read("/x", 16)
			if err == nil && len(b) > 17 {
				t.Fatalf("%d bytes for a read of 16", len(b))
			}
			if err != nil && b != nil {
				t.Fatalf("content with error %v", err)
			}
			return
		}
		p, err := c.Resolve("/x")
		if err == nil && !validPath(p) {
			t.Fatalf("resolved to %q", p)
		}
	})
}
