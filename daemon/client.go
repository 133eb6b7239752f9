package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/publicerr"
	"golang.org/x/sys/unix"
)

// DefaultSocket is where the daemon listens unless told otherwise; a
// client also reads SANDBOXD_SOCKET.
const DefaultSocket = "/run/sandboxd/sandboxd.sock"

// TrustedSocket checks that path is a socket a client may send its
// environment and tokens to: owned by root, reached only through
// directories (and symlinks) that root owns and nobody else may write.
// SANDBOXD_SOCKET may name anything, another user's socket included.
func TrustedSocket(path string) error {
	return trusted(path, "the daemon's socket", os.ModeSocket)
}

// TrustedFile checks that path is a regular file of root's that only
// root may change, reached as TrustedSocket's socket is: the daemon's
// word that a file is its own (the audit log's public key) is not
// taken for it.
func TrustedFile(path string) error {
	if err := trusted(path, "the daemon's file", 0); err != nil {
		return err
	}
	real, _ := filepath.EvalSymlinks(path)
	if st, err := os.Lstat(real); err != nil || st.Mode().Perm()&0o022 != 0 {
		return publicerr.New(fmt.Sprintf("the daemon's file %s is not trusted: others may write it", path))
	}
	return nil
}

// TrustedDir checks that path is a directory of root's that only root
// may change, reached as TrustedSocket's socket is: the daemon keeps its
// audit log only in such a one, where nobody else can plant a link or
// remove a file.
func TrustedDir(path string) error {
	if err := trusted(path, "the directory", os.ModeDir); err != nil {
		return err
	}
	real, _ := filepath.EvalSymlinks(path)
	if st, err := os.Lstat(real); err != nil || st.Mode().Perm()&0o022 != 0 {
		return publicerr.New(fmt.Sprintf("the directory %s is not trusted: others may write it", path))
	}
	return nil
}

// trusted checks that path is of type kind (0: a regular file), root's,
// reached only through directories and symlinks of root's that nobody
// else may write.
func trusted(path, what string, kind os.FileMode) error {
	if !filepath.IsAbs(path) {
		return publicerr.New(fmt.Sprintf("%s %s is not an absolute path", what, path))
	}
	path = filepath.Clean(path)
	unreachable := func(err error) error {
		return publicerr.Wrap(err, fmt.Sprintf("%s %s cannot be reached", what, path))
	}
	// Each prefix as given: a symlink on the way must be root's, in a
	// directory that is (checked at the step before).
	for p := path; ; p = filepath.Dir(p) {
		st, err := os.Lstat(p)
		if err != nil {
			return unreachable(err)
		}
		if st.Mode()&os.ModeSymlink != 0 && owner(st) != 0 {
			return untrusted(what, path, p+" is a symlink that is not root's")
		}
		if p == "/" {
			break
		}
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return unreachable(err)
	}
	st, err := os.Lstat(real)
	if err != nil {
		return unreachable(err)
	}
	if st.Mode().Type() != kind || owner(st) != 0 {
		noun := map[os.FileMode]string{0: "file", os.ModeSocket: "socket", os.ModeDir: "directory"}[kind]
		return untrusted(what, path, real+" is not a "+noun+" of root's")
	}
	for d := filepath.Dir(real); ; d = filepath.Dir(d) {
		st, err := os.Lstat(d)
		if err != nil {
			return unreachable(err)
		}
		if owner(st) != 0 || st.Mode().Perm()&0o022 != 0 {
			return untrusted(what, path, d+" is not a directory only root may write")
		}
		if d == "/" {
			break
		}
	}
	return nil
}

func owner(st os.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}

func untrusted(what, path, why string) error {
	return publicerr.New(fmt.Sprintf("%s %s is not trusted: %s (another user could have put it there)", what, path, why))
}

// Client talks to the daemon as the user running it.
type Client struct {
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

// execHTTP is the HTTP client of an exec: with a terminal to pass, a
// connection of its own that passes it with the request's first bytes.
func (c *Client) execHTTP() *http.Client {
	if c.tty == nil {
		return c.http
	}
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			conn, err := dialDaemon(ctx, c.socket)
			if err != nil {
				return nil, err
			}
			return &passingConn{UnixConn: conn, fd: c.tty}, nil
		}}}
}

// dialDaemon connects to socket and checks, by the kernel's word on the
// peer (SO_PEERCRED), that root listens there: whatever the path's checks
// found, nothing of this user's goes to a listener of another user's.
func dialDaemon(ctx context.Context, socket string) (*net.UnixConn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, err
	}
	uc := conn.(*net.UnixConn)
	raw, err := uc.SyscallConn()
	var cred *unix.Ucred
	if err == nil {
		raw.Control(func(fd uintptr) { cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	}
	if err != nil || cred.Uid != 0 {
		uc.Close()
		return nil, untrusted("the daemon's socket", socket, "the process listening on it is not root's")
	}
	return uc, nil
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
	socket = filepath.Clean(socket)
	c := &Client{socket: socket, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialDaemon(ctx, socket)
		}}}}
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
	return strings.TrimSpace(string(b)), nil
}

// Do sends one request with a JSON body (nil: none) and decodes the
// JSON answer into out (nil: discarded). An error answer becomes an
// error with the daemon's message.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://sandboxd"+path, body)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return publicerr.Wrap(err, "the daemon cannot be reached at "+c.socket)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return apiError(resp)
	}
	dec := json.NewDecoder(io.LimitReader(resp.Body, MaxRequest))
	if out == nil {
		return nil
	}
	if err := dec.Decode(out); err != nil {
		return errors.Join(publicerr.New("the daemon's answer could not be read"), err)
	}
	return nil
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
// request, and hands each line of the answer to line as it comes. It
// returns once the report has come, or with the error that ended the
// stream first (cancel ctx to end the run: the daemon ends it with the
// connection).
func (c *Client) Exec(ctx context.Context, req ExecRequest, stdin io.Reader, line func(ExecLine)) error {
	req.Stdin = stdin != nil
	head, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	body := io.Reader(bytes.NewReader(append(head, '\n')))
	if stdin != nil {
		body = io.MultiReader(body, stdin)
	}
	hreq, err := http.NewRequestWithContext(ctx, "POST", "http://sandboxd/v1/exec", body)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	hreq.Header.Set("Authorization", "Bearer "+c.token)
	hreq.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := c.execHTTP().Do(hreq)
	if err != nil {
		return publicerr.Wrap(err, "the daemon cannot be reached at "+c.socket)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e APIError
		if json.NewDecoder(io.LimitReader(resp.Body, MaxRequest)).Decode(&e) != nil || e.Error.Message == "" {
			return publicerr.New(fmt.Sprintf("the daemon answered %s", resp.Status))
		}
		return publicerr.New("the daemon refused: " + e.Error.Message)
	}
	dec := json.NewDecoder(resp.Body)
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
	name, ok := signalName(sig)
	if !ok {
		return fmt.Errorf("daemon: signal %v is not forwarded", sig)
	}
	return c.Do(ctx, "POST", "/v1/execs/"+url.PathEscape(id)+"/signal", SignalRequest{Signal: name}, nil)
}

// CloseIdle closes the client's idle connections to the daemon.
func (c *Client) CloseIdle() { c.http.CloseIdleConnections() }
