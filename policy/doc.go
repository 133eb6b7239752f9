// Package policy owns sandboxd's policy file: its TOML format, the built-in
// defaults (secret paths, the strict profile's home allow list, the
// environment deny list, the workspace persistence names, resource limits),
// the resolution of a policy into absolute paths for one run, and the
// only-tighten merge of a workspace-local policy into the user policy.
//
// A user-level policy (--policy FILE or ~/.config/sandboxd/policy.toml) may
// set anything. A workspace-local policy (<workspace>/.sandboxd.toml) comes
// from cloned repositories and may be written by sandboxed commands, so it may
// only tighten: every key is merged through the rule named by its `tighten`
// struct tag, and a key without a known rule makes the merge fail.
//
// A machine policy (the [policy] table of the daemon's machine
// configuration, ParseTable) binds the keys its operator's file sets:
// a caller's own policy is merged under it by the same rules
// (UnderMachine), and workspace policies then tighten the result
// (LoadUnder). Decode gives other configuration files (the machine
// configuration's other tables) the same error form.
//
// A Cache keeps the parsed form of policy files for a process that
// loads them again and again (the daemon's Runner): per caller uid and
// path, trusted only while the file, opened and stat'ed as the caller on
// every load, is as it was parsed and had settled before that read.
//
// Errors about a file are *Error values formatted as FILE:LINE: KEY: MESSAGE.
//
// This package is pure data and parsing. Of sandboxd's packages it imports
// only boundary, credstore, envlist, filecache, netdest, pathtree, persist,
// reviewurl, ruletext and statedir. It must never
// import broker, review/..., netproxy, landlock, seccomp, go-landlock,
// libseccomp-golang or openai-go. It keeps no package-level mutable state
// (no init, no global variables); internal/guardrails checks both.
package policy
