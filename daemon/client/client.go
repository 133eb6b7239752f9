package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sandboxd/sandboxd/publicerr"
	"golang.org/x/sys/unix"
)

// Client talks to the daemon as the user running it, one connection per
// request.
type Client struct {
	socket string
	uid    int
	// mu guards token, which a refusal of it replaces, and ready.
	mu    sync.Mutex
	token string
	// ready is the connection Connect made, for the first request while
	// it is fresh (readyFor): the daemon takes the peer's credentials
	// while the client makes its request (nil: taken, or none).
	ready   *net.UnixConn
	readyAt time.Time
	// tty is the terminal Exec passes to the daemon (nil: none).
	tty *os.File
}

// readyFor is how long Connect's connection is used for a first
// request: well inside the daemon's ReadHeaderTimeout (10 s from its
// accept), so that the daemon never closes it while it waits.
const readyFor = 2 * time.Second

// TokenDir is the directory, beside the daemon's socket, where it writes
// each caller's token file (named by the uid).
const TokenDir = "tokens"

// Connect checks socket (TrustedSocket), connects to it (root must be
// listening there) and reads this user's token file beside it; when
// there is none yet, it has the daemon write it first (POST /v1/token).
// The client then sends both factors. A token the daemon refuses (a
// file of an earlier daemon) is asked for anew, and the request made
// again, once. uid is the user this process runs as.
func Connect(ctx context.Context, socket string, uid int) (*Client, error) {
	if err := TrustedSocket(socket); err != nil {
		return nil, err
	}
	// The path checked is the clean one: dial it, not socket as given,
	// where a ".." after a symlink of another user's leads elsewhere.
	c := &Client{socket: filepath.Clean(socket), uid: uid}
	conn, err := dial(ctx, c.socket)
	if err != nil {
		return nil, unreachable(c.socket, err)
	}
	c.ready, c.readyAt = conn, time.Now()
	// The token directory is beside the socket, in its real directory,
	// which TrustedSocket found root's alone to write (as every one
	// above it): what is there is root's word, as the daemon's answer
	// naming it would be. readToken checks the file as it checks that.
	tok, err := "", error(fs.ErrNotExist)
	if real, rerr := filepath.EvalSymlinks(c.socket); rerr == nil {
		tok, err = readToken(filepath.Join(filepath.Dir(real), TokenDir, strconv.Itoa(uid)), uid)
	}
	if errors.Is(err, fs.ErrNotExist) {
		tok, err = c.askToken(ctx)
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	c.token = tok
	return c, nil
}

// askToken has the daemon write this user's token file (if it has none
// for the uid yet) and reads it from where the daemon says it is.
func (c *Client) askToken(ctx context.Context) (string, error) {
	var tok struct {
		Path string `json:"path"`
	}
	cl, err := c.exchange(ctx, requestHead("POST", "/v1/token", "", "", 0), nil)
	if err != nil {
		return "", err
	}
	defer cl.close()
	if err := decodeAnswer(cl.r, &tok); err != nil {
		return "", err
	}
	return readToken(tok.Path, c.uid)
}

// Socket is the socket the client connects to, as checked.
func (c *Client) Socket() string { return c.socket }

// Token is the user's token, which every request but the token's own
// carries.
func (c *Client) Token() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token
}

// PassTerminal has Exec pass tty, this process's controlling terminal,
// over the socket with its request: the daemon asks the person on it
// (it checks that it is this process's controlling terminal first).
func (c *Client) PassTerminal(tty *os.File) { c.tty = tty }

// readToken reads a token file that must be uid's own, a regular file
// no one else may read. O_NONBLOCK: a fifo in its place is refused by
// the checks below, not waited on (open(2) of a fifo waits for a
// writer, before anything of the file is checked).
func readToken(path string, uid int) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
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

// call is a request's answer as it comes: its head and body (r), the
// connection to write more of the request's body to (w), and close,
// which ends the connection.
type call struct {
	r     *response
	w     io.Writer
	close func()
}

