// Package boundary is the one home of the boundary vocabulary: what kind
// of boundary a request crosses (Surface) and what the command tried
// there (Operation), with their validity and their lists, and what makes
// two boundaries the same one (Key). It is typed
// once, here, and used by the sandbox (which reports denials in it), the
// policy and the broker (whose rules name it), the grants (which bind
// it), the reviewers and the report.
//
// It is the leaf every other package may import. Of sandboxd's packages
// it imports none (internal/guardrails checks it).
package boundary
