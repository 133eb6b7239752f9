// Package review holds the reviewers the broker can ask: a person at
// sandboxd's terminal (Human) and a model (Model), which it shows the
// exact boundary, the user's request and static evidence, redacted and
// bounded, and whose answer it parses strictly into a verdict that must
// pass the consistency rules (verdict.go). Reviewers answer
// broker.Decision and never issue grants themselves: the broker does.
//
// The model is reached through a Completer; review/openai is the one that
// speaks to a server, and cmd/sandboxd joins the two. Of sandboxd's
// packages it imports only atomicfile, boundary, broker, evidence, grants,
// publicerr and termfilter. It must never import review/openai or
// openai-go.
package review