// exchange sends a request (head: its line and headers, and as much of
// its body as is known) on a connection of its own, passing tty (nil:
// none) with its first bytes, and reads the answer's head. The
// connection closes when ctx ends or with close.
func (c *Client) exchange(ctx context.Context, head []byte, tty *os.File) (*call, error) {
	conn := c.takeReady()
	if conn == nil {
		var err error
		if conn, err = dial(ctx, c.socket); err != nil {
			return nil, unreachable(c.socket, err)
		}
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	close := func() { stop(); conn.Close() }
	var w io.Writer = conn
	if tty != nil {
		w = NewPassingConn(conn, tty)
	}
	if _, err := w.Write(head); err != nil {
		close()
		return nil, unreachable(c.socket, err)
	}
	r, err := readResponse(bufio.NewReaderSize(conn, 64<<10))
	if err != nil {
		close()
		return nil, unreachable(c.socket, err)
	}
	return &call{r: r, w: w, close: close}, nil
}

// takeReady is Connect's connection while it is fresh and open, once.
func (c *Client) takeReady() *net.UnixConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	conn := c.ready
	c.ready = nil
	if conn != nil && (time.Since(c.readyAt) > readyFor || !unanswered(conn)) {
		conn.Close()
		return nil
	}
	return conn
}

// unanswered reports whether the daemon has neither closed conn nor
// written to it: a daemon that stopped since Connect (restarted: another
// now listens at the socket) closed it, and a request on it would fail
// where one on a new connection reaches the daemon there now. Nothing of
// the request has been written yet, so nothing is sent twice.
func unanswered(conn *net.UnixConn) bool {
	raw, err := conn.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	raw.Control(func(fd uintptr) {
		var b [1]byte
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		open = errors.Is(err, unix.EAGAIN)
	})
	return open
}

// send is exchange with the request's head made for the client's token.
// A refusal of the token (401 bad_token: one of an earlier daemon, read
// from its file) comes from the daemon's guard, before any route acts
// and before anything of the body past head is read: the token is then
// asked for anew and the request sent again, once.
func (c *Client) send(ctx context.Context, head func(token string) []byte, tty *os.File) (*call, error) {
	for retried := false; ; retried = true {
		cl, err := c.exchange(ctx, head(c.Token()), tty)
		if err != nil {
			return nil, err
		}
		if cl.r.status != 401 || retried {
			return cl, nil
		}
		code, err := readAPIError(cl.r)
		cl.close()
		if code != "bad_token" {
			return nil, err
		}
		tok, err := c.askToken(ctx)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.token = tok
		c.mu.Unlock()
	}
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
	cl, err := c.send(ctx, func(token string) []byte {
		return append(requestHead(method, path, token, ctype, len(body)), body...)
	}, nil)
	if err != nil {
		return err
	}
	defer cl.close()
	return decodeAnswer(cl.r, out)
}

// decodeAnswer decodes a 2xx answer's JSON into out (nil: discarded);
// another answer is an error with the daemon's message.
func decodeAnswer(r *response, out any) error {
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
	_, err := readAPIError(r)
	return err
}

// readAPIError is an error answer's code and its error, in the daemon's
// words.
func readAPIError(r *response) (code string, err error) {
	var e APIError
	if json.NewDecoder(io.LimitReader(r.body, MaxAnswer)).Decode(&e) != nil || e.Error.Message == "" {
		return e.Error.Code, publicerr.New(fmt.Sprintf("the daemon answered %s", r.statusText))
	}
	return e.Error.Code, publicerr.New("the daemon refused: " + e.Error.Message)
}

// Exec runs req through the daemon and hands each line of the answer to
// line as it comes. The request's first line goes with its head; stdin
// (nil: none) follows once the daemon has answered 200, after its
// checks of the caller and the token: nothing of stdin is read for a
// request that is refused, or sent again. It returns once the report
// has come, or with the error that ended the stream first (cancel ctx to
// end the run: the daemon ends it with the connection).
func (c *Client) Exec(ctx context.Context, req ExecRequest, stdin io.Reader, line func(ExecLine)) error {
	req.Stdin = stdin != nil
	first := append(appendExecRequest(nil, req), '\n')
	cl, err := c.send(ctx, func(token string) []byte {
		b := appendChunk(requestHead("POST", "/v1/exec", token, "application/x-ndjson", -1), first)
		if stdin == nil {
			b = append(b, lastChunk...)
		}
		return b
	}, c.tty)
	if err != nil {
		return err
	}
	defer cl.close()
	if cl.r.status != 200 {
		return apiError(cl.r)
	}
	if stdin != nil {
		// Written beside the answer's reading: the run's output comes
		// while its stdin still goes.
		go func() {
			cw := chunkedWriter{w: cl.w}
			if _, err := io.Copy(cw, stdin); err == nil {
				cw.Close()
			}
		}()
	}
	dec := json.NewDecoder(cl.r.body)
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
