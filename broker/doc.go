// Package broker owns the pipeline that decides one boundary request:
// policy rules (deny > ask > allow), then deterministic hard denies, then
// a reviewer, then the consistency rules of DESIGN.md §3.3, and, for an
// allow, an exact one-use grant. A per-session circuit breaker turns
// repeated denials into a lockdown that only a human lifts.
//
// The broker declares the small interfaces it consumes (Reviewer,
// GrantStore) and never imports landlock, sandbox, netproxy or openai-go.
package broker
