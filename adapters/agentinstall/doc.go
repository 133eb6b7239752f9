// Package agentinstall wires sandboxd into a coding agent's own
// configuration and takes it out again: `sandboxd hook install`,
// `status` and `uninstall` for Claude Code and Codex.
//
// It merges into the user's files and never clobbers them: a file it
// cannot read as it must (not JSON or TOML, a value of another type than
// the one it edits, a setting of the user's it would have to overwrite)
// is an error naming the file, and then nothing is written. JSON files
// keep their keys' order and every key the installer does not touch;
// TOML files are edited as text, so their comments stay. What install
// added, and each value it replaced, is recorded in the caller's state
// directory (statedir.Layout.Install); uninstall removes exactly that,
// restores the values it replaced while they are still the installer's,
// and names what the user changed since.
//
// The commands the agents run come from agenthook (ClaudePrefix,
// ClaudeHookCommand, CodexHookCommand); this package never spells them.
// Claude Code's shell prefix is a link to sandboxd in the caller's state
// (statedir.Layout.Bin), which install makes and uninstall removes.
// Codex runs a user hook only when config.toml holds its trust hash,
// which codexTrustHash computes as Codex 0.171 does (a test checks it
// against the real codex).
//
// Of sandboxd's packages it imports only adapters/agenthook, atomicfile,
// persist, publicerr, ruletext and statedir.
package agentinstall
