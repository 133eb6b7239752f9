package daemon

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestReadExecRequest(t *testing.T) {
	for _, tc := range []struct {
		name, in, err string
	}{
		{"minimal", `{"argv":["true"],"env":[],"cwd":"/w","umask":18,"retries":2}` + "\n", ""},
		{"stdin follows", `{"argv":["cat"],"env":[],"cwd":"/w","umask":18,"retries":0,"stdin":true}` + "\nhello", ""},
		{"no newline", `{"argv":["true"],"env":[],"cwd":"/w","umask":18,"retries":0}`, ""},
		{"unknown field", `{"argv":["true"],"cwd":"/w","sudo":true}` + "\n", "not a JSON object"},
		{"no argv", `{"argv":[],"cwd":"/w"}` + "\n", "argv must name"},
		{"empty command", `{"argv":[""],"cwd":"/w"}` + "\n", "argv must name"},
		{"relative cwd", `{"argv":["true"],"cwd":"w"}` + "\n", "cwd must be an absolute"},
		{"umask", `{"argv":["true"],"cwd":"/w","umask":4096}` + "\n", "umask"},
		{"negative timeout", `{"argv":["true"],"cwd":"/w","timeout_ms":-1}` + "\n", "timeout_ms"},
		{"too many retries", `{"argv":["true"],"cwd":"/w","retries":99}` + "\n", "retries"},
		{"two values", `{"argv":["true"],"cwd":"/w"}{"argv":["x"]}` + "\n", "more than one"},
		{"empty", "", "missing"},
		{"long string", `{"argv":["` + strings.Repeat("a", maxString+1) + `"],"cwd":"/w"}` + "\n", "over 128 KiB"},
		{"a line of several buffers", `{"argv":["true"],"env":[` + strings.Repeat(`"A=`+strings.Repeat("b", 1000)+`",`, 100) + `"C=d"],"cwd":"/w"}` + "\n", ""},
		{"line at the bound", requestLine(MaxRequest) + "stdin", ""},
		{"line over the bound", requestLine(MaxRequest + 1), "over 1024 KiB"},
		{"no newline, over the bound", strings.TrimSuffix(requestLine(MaxRequest+2), "\n"), "over 1024 KiB"},
		{"a line over the bound", `{"argv":["true"],"env":[` + strings.Repeat(`"A=`+strings.Repeat("b", 100000)+`",`, 11) + `"C=d"],"cwd":"/w"}` + "\n", "over 1024 KiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readExecRequest(newBodyReader(strings.NewReader(tc.in)))
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("readExecRequest = %v, want %q", err, tc.err)
			}
		})
	}
}

// requestLine is a request's first line of n bytes, its newline
// included: variables of at most 64 KiB each fill it.
func requestLine(n int) string {
	head, tail := `{"argv":["true"],"cwd":"/w","env":[`, `]}`+"\n"
	var env []string
	for left := n - len(head) - len(tail); left > 0; {
		v := min(left, 64<<10)
		if left-v > 0 && left-v < 4 {
			v -= 4 // leaves room for the next one's `,"x"`
		}
		if len(env) > 0 {
			v-- // its comma
		}
		env = append(env, `"`+strings.Repeat("x", v-2)+`"`)
		left -= len(env[len(env)-1])
		if len(env) > 1 {
			left--
		}
	}
	line := head + strings.Join(env, ",") + tail
	if len(line) != n {
		panic(fmt.Sprintf("requestLine: %d bytes, want %d", len(line), n))
	}
	return line
}

// TestReadLine: the first line comes whole whatever its length up to
// MaxRequest, and what follows it stays in the reader; a longer one is
// cut at MaxRequest with bufio.ErrBufferFull.
func TestReadLine(t *testing.T) {
	for _, tc := range []struct {
		name       string
		line, rest string
		err        error
	}{
		{"short", "{}\n", "stdin", nil},
		{"no newline", "{}", "", io.EOF},
		{"empty", "", "", io.EOF},
		{"one buffer exactly", strings.Repeat("a", 16<<10-1) + "\n", "x", nil},
		{"several buffers", strings.Repeat("a", 300<<10) + "\n", "x", nil},
		{"the bound exactly", strings.Repeat("a", MaxRequest-1) + "\n", "x", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := newBodyReader(strings.NewReader(tc.line + tc.rest))
			line, err := readLine(br)
			rest, _ := io.ReadAll(br)
			if string(line) != tc.line || err != tc.err || string(rest) != tc.rest {
				t.Errorf("line of %d bytes, err %v, rest %q; want %d bytes, %v, %q", len(line), err, rest, len(tc.line), tc.err, tc.rest)
			}
		})
	}
	line, err := readLine(newBodyReader(strings.NewReader(strings.Repeat("a", MaxRequest+10) + "\n")))
	if len(line) != MaxRequest || err != bufio.ErrBufferFull {
		t.Errorf("an over-long line: %d bytes, err %v; want %d bytes and bufio.ErrBufferFull", len(line), err, MaxRequest)
	}
}

// Whatever a client sends, a request that is taken is within bounds, and
// the reader never takes more than the first line.
func FuzzReadExecRequest(f *testing.F) {
	f.Add([]byte(`{"argv":["true"],"env":["A=b"],"cwd":"/w","umask":18,"retries":2}` + "\nrest"))
	f.Add([]byte(`{"argv":["true"],"cwd":"/w","timeout_ms":1e30}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		br := bufio.NewReaderSize(strings.NewReader(string(in)), 4096)
		req, err := readExecRequest(br)
		if err != nil {
			return
		}
		if len(req.Argv) == 0 || req.Argv[0] == "" || !strings.HasPrefix(req.Cwd, "/") || req.Umask > 0o777 || req.TimeoutMS < 0 || req.Retries < 0 || req.Retries > 16 {
			t.Fatalf("out of bounds: %+v", req)
		}
	})
}
