package netproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/textproto"
	"sync"
	"time"
)

// hostTap recovers what net/http hides from handlers: the raw Host
// header (the server deletes it and, for absolute-form and CONNECT,
// sets Request.Host from the URI) and whether Content-Length and
// Transfer-Encoding were both sent (it deletes Content-Length). It gets
// a copy of every byte the server reads from the client and parses
// the same stream with net/http's own request reader, so the two agree
// on where each request starts; the raw head bytes of each request are
// then read with textproto. It stops at the first CONNECT or upgrade
// request (what follows is tunnel or websocket data), at a head longer
// than maxHead, or at the first bytes it cannot parse; a handler that
// finds no head for its request refuses it (fail closed). What it holds
// is bounded: tapLimit bytes waiting, one head being read, maxHeads
// heads parsed ahead of the handlers.
type hostTap struct {
	log     *slog.Logger
	maxHead int

	mu      sync.Mutex // guards buf, heads, started, done, closed
	cond    *sync.Cond
	buf     []byte // client bytes the parser has not read yet
	heads   []head // parsed heads not yet taken by a handler
	started bool   // the parser goroutine is running or ran
	done    bool   // the parser stopped: writes are dropped
	closed  bool   // the connection closed
}

// head is what the tap saw of one request's head.
type head struct {
	method, uri string
	hosts       []string // every Host header value, raw
	clte        bool     // both Content-Length and Transfer-Encoding
	bad         bool     // the raw head could not be read again
}

// tapLimit bounds the bytes waiting for the parser; beyond it the
// server's reads wait (the parser only discards, so it keeps up).
const tapLimit = 256 << 10

// maxHeads bounds the heads parsed ahead of the handlers (a client
// pipelining many small requests): beyond it the parser waits.
const maxHeads = 64

// tapWait bounds how long a handler waits for the parser to catch up
// with a head the server has already parsed.
const tapWait = 5 * time.Second

func newHostTap(log *slog.Logger, maxHeaderBytes int) *hostTap {
	// The server refuses a longer head anyway; the slack covers the
	// request line and line ends it counts differently.
	t := &hostTap{log: log, maxHead: maxHeaderBytes + 4096}
	t.cond = sync.NewCond(&t.mu)
	return t
}

// write is called with every byte read from the client, in order.
func (t *hostTap) write(b []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done || t.closed {
		return
	}
	t.buf = append(t.buf, b...)
	if !t.started {
		t.started = true
		go t.run()
	}
	t.cond.Broadcast()
	for len(t.buf) > tapLimit && !t.done && !t.closed {
		t.cond.Wait()
	}
}

func (t *hostTap) close() {
	t.mu.Lock()
	t.closed = true
	t.buf = nil
	t.cond.Broadcast()
	t.mu.Unlock()
}

// next returns the head of the request a handler is serving, the
// oldest one not yet taken.
func (t *hostTap) next(ctx context.Context) (head, bool) {
	ctx, cancel := context.WithTimeout(ctx, tapWait)
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		t.mu.Lock()
		t.cond.Broadcast()
		t.mu.Unlock()
	})
	defer stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.heads) == 0 && !t.done && !t.closed && ctx.Err() == nil {
		t.cond.Wait()
	}
	if len(t.heads) == 0 {
		return head{}, false
	}
	h := t.heads[0]
	t.heads = t.heads[1:]
	return h, true
}

func (t *hostTap) push(h head) {
	t.mu.Lock()
	for len(t.heads) >= maxHeads && !t.closed {
		t.cond.Wait()
	}
	t.heads = append(t.heads, h)
	t.cond.Broadcast()
	t.mu.Unlock()
}

func (t *hostTap) run() {
	defer func() {
		if r := recover(); r != nil {
			t.log.Warn("netproxy: host tap panicked", "panic", r)
		}
		t.mu.Lock()
		t.done = true
		t.buf = nil
		t.cond.Broadcast()
		t.mu.Unlock()
	}()
	r := &tapReader{t: t}
	br := bufio.NewReader(r)
	lastPOST := false
	for {
		if lastPOST {
			// As net/http's server does after a POST (RFC 7230 §3).
			peek, _ := br.Peek(4)
			_, _ = br.Discard(leadingCRLF(peek))
		}
		buffered, _ := br.Peek(br.Buffered())
		r.rec = append(r.rec[:0], buffered...)
		r.recording = true
		req, err := http.ReadRequest(br)
		r.recording = false
		if err != nil {
			return
		}
		h := readHead(r.rec[:len(r.rec)-br.Buffered()])
		h.method, h.uri = req.Method, req.RequestURI
		t.push(h)
		if req.Method == http.MethodConnect || req.Header.Get("Upgrade") != "" {
			// What follows is not HTTP: tunnel bytes, or a websocket once
			// the origin switched protocols (if it did not, the next
			// request finds no head and is refused).
			return
		}
		lastPOST = req.Method == http.MethodPost
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		_ = req.Body.Close()
	}
}

func leadingCRLF(b []byte) int {
	n := 0
	for _, c := range b {
		if c != '\r' && c != '\n' {
			break
		}
		n++
	}
	return n
}

// readHead reads the raw head again for the fields net/http drops.
func readHead(raw []byte) head {
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw)))
	if _, err := tp.ReadLine(); err != nil {
		return head{bad: true}
	}
	hdr, err := tp.ReadMIMEHeader()
	if err != nil {
		return head{bad: true}
	}
	return head{
		hosts: hdr["Host"],
		clte:  len(hdr["Content-Length"]) > 0 && len(hdr["Transfer-Encoding"]) > 0,
	}
}

// tapReader is the parser's view of the tap; it records what it hands
// out while a head is being read. Only the parser goroutine uses rec
// and recording.
type tapReader struct {
	t         *hostTap
	rec       []byte
	recording bool
}

func (r *tapReader) Read(p []byte) (int, error) {
	t := r.t
	t.mu.Lock()
	for len(t.buf) == 0 && !t.closed {
		t.cond.Wait()
	}
	if t.closed {
		t.mu.Unlock()
		return 0, io.EOF
	}
	n := copy(p, t.buf)
	t.buf = t.buf[n:]
	if len(t.buf) == 0 {
		t.buf = nil
	}
	t.cond.Broadcast()
	t.mu.Unlock()
	if r.recording {
		if len(r.rec)+n > t.maxHead {
			return 0, errHeadTooLong
		}
		r.rec = append(r.rec, p[:n]...)
	}
	return n, nil
}

// errHeadTooLong stops the tap at a head the server would refuse: the
// line reader below has no limit of its own.
var errHeadTooLong = errors.New("netproxy: request head too long")
