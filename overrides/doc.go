// Package overrides keeps a person's exact overrides of model denials:
// the recent denials of the model reviewer in each session, and the
// one-use permissions a person issues for one of them at their terminal
// (`sandboxd approve`, or `sandboxd break-glass` for a critical one).
//
// An override is bound to the full request hash (grants.Request.Hash) of
// the denied request and to its session, expires a minute after it is
// issued, is used at most once, and is never issued twice for the same
// request in a session. It does not bypass anything: the broker consults
// it only after its deny rules and hard denies, where it would otherwise
// ask the model.
//
// State lives in one JSON file per session under a directory of
// sandboxd's state (out of a sandboxed command's reach); every
// read-modify-write happens under an exclusive flock and is written with
// atomicfile, so two racing consumers of one override see exactly one
// win. A damaged file fails closed: nothing is used or issued from it.
//
// Of sandboxd's packages it imports only atomicfile, boundary and
// grants. The broker declares the interfaces it consumes and does not
// import this package (internal/guardrails checks it).
package overrides
