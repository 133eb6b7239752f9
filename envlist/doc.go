// Package envlist reads and edits environment lists: KEY=VALUE strings
// as exec.Cmd.Env and execve take them. Every place sandboxd reads a
// caller's variable or edits the environment a command gets (the
// session's plan, the supervisor, the helper) goes through it, so that
// which entry is read (the last of a name, as os/exec keeps the last of
// duplicates) and what an edit removes are decided once. Set leaves one
// entry of its name, so a command sees one value whatever reads it.
//
// It edits lists, never the environment of the process running
// sandboxd. Of sandboxd's packages it imports none (internal/guardrails
// checks it).
package envlist
