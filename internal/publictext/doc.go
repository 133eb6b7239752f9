// Package publictext knows the marks of text that must never reach a
// public sentence (a report's or event's reason, a line sandboxd's CLI
// writes): an internal error's text and the paths of sandboxd's own
// state. Tests use it, over the goldens (internal/guardrails) and over
// the reasons a package builds from a real failing operation.
//
// Of sandboxd's packages it imports none, and only tests import it.
package publictext
