package client

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

// Answers as the daemon's server frames them, and ones it never sends:
// each is read as HTTP/1.1 reads it, or refused.
func TestReadResponse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		status   int
		body     string
		err      bool
	}{
		{"sized", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\nhello", 200, "hello", false},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: x\r\n\r\n", 200, "abcde", false},
		{"to the end", "HTTP/1.1 403 Forbidden\r\nConnection: close\r\n\r\n{\"x\":1}", 403, `{"x":1}`, false},
		{"bare LF", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", 200, "ok", false},
		{"sized, cut short", "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhello", 200, "hello", true},
		{"chunk cut short", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nabc", 200, "abc", true},
		{"no last chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", 200, "abc", true},
		{"chunk longer than its size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", 200, "ab", true},
		{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 200, "", true},
		{"negative chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", 200, "", true},
		{"both framings", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 0, "", true},
		{"other encoding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 0, "", true},
		{"bad length", "HTTP/1.1 200 OK\r\nContent-Length: +3\r\n\r\nabc", 0, "", true},
		{"not HTTP", "SSH-2.0-x\r\n\r\n", 0, "", true},
		{"1xx", "HTTP/1.1 100 Continue\r\n\r\n", 0, "", true},
		{"header without colon", "HTTP/1.1 200 OK\r\nbogus\r\n\r\n", 0, "", true},
		{"space in a name", "HTTP/1.1 200 OK\r\nContent Length: 1\r\n\r\n", 0, "", true},
		{"head cut short", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n", 0, "", true},
		{"line too long", "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", maxLine) + "\r\n\r\n", 0, "", true},
		{"too many headers", "HTTP/1.1 200 OK\r\n" + strings.Repeat("X: y\r\n", maxHeaders+1) + "\r\n", 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := readResponse(bufio.NewReaderSize(strings.NewReader(tc.in), 64<<10))
			var body []byte
			if err == nil {
				body, err = io.ReadAll(r.body)
				if r.status != tc.status {
					t.Errorf("status %d, want %d", r.status, tc.status)
				}
			}
			if (err != nil) != tc.err || string(body) != tc.body {
				t.Errorf("body %q, err %v; want %q, error %v", body, err, tc.body, tc.err)
			}
		})
	}
}

// What the chunked writer writes, the reader reads back.
func TestChunkedRoundTrip(t *testing.T) {
	var b strings.Builder
	w := chunkedWriter{w: &b}
	for _, p := range []string{"a", "", "hello world", strings.Repeat("x", 70000)} {
		w.Write([]byte(p))
	}
	w.Close()
	got, err := io.ReadAll(&chunkedReader{br: bufio.NewReader(strings.NewReader(b.String()))})
	if err != nil || string(got) != "ahello world"+strings.Repeat("x", 70000) {
		t.Fatalf("read back %d bytes, err %v", len(got), err)
	}
}

// An answer comes from another process: whatever it holds, reading it
// ends, with a body or an error, and never panics.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		"HTTP/1.1 500 x\r\n\r\nbody",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := readResponse(bufio.NewReaderSize(strings.NewReader(string(in)), 64<<10))
		if err != nil {
			if r != nil {
				t.Fatal("an error with a response")
			}
			return
		}
		n, err := io.Copy(io.Discard, r.body)
		if n > int64(len(in)) {
			t.Fatalf("read %d body bytes from %d bytes", n, len(in))
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errMalformed) {
			t.Fatalf("unexpected error %v", err)
		}
	})
}

// An answer framed twice (two Content-Length or Transfer-Encoding
// headers) is refused, not read by the last one (RFC 9112 §6.3).
func TestResponseFramedTwice(t *testing.T) {
	for _, head := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
	} {
		if _, err := readResponse(bufio.NewReaderSize(strings.NewReader(head), maxLine)); !errors.Is(err, errMalformed) {
			t.Errorf("%q: err %v, want malformed", head, err)
		}
	}
}
