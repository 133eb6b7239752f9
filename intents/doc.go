// Package intents keeps a person's session intent grants: "for this
// session, yes to this kind of thing", one scope each (a boundary rule
// in its normal form, as the person was shown it), approved at their
// terminal (`sandboxd approve --scope`) or on the approvals page.
//
// An intent is bound to the SHA-256 of exactly the text the person was
// shown (Add refuses a hash of another text), belongs to one scoped
// session, expires (DefaultTTL, at most MaxTTL) and is revocable. It
// bypasses nothing: the broker consults the session's intents only
// where it consults the policy's allow rules, after its deny rules and
// hard denies, and parses each scope again when it uses it. Whether a
// scope may be approved at all (never a cache, a start-up location, a
// directory on PATH or a subtree holding a secret) is decided by the
// caller (package session) before Add.
//
// State lives in one JSON file per session under a directory of
// sandboxd's state (out of a sandboxed command's reach); every
// read-modify-write happens under an exclusive flock and is written with
// atomicfile. A damaged file fails closed: no intent is read from it and
// nothing is added to it.
//
// Of sandboxd's packages it imports only atomicfile. The broker
// declares the interface it consumes and does not import this package.
package intents
