// Package client is the daemon's API as a `sandboxd run` client speaks
// it, and nothing more: the exec request and its stream's lines (the
// one definition of each wire type, which package daemon serves and
// re-exports), the checks a client makes before it sends anything (the
// socket is root's, reached only through directories root alone may
// write, and root listens on it), passing the controlling terminal with
// the request (SCM_RIGHTS), the exec call and the signals relayed to it.
//
// It exists for the lean front (cmd/sandboxd-front), the process every
// `sandboxd run` through the daemon starts: every package it links
// initialises again at every launch, so it speaks HTTP/1.1 itself (a
// request line, headers and a chunked body out; a status line, headers
// and a chunked or sized body back) rather than linking net/http and,
// through it, crypto/tls. Its reports, events and questions stay raw
// JSON: those who need them decode them into session's and daemon's
// types.
//
// Of sandboxd's packages it imports only envlist and publicerr. It must never import
// session, review/..., broker, sandbox/..., daemon, metrics, netproxy,
// openai-go or an HTTP client.
package client
