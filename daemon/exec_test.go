package daemon

import (
	"bufio"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readExecRequest(bufio.NewReaderSize(strings.NewReader(tc.in), MaxRequest))
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("readExecRequest = %v, want %q", err, tc.err)
			}
		})
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
