// Package openai sends one boundary review to an OpenAI-compatible Chat
// Completions endpoint (OpenAI, vLLM, Ollama, LiteLLM, llama.cpp server)
// and returns the assistant's text. It is the only package of sandboxd that
// imports github.com/openai/openai-go; nothing else may, so the SDK's
// behaviour (retries, environment defaults, redirects) is pinned here once.
//
// What it owns: the wire call, structured output (json_schema, falling back
// to json_object once per Client when a server refuses it), its own retry
// loop bounded by the caller's deadline, a bound on the response body, and
// the classification of every failure as a *Fault.
//
// What it must never do:
//   - decide or grant: it returns text; the review package parses it into a
//     verdict and the broker alone issues grants;
//   - return content it could not fully vouch for: every fault (timeout,
//     refusal, truncation, oversized or non-JSON body, empty answer, content
//     the caller's validate rejects) is an error, and callers deny on error;
//   - read the process's environment: not OPENAI_* (the SDK's NewClient
//     would: the endpoint and key are only what Config says), nor the
//     proxy variables (Config.Proxy is the caller's; in a daemon the
//     process's environment is root's), nor open a connection but through
//     Config.Dial when it is set (a daemon's connects as the caller);
//   - follow a redirect to another origin, or log the API key or a prompt
//     (debug logs carry the fault class and HTTP status only);
//   - import any other package of sandboxd's but reviewurl, the one rule
//     for an endpoint's form.
//
// Of sandboxd's packages it imports only reviewurl.
package openai
