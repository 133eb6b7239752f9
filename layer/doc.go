// Package layer commits an attempt's copy-on-write layer into the
// workspace: exactly what the command changed, never over a change made
// from outside while it ran, never a persistence path, never through a
// symlink or onto anything outside the workspace, and atomically with
// respect to a crash of sandboxd (a journal in the state directory is
// replayed by the next run or by `sandboxd recover`).
//
// The layer is an overlayfs upper directory: new and changed files,
// directories (opaque when they replace what was below), symlinks, and
// whiteouts (character devices 0/0) for what was removed. Commit reads
// it in three steps: plan (walk the layer, check each change against the
// persistence rules and against the workspace as it is now), stage (copy
// every file to commit next to the workspace, on its file system, a
// directory the workspace does not have with everything in it, then mark
// the journal staged), apply (renames and removals, each recorded as
// done; a new directory is renamed into place whole). Only apply touches the workspace; a crash before it leaves the
// workspace untouched, a crash during it is finished by recovery.
//
// Of sandboxd's packages it imports only atomicfile, fsid, pathtree,
// persist and publicerr. It must never import broker, review/..., session or
// openai-go.
package layer
