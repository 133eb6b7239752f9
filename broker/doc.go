// Package broker decides one boundary request: policy rules (deny > ask
// > allow), deterministic hard denies, what the sandbox can grant
// exactly, then the reviewer slots in a fixed order (the model; a person
// when the model is absent or failed, or the session is locked down, and
// a person is reachable; otherwise deny), then the consistency rules
// (docs/ARCHITECTURE.md §3.6). A production target (a name a production
// marker matches) is critical before the model is asked: only a person
// allows it, with the break-glass phrase. Every decision and grant event goes
// through an auditor hook before it takes effect; an allow gets an exact
// grant (§3.5 there: one use for a filesystem retry). A per-session
// circuit breaker turns repeated denials into a lockdown that only a
// person lifts.
//
// The broker does not own the attempt loop (package session does) and
// declares the small interfaces it consumes (Reviewer, Person, Auditor,
// GrantStore, OverrideStore, DenialRecorder). Of sandboxd's packages it
// imports only atomicfile, boundary, grants, netdest, pathtree, publicerr and
// ruletext. It
// must never import sandbox/..., landlock, seccomp, kernelaudit, layer,
// netproxy, review/..., overrides, intents, go-landlock, libseccomp-golang,
// openai-go or an HTTP client. Rationales are sentences safe to show an
// agent; internal errors go to the log.
package broker
