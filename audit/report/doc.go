// Package report reads the audit log and reports on it for `sandboxd
// audit report`: decisions by surface, decision and source, the slowest
// reviews, how often each reviewer allowed, how often a person overrode
// the model's denial and the median time to a person's answer, and the
// rules for boundaries allowed at least N times and never denied.
//
// A rule comes from the suggester `sandboxd suggest` uses
// (suggest.Allowed): it names exactly the boundary that was allowed
// (the path escaped, the one host:port) and is offered only when no
// directory the boundary was met in denies it before the allow rules
// (a start-up location, a secret, a production target, anything a hard
// deny covers); a target the redactor changed gets none. Nothing is
// applied: the rules are TOML for a person to copy.
//
// Of sandboxd's packages it imports only audit, boundary, broker,
// suggest and termfilter.
package report
