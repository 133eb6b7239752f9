// Package suggest turns a denied boundary into the one rule that would
// allow it next time, for a person to add to their own policy file, or
// says why no rule is offered.
//
// For is the suggester: the report's boundaries (session), `sandboxd
// suggest` and the audit report all call it. A rule names exactly the
// boundary it came from (broker.ExactRule: the operation itself, the one
// path escaped, the one host:port) and is written as TOML whose strings
// escape everything that does not print, so what a person reads is what
// the policy will hold. Only a denial an allow rule could lift gets a
// rule: a reviewer's, a person's, or one nobody could review; a hard
// deny, a policy deny rule, a lockdown, a failure or a quiet write gets
// only the reason.
//
// The package decides and renders; it never prints and never writes a
// policy. Rules are shown to a person (their terminal, the report,
// `sandboxd suggest`), never on the command's stderr, which the agent
// reads and could copy into the policy with its own file tools.
//
// Of sandboxd's packages it imports only boundary, broker, grants, ruletext
// and termfilter.
// The report and the audit log both call it: it must never import
// session, sandbox/... or review/....
package suggest
