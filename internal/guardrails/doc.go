// Package guardrails holds no code: its tests enforce, over the whole
// module, the package rules docs/ARCHITECTURE.md §2 and the packages'
// doc.go files state, so that a change that breaks one fails `go test
// ./...` with the rule's name and the import chain that breaks it.
//
// The import rules are transitive (an import through another package of
// ours, or through the standard library, counts), read from
// `go list -deps -json ./...` for the build's GOOS/GOARCH and production
// code only (test files may import what their tests need):
//
//   - broker never imports sandbox or anything under it, landlock,
//     seccomp, kernelaudit, layer, netproxy (nor go-landlock or
//     libseccomp-golang), net/http or another HTTP client; nor
//     overrides or review, whose interfaces it declares.
//   - boundary (the boundary vocabulary: surfaces and operations)
//     imports no package of ours; grants none but boundary and netdest;
//     atomicfile none outside atomicfile/, evidence none outside
//     evidence/, and overrides none but boundary, grants (and what
//     grants may import) and atomicfile.
//   - netproxy never imports broker or review; it imports nothing of
//     ours but netdest, which imports nothing of ours.
//   - ruletext (a rule's text: fields, escapes, path patterns) imports
//     nothing of ours, nor do statedir (where sandboxd keeps a caller's
//     configuration and state), envlist (reading and editing
//     KEY=VALUE environment lists) and pathtree (whether a path is at or
//     below a directory).
//   - suggest never imports session, sandbox or review: the report and
//     the audit log both call it.
//   - landlock, seccomp, kernelaudit, sandbox and everything under it, layer,
//     persist and netproxy never import broker, review, session or
//     openai-go.
//   - the supervisor side (sandbox, sandbox/detect and
//     sandbox/internal/wire; not the helper, sandbox/confine) never
//     imports the helper, broker, review, session, netproxy, openai-go
//     or net/http.
//   - policy never imports broker, review, netproxy, landlock, seccomp
//     (ours or the libraries under them) or openai-go.
//   - at most one package of ours imports openai-go directly, and it is
//     under review/.
//   - audit (the audit log: storage and verification) never imports
//     sandbox or anything under it, landlock, seccomp, kernelaudit,
//     netproxy, review or anything under it, session or openai-go.
//   - cmd/sandboxd-helper (the separate helper binary) imports the
//     helper's side only: not sandbox (the supervisor), session, broker,
//     review, daemon, metrics, machine, policy, persist, layer, netproxy
//     or adapters, nor an HTTP client, crypto/tls or Prometheus; every
//     package it links initialises again at every launch.
//   - cmd/sandboxd-front (the lean front, installed as sandboxd),
//     cmd/internal/daemonrun, daemon/client, runflags and sibling
//     import no session, broker,
//     review, sandbox, daemon, metrics, machine, policy, persist, layer,
//     netproxy, adapters, approvals, audit or runtext, nor an HTTP
//     client, crypto/tls, nftables or Prometheus.
//   - cmd/sandboxd-run (the lean embedded run) and cmd/internal/runcmd
//     import no review/openai, daemon, metrics, machine, approvals,
//     adapters or sandbox/confine, nor openai-go, Prometheus, protobuf,
//     the MCP SDK, jsonschema, html/template or nftables.
//   - no package of ours outside cmd/ imports one under cmd/.
//
// The rules on the source:
//
//   - only cmd/ and the sandbox helper's own package may call
//     signal.Notify or signal.NotifyContext: no package of ours in the
//     transitive dependencies of sandbox, session or broker, nor those
//     packages themselves, may (signals belong to the process, and the
//     helper is the only package that is a process of its own).
//   - the supervisor side's code (supervisor_test.go), in every file but
//     tests whatever its build tags, imports none of what the rule
//     above forbids it, and never refers to signal.Notify,
//     NotifyContext, Ignore or Reset, to os.Getenv, LookupEnv, Environ,
//     Getwd or Chdir, to os.Stdin, Stdout or Stderr, or to grants'
//     NewStore, Store, Grant or Request: the caller decides which
//     signals reach the command and describes the context, the
//     command's streams come in the Spec, and the sandbox uses only the
//     boundary vocabulary of grants.
//   - no package of ours has an init function (test files included).
//   - policy keeps no package-level variables.
//   - no function or method of production code (every .go file of the
//     module but tests, .git and testdata, whatever its build tags) is
//     over 80 lines, from its func keyword to its closing brace, except
//     the tables funclen_test.go's longTables names, each with its reason
//     (persist.Builtin: the built-in persistence names table). A failure
//     lists file:function:lines; an entry of longTables that names no
//     function over the limit fails too.
//   - the caller is the only identity (identity_test.go): no package
//     below cmd/ reads or changes the identity or context of the process
//     running sandboxd — its ids and groups, working directory, home,
//     temporary directory, environment, umask, the /proc/self entries
//     that describe it — nor starts a child that inherits its
//     environment or working directory. Calls are matched by what
//     go/types resolves them to, so a renamed import or a twin in
//     syscall or x/sys/unix is caught. The exempt packages (the front
//     ends, fsid, the helper) are listed with their reasons.
//
// The rule on the architecture (archmap_test.go): the package map of
// docs/ARCHITECTURE.md names every package of ours with production code
// and, for each, exactly the packages of ours it imports directly.
//
// The rule on public text (publictext_test.go): no public sentence
// pinned in a golden file or script under a testdata directory (a
// report's or event's sentence fields, every line of a text golden,
// what a .txtar script expects on stdout or stderr) carries an internal
// error's text (an os or syscall operation before a path, an errno
// after a colon, a library's prefix, a prefix the module's own code puts
// before a %w) or a path of sandboxd's state. A testdata file of a kind
// the rule does not know fails it, until it is read or listed as an
// input. The marks themselves are internal/publictext's, which packages'
// tests also hold the reasons they build from real failures to.
//
// The rule on the packages' doc.go files (docs_test.go): every package
// of ours but a main program has a doc.go whose package comment says,
// once, which packages of ours its production files import directly, in
// a sentence the test reads and compares with the graph: "Of sandboxd's
// packages it imports" then "none", or "only" and the list ("only
// atomicfile, gitconfig and publicerr."; the list ends at ".", ";" or
// ":", and a remark in parentheses is no item). It may also say, in
// sentences where "must never import" is followed by a list, what the
// package must never import, directly or not; the test checks each like
// an import rule. There a package of ours is named relative to the
// module ("X/..." for X and everything under it), another by its import
// path, and openai-go, go-landlock, libseccomp-golang and "an HTTP
// client" as the import rules mean them. Any other "never import(s)",
// "imports nothing", "imports only" or "imports none" in a doc.go is a
// claim the test cannot check, and fails it (this package's doc.go
// excepted: it states the other packages' rules).
//
// Of sandboxd's packages it imports none (its tests import
// internal/publictext).
//
// A rule about a package that does not exist yet passes. To add a rule,
// add an entry to importRules (or a check beside the others) in
// guardrails_test.go, and a case to TestRulesCatch that proves it fires.
package guardrails
