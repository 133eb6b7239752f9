// Package evidence reads files for the model reviewer with a sandboxed
// command's own view and identity, or not at all.
//
// It holds both ends of one small protocol. The reader (Serve) runs as
// the command of a read-only sandbox built from the run's own Spec
// (cmd/sandboxd re-executes itself with ReaderArg), so it sees the
// command's mounts and masks, its private /tmp, its Landlock rules and
// its uid: what the command could not read, the reader cannot either.
// The Client is the supervisor's side: it names a path, learns where
// it leads in that view, decides (secrets are never read at all), and
// only then asks for the content. One reader serves a whole inspection,
// since reading one script can name the next.
//
// Everything the reader sends is untrusted: frames are bounded before
// anything is allocated, every reply is checked against what was asked,
// and an unexpected one ends the session.
//
// Of sandboxd's packages it imports none.
package evidence
