// Package runcmd is `sandboxd run`, one home for the two programs that
// take it: the core (cmd/sandboxd), and the lean sandboxd-run
// (cmd/sandboxd-run), which the front executes for a run it does not
// send to the daemon itself. The flags, the daemon's route, the
// embedded session with its helper, audit log, person at the terminal
// and report are the same code in both; what differs is an Option: the
// core asks the model in its own process (review/openai), sandboxd-run
// asks the core beside it, one process per prompt (CoreModels, ModelArg,
// ServeModel), so that it links no model client, Prometheus, MCP or
// daemon server.
//
// It lives under cmd/ because it reads the identity and context of the
// process it runs in (CallerOf), which only a front end may.
//
// Of sandboxd's packages it imports only audit, audit/record, broker,
// cmd/internal/daemonrun, daemon/client, evidence, policy, publicerr,
// review, reviewurl, runflags, runtext, sandbox, session, sibling, suggest
// and termfilter.
package runcmd
