// Package landlock builds and enforces the sandbox's Landlock domain: which
// hierarchies the command may read and execute, which it may change, which
// secrets are carved out of the readable tree, and (when there is no network
// namespace) that it may neither connect nor bind TCP ports.
//
// Landlock only grants, so "everything readable except ~/.ssh" is expressed
// as a carve-out: a rule for every sibling of each denied path, walked down
// from /. Entries are enumerated when the ruleset is built; anything that
// appears later at a carved level (a new ~/.aws, say) is simply not covered,
// which fails closed. The carve-out is one value, Carveout: the ruleset
// enforces it, and Carveout.Grants answers it on a path for whoever must
// know without asking the kernel, so the two cannot disagree.
//
// A ruleset is a file descriptor, so the supervisor builds the large
// carve-out in parallel with the helper's start and hands the descriptor
// over; the helper adds rules for the mounts it creates itself (/tmp, /dev,
// /proc) and for the command's standard streams, then restricts every
// thread with [Restrict].
//
// The package enforces and reports; it knows nothing of reviewers, grants
// or models. Of sandboxd's packages it imports only pathtree. It must never import
// broker, review/..., netproxy or openai-go.
package landlock
