// Package session owns one agent command from start to report: it plans
// a run from a caller's description (never from the sandboxd process's
// own environment, working directory or uid) and a job, runs it in the
// sandbox, reviews every boundary through the broker, consumes the
// grants it was given and retries the same command once per round with
// exactly those exceptions, commits the final attempt's layer, and
// returns the report (the --report JSON contract, Report).
//
// Every front end calls Runner.Run: `sandboxd run` (and through it the
// agents' hooks), the MCP server (adapters/mcp) and the daemon (`sandboxd
// serve`, package daemon). It never prints: progress
// reaches the front end as Events (text on stderr for `run`, NDJSON for a
// daemon, a tool result for MCP). A Runner is safe for concurrent use;
// each Run owns its own plan, broker and report. Every connection it
// opens for a caller (the proxy's upstream dials and resolver, the model
// reviewer's calls and their proxy) is made as that caller (dial.go:
// fsid.Dialer) and never reaches sandboxd's own listeners
// (Config.Reserved).
//
// Of sandboxd's packages it imports only boundary, broker, cachedir,
// credfile, credstore, envlist, evidence, fsid, grants, intents, layer,
// netdest, netproxy, overrides, pathtree, persist, policy, publicerr,
// reviewurl, ruletext, sandbox, statedir and suggest. Reviewers come in through the
// Job's slots: it must never import review/... or openai-go. It starts
// the model reviewer's evidence reader (package evidence) in a read-only
// sandbox of the run's own Spec: the only way a reviewer reads a file.
package session
