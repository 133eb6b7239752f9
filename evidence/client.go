package evidence

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
)

// Client speaks to one reader. Its calls block until the reader
// answers or its output ends: the opener bounds the session by ending
// the reader's sandbox (its context, its timeout), which ends that
// output. A Client is safe for concurrent use; calls are served one at
// a time, and Close may be called while one waits.
type Client struct {
	// mu guards w, r and broken: one request and its reply at a time.
	mu     sync.Mutex
	w      io.Writer
	r      *bufio.Reader
	broken error
	// closeOnce runs close; closeErr is its result.
	closeOnce sync.Once
	close     func() error
	closeErr  error
}

// NewClient returns a Client that writes requests to w (the reader's
// stdin) and reads replies from r (its stdout). close, called once by
// Close, ends the session and waits for the reader to be gone; it must
// make a pending read of r return.
func NewClient(w io.Writer, r io.Reader, close func() error) *Client {
	return &Client{w: w, r: bufio.NewReader(r), close: close}
}

// Resolve returns where path leads in the command's view, every link
// resolved: an absolute, clean path.
func (c *Client) Resolve(path string) (string, error) {
	if !validPath(path) {
		return "", ErrInvalid
	}
	kind, payload, err := c.ask(reqResolve, MaxPath, []byte(path))
	if err != nil {
		return "", err
	}
	if kind != repPath || !validPath(string(payload)) {
		return "", c.fail(fmt.Errorf("%w: a reply of kind %q to a resolve", ErrProtocol, kind))
	}
	return string(payload), nil
}

// Read returns at most limit+1 bytes of the regular file at path, a
// path Resolve returned: more than limit means the file is longer. No
// link is followed on the way: one that appeared since is ErrChanged.
func (c *Client) Read(path string, limit int) ([]byte, error) {
	if !validPath(path) {
		return nil, ErrInvalid
	}
	if limit < 0 || limit > MaxRead {
		return nil, fmt.Errorf("evidence: a read of %d bytes (at most %d)", limit, MaxRead)
	}
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(limit))
	kind, payload, err := c.ask(reqRead, limit+1, l[:], []byte(path))
	if err != nil {
		return nil, err
	}
	if kind != repData {
		return nil, c.fail(fmt.Errorf("%w: a reply of kind %q to a read", ErrProtocol, kind))
	}
	return payload, nil
}

// Close ends the session and waits for the reader to be gone. Calls
// after it fail.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		if c.close != nil {
			c.closeErr = c.close()
		}
		c.mu.Lock()
		if c.broken == nil {
			c.broken = errors.New("evidence: the session is closed")
		}
		c.mu.Unlock()
	})
	return c.closeErr
}

// ask sends one request and reads its reply: a frame of the reply kinds
// whose data is at most dataMax bytes. An error reply is returned as
// its error; anything else wrong ends the session.
func (c *Client) ask(kind byte, dataMax int, parts ...[]byte) (byte, []byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return 0, nil, c.broken
	}
	if err := writeFrame(c.w, kind, parts...); err != nil {
		c.broken = fmt.Errorf("evidence: the reader is gone: %w", err)
		return 0, nil, c.broken
	}
	rk, payload, err := readFrame(c.r, func(k byte) int {
		switch k {
		case repErr:
			return 1
		case repPath:
			return MaxPath
		case repData:
			return dataMax
		}
		return -1
	})
	if err != nil {
		c.broken = fmt.Errorf("evidence: no reply: %w", err)
		return 0, nil, c.broken
	}
	if rk == repErr {
		if e, ok := codes()[byteAt(payload)]; ok && len(payload) == 1 {
			return rk, nil, e
		}
		c.broken = fmt.Errorf("%w: an unknown error code", ErrProtocol)
		return 0, nil, c.broken
	}
	return rk, payload, nil
}

// fail ends the session with err.
func (c *Client) fail(err error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken == nil {
		c.broken = err
	}
	return err
}

func byteAt(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// validPath reports whether p is absolute, clean, at most MaxPath bytes
// and free of NUL.
func validPath(p string) bool {
	return len(p) <= MaxPath && filepath.IsAbs(p) && filepath.Clean(p) == p && !bytes.ContainsRune([]byte(p), 0)
}
