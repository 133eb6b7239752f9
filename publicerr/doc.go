// Package publicerr keeps the sentence sandboxd may show an agent, a
// model or a person apart from the internal error behind it (in the
// spirit of tailscale's vizerror). An internal error's text (a syscall's
// errno, a file under sandboxd's state, a library's message) never reaches
// a rationale, a stderr line or the report: only a public sentence does,
// and the cause goes to the log.
//
// Of sandboxd's packages it imports none.
package publicerr
