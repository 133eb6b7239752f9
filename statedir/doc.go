// Package statedir is the layout of what sandboxd keeps for one caller:
// its configuration directory CONFIG (ConfigHome/sandboxd) and its state
// directory STATE (StateHome/sandboxd), ConfigHome and StateHome being
// the caller's XDG_CONFIG_HOME and XDG_STATE_HOME or their defaults.
// session and cmd/sandboxd name every file there through Layout; a
// package that owns a corner of STATE is handed STATE and names its
// corner itself:
//
//	CONFIG/policy.toml      the caller's policy               Layout.Policy
//	STATE/cache/ID          a workspace's private caches      Layout.Cache (cachedir keeps ID.use beside it)
//	STATE/breaker           each session's circuit breaker    Layout.Breaker
//	STATE/overrides         a person's overrides              Layout.Overrides
//	STATE/credstores.index  the credential scan's index       Layout.CredIndex
//	STATE/review            the model reviewer's usage        review.Meter
//	STATE/txn               commit journals, staged files     layer.Where
//	STATE/scan              persistence scans                 persist.ScanFile
//	STATE/seccomp           compiled seccomp filters          sandbox
//	STATE/tmp, copies, grant-leftovers, quarantine: one run's files (sandbox)
//
// Both directories are sandboxd's own: every command is denied them
// (policy's secrets, the broker's hard denies).
//
// Of sandboxd's packages it imports none (internal/guardrails checks it).
package statedir
