package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeDaemon answers each connection on a unix socket with the next of
// answers, which reads the request from br and writes to conn.
func fakeDaemon(t *testing.T, answers ...func(br *bufio.Reader, conn net.Conn)) (socket string, served func() int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the client talks only to a socket root listens on")
	}
	socket = filepath.Join(t.TempDir(), "sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, answer := range answers {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			answer(bufio.NewReader(conn), conn)
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return socket, func() int { return int(n.Load()) }
}

// readHead reads a request's line and headers: its line, and its
// Authorization header's token.
func readHead(t *testing.T, br *bufio.Reader) (line, token string) {
	for i := 0; ; i++ {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Errorf("request head: %v", err)
			return
		}
		l = strings.TrimRight(l, "\r\n")
		if i == 0 {
			line = l
		}
		if tok, ok := strings.CutPrefix(l, "Authorization: Bearer "); ok {
			token = tok
		}
		if l == "" {
			return
		}
	}
}

// readChunk reads one chunk of a chunked body ("" for the last).
func readChunk(t *testing.T, br *bufio.Reader) string {
	l, err := br.ReadString('\n')
	n, perr := strconv.ParseInt(strings.TrimRight(l, "\r\n"), 16, 64)
	if err != nil || perr != nil {
		t.Errorf("chunk size line %q: %v %v", l, err, perr)
		return ""
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(br, b); err != nil {
		t.Errorf("chunk: %v", err)
	}
	return string(b[:n])
}

// stdinAfter is a stdin that records whether it was read before ok.
type stdinAfter struct {
	ok, early atomic.Bool
	r         io.Reader
}

func (s *stdinAfter) Read(p []byte) (int, error) {
	if !s.ok.Load() {
		s.early.Store(true)
	}
	return s.r.Read(p)
}

// A token the daemon refuses (a file of an earlier daemon) is asked for
// anew and the exec sent again, once: the daemon answers 200 before
// anything of stdin is read, and the command's stdin arrives whole.
func TestExecStaleTokenRetried(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("fresh\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	stdin := &stdinAfter{r: strings.NewReader("hello\n")}
	var got string
	socket, served := fakeDaemon(t,
		func(br *bufio.Reader, conn net.Conn) {
			if line, tok := readHead(t, br); line != "POST /v1/exec HTTP/1.1" || tok != "stale" {
				t.Errorf("first request %q with token %q", line, tok)
			}
			fmt.Fprint(conn, "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"+
				`{"error":{"code":"bad_token","message":"the request needs your token"}}`)
		},
		func(br *bufio.Reader, conn net.Conn) {
			if line, _ := readHead(t, br); line != "POST /v1/token HTTP/1.1" {
				t.Errorf("second request %q", line)
			}
			fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"path\":%q}", tokenFile)
		},
		func(br *bufio.Reader, conn net.Conn) {
			if line, tok := readHead(t, br); line != "POST /v1/exec HTTP/1.1" || tok != "fresh" {
				t.Errorf("third request %q with token %q", line, tok)
			}
			if first := readChunk(t, br); !strings.Contains(first, `"stdin":true`) {
				t.Errorf("first line %q", first)
			}
			stdin.ok.Store(true)
			fmt.Fprint(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n")
			conn.Write(appendChunk(nil, []byte(`{"type":"started","exec":"x"}`+"\n")))
			for c := readChunk(t, br); c != ""; c = readChunk(t, br) {
				got += c
			}
			conn.Write(appendChunk(nil, []byte(`{"type":"report","report":{"exit_code":0}}`+"\n")))
			fmt.Fprint(conn, lastChunk)
		})
	c := &Client{socket: socket, uid: os.Getuid(), token: "stale"}
	var types []string
	err := c.Exec(context.Background(), ExecRequest{Argv: []string{"cat"}, Context: Context{Cwd: "/"}}, stdin, func(l ExecLine) {
		types = append(types, l.Type)
	})
	if err != nil || strings.Join(types, " ") != "started report" {
		t.Fatalf("Exec = %v, lines %v", err, types)
	}
	if stdin.early.Load() || got != "hello\n" || served() != 3 || c.Token() != "fresh" {
		t.Fatalf("stdin read early %v, the daemon got %q, %d connections, token %q", stdin.early.Load(), got, served(), c.Token())
	}
}

// A refusal, of the token twice or of anything else once, reads nothing
// of stdin and is not sent again.
func TestExecRefusedReadsNoStdin(t *testing.T) {
	refuse := func(status, code string) func(br *bufio.Reader, conn net.Conn) {
		return func(br *bufio.Reader, conn net.Conn) {
			readHead(t, br)
			fmt.Fprintf(conn, "HTTP/1.1 %s\r\nConnection: close\r\n\r\n{\"error\":{\"code\":%q,\"message\":\"no\"}}", status, code)
		}
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("fresh\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	token := func(br *bufio.Reader, conn net.Conn) {
		readHead(t, br)
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"path\":%q}", tokenFile)
	}
	for _, tc := range []struct {
		name    string
		answers []func(br *bufio.Reader, conn net.Conn)
	}{
		{"not yours", []func(br *bufio.Reader, conn net.Conn){refuse("403 Forbidden", "not_yours")}},
		{"the token twice", []func(br *bufio.Reader, conn net.Conn){refuse("401 Unauthorized", "bad_token"), token, refuse("401 Unauthorized", "bad_token")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			socket, served := fakeDaemon(t, tc.answers...)
			stdin := &stdinAfter{r: strings.NewReader("hello\n")}
			c := &Client{socket: socket, uid: os.Getuid(), token: "t"}
			err := c.Exec(context.Background(), ExecRequest{Argv: []string{"cat"}, Context: Context{Cwd: "/"}}, stdin, func(ExecLine) {})
			if err == nil || !strings.Contains(err.Error(), "the daemon refused: no") || stdin.early.Load() || served() != len(tc.answers) {
				t.Fatalf("Exec = %v, stdin read %v, %d connections", err, stdin.early.Load(), served())
			}
		})
	}
}

// A token file that is not a regular file is refused, not waited on: a
// fifo in its place (where the daemon names it, or beside the socket)
// would hold the client for ever before its checks, as open(2) of a
// fifo waits for a writer.
func TestTokenFifoRefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "token")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	socket, _ := fakeDaemon(t, func(br *bufio.Reader, conn net.Conn) {
		readHead(t, br)
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"path\":%q}", fifo)
	})
	c := &Client{socket: socket, uid: os.Getuid()}
	done := make(chan error, 1)
	go func() {
		_, err := c.askToken(context.Background())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a private file of yours") {
			t.Fatalf("askToken of a fifo = %v", err)
		}
	case <-time.After(10 * time.Second):
		// Unblock the open so that the test ends.
		f, _ := os.OpenFile(fifo, os.O_WRONLY, 0)
		f.Close()
		<-done
		t.Fatal("the client waited on a fifo in place of its token file")
	}
}

// Connect's connection, closed by the daemon since (a daemon stopped;
// another listens at the socket now), is not used: the request goes on
// a new connection, to the daemon there, and is sent once.
func TestReadyClosedRedials(t *testing.T) {
	closed := make(chan struct{})
	socket, served := fakeDaemon(t,
		func(br *bufio.Reader, conn net.Conn) { close(closed) },
		func(br *bufio.Reader, conn net.Conn) {
			if line, tok := readHead(t, br); line != "GET /v1/health HTTP/1.1" || tok != "t" {
				t.Errorf("request %q with token %q", line, tok)
			}
			fmt.Fprint(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"status\":\"ok\"}")
		})
	conn, err := dial(context.Background(), socket)
	if err != nil {
		t.Fatal(err)
	}
	c := &Client{socket: socket, uid: os.Getuid(), token: "t", ready: conn, readyAt: time.Now()}
	<-closed
	time.Sleep(50 * time.Millisecond) // the fake's close reaches the client
	var h struct{ Status string }
	if err := c.Do(context.Background(), "GET", "/v1/health", nil, &h); err != nil || h.Status != "ok" || served() != 2 {
		t.Fatalf("Do = %v, status %q, %d connections; want ok on a second connection", err, h.Status, served())
	}
}
