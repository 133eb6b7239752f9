// Package daemonrun is `sandboxd run`'s side of a run through the
// daemon, one home for what the lean front (cmd/sandboxd-front) and the
// core (cmd/sandboxd) both do once they take a run there: the request
// made of the flags and of this process's user (its environment,
// working directory and umask; the daemon takes the ids from the
// kernel), the stream onto stdout and stderr with the daemon's text for
// the events, signals relayed, the report file and the exit status.
// What is printed is therefore the same whichever program ran it.
//
// It lives under cmd/ because it reads the identity and context of the
// process it runs in, which only a front end may (the caller is the only
// identity below cmd/), and it links what the front may link: the core's
// packages (session, the daemon's server, net/http) stay out of it.
//
// Of sandboxd's packages it imports only daemon/client, publicerr,
// runflags and termfilter.
package daemonrun
