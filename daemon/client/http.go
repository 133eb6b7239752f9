package client

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// The little of HTTP/1.1 a client of the daemon needs (RFC 9112): one
// request per connection (Connection: close), its body sized or
// chunked; the answer's status line, headers, and a body that is sized,
// chunked or runs to the connection's end. The answer comes from
// another process: every line is bounded, and anything else is an
// error, never a guess.

// Bounds on an answer's head.
const (
	maxLine    = 4 << 10
	maxHeaders = 64
)

// response is an answer's head and its body.
type response struct {
	status int
	// statusText is the status line after the version ("200 OK").
	statusText string
	// header holds each header's last value, by its lowercase name.
	header map[string]string
	body   io.Reader
}

// errMalformed is every answer that is not HTTP/1.1 as the daemon
// speaks it.
var errMalformed = errors.New("client: malformed HTTP answer")

// readLine is one CRLF-ended line without its CRLF (a bare LF is taken
// too, as net/http takes it).
func readLine(br *bufio.Reader) (string, error) {
	b, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) || len(b) > maxLine {
		return "", fmt.Errorf("%w: a line is over %d bytes", errMalformed, maxLine)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	b = b[:len(b)-1]
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return string(b), nil
}

// readResponse reads an answer's head from br (whose buffer is at least
// maxLine) and sets up its body.
func readResponse(br *bufio.Reader) (*response, error) {
	line, err := readLine(br)
	if err != nil {
		return nil, err
	}
	proto, rest, _ := strings.Cut(line, " ")
	code, _, _ := strings.Cut(rest, " ")
	status, err := strconv.Atoi(code)
	if (proto != "HTTP/1.1" && proto != "HTTP/1.0") || len(code) != 3 || err != nil || status < 200 {
		return nil, fmt.Errorf("%w: status line %q", errMalformed, line)
	}
	r := &response{status: status, statusText: rest, header: map[string]string{}}
	for n := 0; ; n++ {
		line, err := readLine(br)
		if err != nil {
			return nil, err
		}
		if line == "" {
			break
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok || n == maxHeaders || name == "" || strings.ContainsAny(name, " \t") {
			return nil, fmt.Errorf("%w: header line %q", errMalformed, line)
		}
		key := strings.ToLower(name)
		if _, twice := r.header[key]; twice && (key == "content-length" || key == "transfer-encoding") {
			// Two framings of one body (RFC 9112 §6.3): refused.
			return nil, fmt.Errorf("%w: %s given twice", errMalformed, key)
		}
		r.header[key] = strings.TrimSpace(value)
	}
	if err := r.setBody(br); err != nil {
		return nil, err
	}
	return r, nil
}

// setBody is the body as the head frames it.
func (r *response) setBody(br *bufio.Reader) error {
	te, chunked := r.header["transfer-encoding"]
	cl, sized := r.header["content-length"]
	switch {
	case chunked && sized:
		return fmt.Errorf("%w: both sized and chunked", errMalformed)
	case chunked && strings.EqualFold(te, "chunked"):
		r.body = &chunkedReader{br: br}
	case chunked:
		return fmt.Errorf("%w: transfer encoding %q", errMalformed, te)
	case sized:
		n, err := strconv.ParseInt(cl, 10, 64)
		if err != nil || n < 0 || cl[0] == '+' {
			return fmt.Errorf("%w: content length %q", errMalformed, cl)
		}
		r.body = &sizedReader{r: br, left: n}
	default:
		r.body = br // to the connection's end (Connection: close)
	}
	return nil
}

// sizedReader reads exactly left bytes: fewer is an error, not an end.
type sizedReader struct {
	r    io.Reader
	left int64
}

func (s *sizedReader) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, err := s.r.Read(p)
	s.left -= int64(n)
	if errors.Is(err, io.EOF) {
		if s.left > 0 {
			return n, io.ErrUnexpectedEOF
		}
		err = nil
	}
	return n, err
}

// chunkedReader decodes a chunked body (RFC 9112 §7.1): size lines in
// hex (an extension after ";" is ignored), each chunk's data then CRLF,
// a zero size, trailers (ignored) and an empty line.
type chunkedReader struct {
	br   *bufio.Reader
	left int64 // of the current chunk
	done bool
	err  error
}

// maxChunk bounds a chunk's size as its line states it (the reader
// never holds a chunk whole; the bound keeps the arithmetic sane).
const maxChunk = 1 << 40

func (c *chunkedReader) Read(p []byte) (int, error) {
	for c.err == nil && c.left == 0 && !c.done {
		c.err = c.next()
	}
	if c.err != nil {
		return 0, c.err
	}
	if c.done {
		return 0, io.EOF
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= int64(n)
	if c.left == 0 && err == nil {
		err = c.crlf()
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		c.err = err
	}
	return n, err
}

// next reads a chunk's size line (and, after the last, the trailers).
func (c *chunkedReader) next() error {
	line, err := readLine(c.br)
	if err != nil {
		return err
	}
	size, _, _ := strings.Cut(line, ";")
	size = strings.TrimRight(size, " \t")
	n, err := strconv.ParseInt(size, 16, 64)
	if err != nil || n < 0 || n > maxChunk || size == "" || size[0] == '+' || size[0] == '-' {
		return fmt.Errorf("%w: chunk size %q", errMalformed, line)
	}
	if n > 0 {
		c.left = n
		return nil
	}
	for i := 0; ; i++ {
		line, err := readLine(c.br)
		if err != nil {
			return err
		}
		if line == "" {
			c.done = true
			return nil
		}
		if i == maxHeaders {
			return fmt.Errorf("%w: too many trailers", errMalformed)
		}
	}
}

// crlf reads the CRLF that ends a chunk's data.
func (c *chunkedReader) crlf() error {
	line, err := readLine(c.br)
	if err != nil {
		return err
	}
	if line != "" {
		return fmt.Errorf("%w: chunk data longer than its size", errMalformed)
	}
	return nil
}

// chunkedWriter writes a chunked body, each chunk in one write; Close
// writes its last chunk.
type chunkedWriter struct{ w io.Writer }

func (c chunkedWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil // a zero-size chunk would end the body
	}
	if _, err := c.w.Write(appendChunk(nil, p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c chunkedWriter) Close() error {
	_, err := io.WriteString(c.w, lastChunk)
	return err
}

// lastChunk ends a chunked body (no trailers).
const lastChunk = "0\r\n\r\n"

// appendChunk appends p (not empty) to b as one chunk.
func appendChunk(b, p []byte) []byte {
	b = strconv.AppendInt(b, int64(len(p)), 16)
	b = append(b, "\r\n"...)
	b = append(b, p...)
	return append(b, "\r\n"...)
}

// requestHead is a request's line and headers; the body follows, of
// length bytes, or chunked when length is negative.
func requestHead(method, path, token, contentType string, length int) []byte {
	var b strings.Builder
	b.WriteString(method + " " + path + " HTTP/1.1\r\nHost: sandboxd\r\nConnection: close\r\n")
	if token != "" {
		b.WriteString("Authorization: Bearer " + token + "\r\n")
	}
	if contentType != "" {
		b.WriteString("Content-Type: " + contentType + "\r\n")
	}
	if length < 0 {
		b.WriteString("Transfer-Encoding: chunked\r\n")
	} else {
		b.WriteString("Content-Length: " + strconv.Itoa(length) + "\r\n")
	}
	b.WriteString("\r\n")
	return []byte(b.String())
}
