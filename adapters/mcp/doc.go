// Package mcp is `sandboxd mcp`: a Model Context Protocol server (with
// github.com/modelcontextprotocol/go-sdk) whose one tool, bash, runs a
// command through session.Runner exactly as `sandboxd run` would, in the
// workspace fixed when the server started, with review, grants and
// retry. The server is a long-lived process of the caller's own, one per
// client; one connection is one sandboxd session unless the front end
// names one.
//
// A call's arguments are untrusted input, decoded strictly (DecodeArgs).
// Every outcome of a call is a tool result, never a protocol error: the
// output (each stream bounded to its head and tail, Bounded), the exit
// status and each boundary with its decision and who decided, as
// structured content under an output schema and as text; a denied
// boundary, a reviewer's fault, a path the persistence rules moved away
// and a run sandboxd could not do are error results. A call's intent is the agent's own account, shown to
// the model reviewer as such (session.Job.Stated), never as the user's
// request. Cancelling a call ends every process of its command.
//
// Of sandboxd's packages it imports only broker, session and termfilter.
package mcp
