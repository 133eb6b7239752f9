package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/publicerr"
	"golang.org/x/sys/unix"
)

// Client talks to the daemon as the user running it, one connection per
// request.
type Client struct {
	socket string
	token  string
	// tty is the terminal Exec passes to the daemon (nil: none).
	tty *os.File
}

// Connect checks socket (TrustedSocket), has the daemon write this
// user's token file and reads it: the client then sends both factors.
// uid is the user this process runs as.
func Connect(ctx context.Context, socket string, uid int) (*Client, error) {
	if err := TrustedSocket(socket); err != nil {
		return nil, err
	}
	// The path checked is the clean one: dial it, not socket as given,
	// where a ".." after a symlink of another user's leads elsewhere.
	c := &Client{socket: filepath.Clean(socket)}
	var tok struct {
		Path string `json:"path"`
	}
	if err := c.Do(ctx, "POST", "/v1/token", nil, &tok); err != nil {
		return nil, err
	}
	b, err := readToken(tok.Path, uid)
	if err != nil {
		return nil, err
	}
	c.token = b
	return c, nil
}

// Socket is the socket the client connects to, as checked.
func (c *Client) Socket() string { return c.socket }

// Token is the user's token, which every request but the first carries.
func (c *Client) Token() string { return c.token }

// PassTerminal has Exec pass tty, this process's controlling terminal,
// over the socket with its request: the daemon asks the person on it
// (it checks that it is this process's controlling terminal first).
func (c *Client) PassTerminal(tty *os.File) { c.tty = tty }

// readToken reads a token file that must be uid's own, a regular file
// no one else may read.
func readToken(path string, uid int) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", publicerr.Wrap(err, "your daemon token file cannot be read")
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || owner(st) != uid || st.Mode().Perm()&0o077 != 0 {
		return "", publicerr.New("your daemon token file is not a private file of yours")
	}
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return "", publicerr.Wrap(err, "your daemon token file cannot be read")
	}
	tok := strings.TrimSpace(string(b))
	if strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		// It goes into a header line.
		return "", publicerr.New("your daemon token file does not hold a token")
	}
	return tok, nil
}

// exchange is one request on a connection of its own: head, then body
// (nil: none) written as it comes, chunked when head says so. The
// connection closes when ctx ends or the answer is done with (close).
func (c *Client) exchange(ctx context.Context, head []byte, body io.Reader, tty *os.File) (r *response, close func(), err error) {
	conn, err := dial(ctx, c.socket)
	if err != nil {
		return nil, nil, unreachable(c.socket, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	close = func() { stop(); conn.Close() }
	var w io.Writer = conn
	if tty != nil {
		w = NewPassingConn(conn, tty)
	}
	if _, err := w.Write(head); err != nil {
		close()
		return nil, nil, unreachable(c.socket, err)
	}
	if body != nil {
		// Written beside the answer's reading: the daemon answers while
		// the body (a command's stdin) still comes.
		go func() {
			cw := chunkedWriter{w: w}
			if _, err := io.Copy(cw, body); err == nil {
				cw.Close()
			}
		}()
	}
	r, err = readResponse(bufio.NewReaderSize(conn, 64<<10))
	if err != nil {
		close()
		return nil, nil, unreachable(c.socket, err)
	}
	return r, close, nil
}

func unreachable(socket string, err error) error {
	return publicerr.Wrap(err, "the daemon cannot be reached at "+socket)
}

// Do sends one request with a JSON body (nil: none) and decodes the
// JSON answer into out (nil: discarded). An error answer becomes an
// error with the daemon's message.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("client: %w", err)
		}
		body = b
	}
	ctype := ""
	if in != nil {
		ctype = "application/json"
	}
	head := append(requestHead(method, path, c.token, ctype, len(body)), body...)
	r, close, err := c.exchange(ctx, head, nil, nil)
	if err != nil {
		return err
	}
	defer close()
	if r.status/100 != 2 {
		return apiError(r)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(r.body, MaxAnswer)).Decode(out); err != nil {
		return errors.Join(publicerr.New("the daemon's answer could not be read"), err)
	}
	return nil
}

// apiError is the error an answer other than 2xx carries, in the
// daemon's words.
func apiError(r *response) error {
	var e APIError
	if json.NewDecoder(io.LimitReader(r.body, MaxAnswer)).Decode(&e) != nil || e.Error.Message == "" {
		return publicerr.New(fmt.Sprintf("the daemon answered %s", r.statusText))
	}
	return publicerr.New("the daemon refused: " + e.Error.Message)
}

// Exec runs req through the daemon, sending stdin (nil: none) after the
// request, and hands each line of the answer to line as it comes. It
// returns once the report has come, or with the error that ended the
// stream first (cancel ctx to end the run: the daemon ends it with the
// connection).
func (c *Client) Exec(ctx context.Context, req ExecRequest, stdin io.Reader, line func(ExecLine)) error {
	req.Stdin = stdin != nil
	first, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	body := io.Reader(bytes.NewReader(append(first, '\n')))
	if stdin != nil {
		body = io.MultiReader(body, stdin)
	}
	r, close, err := c.exchange(ctx, requestHead("POST", "/v1/exec", c.token, "application/x-ndjson", -1), body, c.tty)
	if err != nil {
		return err
	}
	defer close()
	if r.status != 200 {
		return apiError(r)
	}
	dec := json.NewDecoder(r.body)
	for {
		var l ExecLine
		if err := dec.Decode(&l); err != nil {
			return publicerr.Wrap(err, "the daemon's answer ended before the run's report")
		}
		line(l)
		if l.Type == "report" {
			return nil
		}
	}
}

// Signal forwards sig to the command of the caller's exec id (the
// "started" line's).
func (c *Client) Signal(ctx context.Context, id string, sig unix.Signal) error {
	name, ok := SignalName(sig)
	if !ok {
		return fmt.Errorf("client: signal %v is not forwarded", sig)
	}
	return c.Do(ctx, "POST", "/v1/execs/"+url.PathEscape(id)+"/signal", SignalRequest{Signal: name}, nil)
}

// Dialer is what an HTTP transport dials the daemon with: the socket as
// checked, root listening on it.
func (c *Client) Dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, _, _ string) (net.Conn, error) { return Dial(ctx, c.socket, nil) }
}
