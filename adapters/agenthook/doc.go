// Package agenthook is what runs when a coding agent calls sandboxd from
// one of its own extension points: Claude Code's and Codex's PreToolUse
// hooks and Claude Code's shell prefix. It reads the agent's hook
// payload (Decode), finds the request the person last typed in the
// agent's transcript (Intent), and says what the agent must run instead
// of a shell command (Rewrite) or how a shell script of Claude Code's
// ends (SplitClaudeScript).
//
// Every input here comes from an agent or its transcript and is read
// with a bound; every failure is an error the caller turns into a
// blocked command, never a command run bare. The package runs nothing
// and decides nothing about a command: sandboxd run does.
//
// Of sandboxd's packages it imports only atomicfile, pathtree and persist.
package agenthook
