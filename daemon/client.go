package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"

	"github.com/sandboxd/sandboxd/daemon/client"
	"github.com/sandboxd/sandboxd/publicerr"
	"golang.org/x/sys/unix"
)

// DefaultSocket is where the daemon listens unless told otherwise; a
// client also reads SANDBOXD_SOCKET.
const DefaultSocket = client.DefaultSocket

// TrustedSocket checks that path is a socket a client may send its
// environment and tokens to (client.TrustedSocket).
func TrustedSocket(path string) error { return client.TrustedSocket(path) }

// TrustedFile checks that path is a regular file of root's that only
// root may change (client.TrustedFile).
func TrustedFile(path string) error { return client.TrustedFile(path) }

// TrustedDir checks that path is a directory of root's that only root
// may change (client.TrustedDir).
func TrustedDir(path string) error { return client.TrustedDir(path) }

// Client talks to the daemon as the user running it: runs and signals
// through the lean client (package client), every other request through
// net/http, whose connections it keeps.
type Client struct {
	lean   *client.Client
	socket string
	token  string
	http   *http.Client
	// tty is the terminal Exec passes to the daemon (nil: none).
	tty *os.File
}

// PassTerminal has Exec pass tty, this process's controlling terminal,
// over the socket with its request: the daemon asks the person on it
// (it checks that it is this process's controlling terminal first).
func (c *Client) PassTerminal(tty *os.File) { c.tty = tty }

// execHTTP is the HTTP client of a request that passes c's terminal: a
// connection of its own that passes it with the request's first bytes.
func (c *Client) execHTTP() *http.Client {
	if c.tty == nil {
		return c.http
	}
	tty := c.tty
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return client.Dial(ctx, c.socket, tty)
		}}}
}

// Connect checks socket (TrustedSocket), connects and reads this user's
// token file, which the daemon writes when there is none
// (client.Connect): the client then sends both factors. uid is the user
// this process runs as.
func Connect(ctx context.Context, socket string, uid int) (*Client, error) {
	lean, err := client.Connect(ctx, socket, uid)
	if err != nil {
		return nil, err
	}
	return &Client{lean: lean, socket: lean.Socket(), token: lean.Token(),
		http: &http.Client{Transport: &http.Transport{DialContext: lean.Dialer()}}}, nil
}

// Do sends one request with a JSON body (nil: none) and decodes the
// JSON answer into out (nil: discarded); an error answer becomes an
// error with the daemon's message (client.Client.Do: the one client of
// such requests).
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	return c.lean.Do(ctx, method, path, in, out)
}

// apiError is the error an answer other than 2xx carries, in the
// daemon's words.
func apiError(resp *http.Response) error {
	var e APIError
	dec := json.NewDecoder(io.LimitReader(resp.Body, MaxRequest))
	if dec.Decode(&e) != nil || e.Error.Message == "" {
		return publicerr.New(fmt.Sprintf("the daemon answered %s", resp.Status))
	}
	return publicerr.New("the daemon refused: " + e.Error.Message)
}

// Exec runs req through the daemon, sending stdin (nil: none) after the
// request, and hands each line of the answer to line as it comes
// (client.Client.Exec).
func (c *Client) Exec(ctx context.Context, req ExecRequest, stdin io.Reader, line func(ExecLine)) error {
	c.lean.PassTerminal(c.tty)
	return c.lean.Exec(ctx, req, stdin, line)
}

// Signal forwards sig to the command of the caller's exec id (the
// "started" line's).
func (c *Client) Signal(ctx context.Context, id string, sig unix.Signal) error {
	return c.lean.Signal(ctx, id, sig)
}

// CloseIdle closes the client's idle connections to the daemon.
func (c *Client) CloseIdle() { c.http.CloseIdleConnections() }

// owner is the uid owning what st describes (-1: unknown).
func owner(st os.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}
