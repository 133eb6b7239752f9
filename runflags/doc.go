// Package runflags is the command line of `sandboxd run`: its flags,
// their checks and the command they leave, parsed alike by sandboxd's
// core (cmd/sandboxd) and by the lean front (cmd/sandboxd-front), which
// must agree on every run it takes to the daemon itself and pass every
// other one on unchanged.
//
// Of sandboxd's packages it imports only daemon/client and publicerr.
package runflags
