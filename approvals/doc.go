// Package approvals is the daemon's approvals page: a web page on a
// loopback address (serve --approvals-addr) where a person answers the
// questions for a person in the daemon's one queue (daemon.Questions),
// sees their history, and signs out.
//
// A browser proves it is the person's with a one-time link the daemon
// issues over its socket to the caller the kernel names (Page.Link),
// which `sandboxd approve --page` prints to that person's terminal only;
// the page exchanges it once for a session cookie bound to that uid and
// shows and answers only that uid's questions. The page's answers are
// source page: a person's, who may allow a critical question only with
// the break-glass phrase on its card (daemon.Questions.AnswerPhrase).
//
// Every request is checked before anything else: its Host is the
// page's own address (no DNS rebinding), a POST comes from the page's
// own origin (Origin, Sec-Fetch-Site) with the session's CSRF token,
// and every answer carries a strict Content-Security-Policy. The page
// runs no script; every text from a command, a path or a reviewer is
// escaped by html/template, its control characters shown as escapes.
//
// Of sandboxd's packages it imports only broker and daemon.
package approvals
