// Package pathtree says where one path stands below another in the file
// tree: "at or below a directory" is decided here once, for the rules
// that cover a directory and everything under it (writable roots, the
// workspace, secrets, carve-outs, persistence directories), so that no
// copy can forget the root directory or a sibling that shares a prefix
// ("/a/bc" is not below "/a/b").
//
// It compares text, never the file system: callers pass clean paths,
// both absolute or both relative to the same directory, and resolve
// links first where a link matters. An empty path names nothing, so
// nothing is at or below it.
//
// Of sandboxd's packages it imports none (internal/guardrails checks
// it).
package pathtree
