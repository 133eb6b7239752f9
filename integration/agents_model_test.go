package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptedModel is a coding agent's model on the host's loopback, the
// only fake in the agent tests: it speaks the wire protocol the real
// agent speaks (Anthropic Messages for Claude Code, OpenAI Responses for
// Codex, OpenAI Chat Completions for pi's custom provider, all streamed
// as server-sent events), makes the tool calls the
// test scripted, and records every request so that a test can read what
// the agent told the model (the tool results).
type scriptedModel struct {
	url   string // the base URL, without /v1
	steps []step

	mu     sync.Mutex // guards bodies
	bodies []string   // every request body, in order
}

// toolCall is one tool call the model makes.
type toolCall struct {
	name  string         // Claude Code: Bash, Read; Codex: exec_command, apply_patch
	input map[string]any // the call's input (Codex: exec_command's arguments)
	patch string         // Codex's apply_patch: the patch, its freeform input
	// namespace is the namespace of a deferred tool Codex's tool_search
	// exposed (an MCP server's: mcp__NAME).
	namespace string
}

// step is the model's answer to a request that holds n tool results,
// for the script's n-th step: the calls to make, or none to end its
// turn with text. It reads the request (a step may wait for something
// the agent sends, such as a background task's notification).
type step func(body string) []toolCall

// calls is a step that makes the same calls whatever the request.
func calls(c ...toolCall) step { return func(string) []toolCall { return c } }

// bash is Claude Code's shell tool call.
func bash(command string) toolCall {
	return toolCall{name: "Bash", input: map[string]any{"command": command, "description": "scripted"}}
}

// write is Claude Code's Write tool call.
func write(file, content string) toolCall {
	return toolCall{name: "Write", input: map[string]any{"file_path": file, "content": content}}
}

// read is Claude Code's Read tool call.
func read(file string) toolCall {
	return toolCall{name: "Read", input: map[string]any{"file_path": file}}
}

// execCommand is Codex's shell tool call.
func execCommand(cmd string) toolCall {
	return toolCall{name: "exec_command", input: map[string]any{"cmd": cmd}}
}

// applyPatch is Codex's patch tool call, adding one file.
func applyPatch(file, line string) toolCall {
	return toolCall{name: "apply_patch", patch: "*** Begin Patch\n*** Add File: " + file + "\n+" + line + "\n*** End Patch\n"}
}

// newScriptedModel serves the script until the test ends.
func newScriptedModel(t *testing.T, steps ...step) *scriptedModel {
	t.Helper()
	m := &scriptedModel{steps: steps}
	srv := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(srv.Close)
	m.url = srv.URL
	return m
}

func (m *scriptedModel) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	m.mu.Lock()
	m.bodies = append(m.bodies, string(b))
	m.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/messages"):
		m.messages(w, b)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/responses"):
		m.responses(w, b)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/chat/completions"):
		m.chat(w, b)
	default:
		// Model lists and the like: an empty answer the agents accept.
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[],"models":[]}`)
	}
}

// next is the step's calls for a request holding n tool results.
func (m *scriptedModel) next(n int, body string) []toolCall {
	if n < len(m.steps) {
		return m.steps[n](body)
	}
	return nil
}

// sse writes one server-sent event and flushes it.
func sse(w http.ResponseWriter, event string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// messagesRequest is what the model reads of a Messages request.
type messagesRequest struct {
	Model    string `json:"model"`
	Tools    []struct{ Name string }
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// contentBlock is a block of a Messages message's content.
type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

func blocks(raw json.RawMessage) []contentBlock {
	var bs []contentBlock
	json.Unmarshal(raw, &bs)
	return bs
}

// messages answers Claude Code (POST /v1/messages, stream: true): a
// tool_use block per scripted call, its input streamed as JSON deltas.
func (m *scriptedModel) messages(w http.ResponseWriter, b []byte) {
	var req messagesRequest
	json.Unmarshal(b, &req)
	n := 0
	for _, msg := range req.Messages {
		for _, bl := range blocks(msg.Content) {
			if msg.Role == "user" && bl.Type == "tool_result" {
				n++
				break
			}
		}
	}
	var cs []toolCall
	if len(req.Tools) > 0 {
		cs = m.next(n, string(b))
	}
	startSSE(w)
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_e2e_%d", time.Now().UnixNano()), "type": "message", "role": "assistant", "model": req.Model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 10, "output_tokens": 1}}})
	stop := "end_turn"
	if len(cs) == 0 {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "DONE."}})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	}
	for i, c := range cs {
		stop = "tool_use"
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{
			"type": "tool_use", "id": callID("toolu", n, i), "name": c.name, "input": map[string]any{}}})
		in, _ := json.Marshal(c.input)
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 5}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

// callID names the i-th call of step n, so that a test can find its result.
func callID(prefix string, n, i int) string { return fmt.Sprintf("%s_e2e_%d_%d", prefix, n, i) }

// responsesItem is an item of a Responses request's input.
type responsesItem struct {
	Type   string          `json:"type"`
	CallID string          `json:"call_id"`
	Output json.RawMessage `json:"output"`
}

// responses answers Codex (POST /v1/responses, stream: true): one output
// item per scripted call, a function_call for exec_command and a
// custom_tool_call for apply_patch.
func (m *scriptedModel) responses(w http.ResponseWriter, b []byte) {
	var req struct {
		Model string          `json:"model"`
		Input []responsesItem `json:"input"`
	}
	json.Unmarshal(b, &req)
	n := 0
	for _, it := range req.Input {
		if it.Type == "function_call_output" || it.Type == "custom_tool_call_output" || it.Type == "tool_search_output" {
			n++
		}
	}
	var items []map[string]any
	for i, c := range m.next(n, string(b)) {
		id := callID("call", n, i)
		if c.name == "apply_patch" {
			items = append(items, map[string]any{"type": "custom_tool_call", "id": "ctc_" + id, "call_id": id, "name": c.name, "status": "completed", "input": c.patch})
			continue
		}
		if c.name == "tool_search" {
			items = append(items, map[string]any{"type": "tool_search_call", "id": "tsc_" + id, "call_id": id, "execution": "client", "status": "completed", "arguments": c.input})
			continue
		}
		args, _ := json.Marshal(c.input)
		item := map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": id, "name": c.name, "arguments": string(args), "status": "completed"}
		if c.namespace != "" {
			item["namespace"] = c.namespace
		}
		items = append(items, item)
	}
	if len(items) == 0 {
		items = append(items, map[string]any{"type": "message", "id": "msg_e2e", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": "DONE.", "annotations": []any{}}}})
	}
	resp := map[string]any{"id": fmt.Sprintf("resp_e2e_%d", time.Now().UnixNano()), "object": "response",
		"created_at": time.Now().Unix(), "status": "in_progress", "model": req.Model, "output": []any{}}
	startSSE(w)
	sse(w, "response.created", map[string]any{"type": "response.created", "response": resp})
	for i, it := range items {
		sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": i, "item": it})
		sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": i, "item": it})
	}
	resp["status"], resp["output"] = "completed", items
	resp["usage"] = map[string]any{"input_tokens": 10, "input_tokens_details": map[string]int{"cached_tokens": 0},
		"output_tokens": 5, "output_tokens_details": map[string]int{"reasoning_tokens": 0}, "total_tokens": 15}
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": resp})
}

// chatMessage is a message of a Chat Completions request.
type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
}

// chat answers pi (POST /v1/chat/completions, stream: true): a tool call
// per scripted call, its arguments streamed as one delta, in chunks
// with no event names and a final "[DONE]".
func (m *scriptedModel) chat(w http.ResponseWriter, b []byte) {
	var req struct {
		Model    string        `json:"model"`
		Messages []chatMessage `json:"messages"`
	}
	json.Unmarshal(b, &req)
	n := 0
	for _, msg := range req.Messages {
		if msg.Role == "tool" {
			n++
		}
	}
	id := fmt.Sprintf("chatcmpl_e2e_%d", time.Now().UnixNano())
	chunk := func(delta map[string]any, finish any) {
		data, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", data)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	startSSE(w)
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	cs := m.next(n, string(b))
	for i, c := range cs {
		args, _ := json.Marshal(c.input)
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": callID("call", n, i), "type": "function",
			"function": map[string]any{"name": c.name, "arguments": ""}}}}, nil)
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": string(args)}}}}, nil)
	}
	finish := "tool_calls"
	if len(cs) == 0 {
		chunk(map[string]any{"content": "DONE."}, nil)
		finish = "stop"
	}
	chunk(map[string]any{}, finish)
	usage, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{}, "usage": map[string]int{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
	fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", usage)
}

// requests are the bodies the agent sent so far.
func (m *scriptedModel) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.bodies...)
}

// result is what the agent told the model the i-th call of step n gave,
// from the first request that carries it: a tool_result's text (Claude
// Code) or a function or custom tool call's output (Codex). ok is false
// when no request carried it.
func (m *scriptedModel) result(n, i int) (text string, ok bool) {
	claude, codex := callID("toolu", n, i), callID("call", n, i)
	for _, b := range m.requests() {
		var req struct {
			messagesRequest
			Input []responsesItem `json:"input"`
		}
		if json.Unmarshal([]byte(b), &req) != nil {
			continue
		}
		var chat struct {
			Messages []chatMessage `json:"messages"`
		}
		json.Unmarshal([]byte(b), &chat)
		for _, msg := range chat.Messages {
			if msg.Role == "tool" && msg.ToolCallID == codex {
				return contentText(msg.Content), true
			}
		}
		for _, msg := range req.Messages {
			for _, bl := range blocks(msg.Content) {
				if bl.Type == "tool_result" && bl.ToolUseID == claude {
					return contentText(bl.Content), true
				}
			}
		}
		for _, it := range req.Input {
			if strings.HasSuffix(it.Type, "_call_output") && it.CallID == codex {
				return contentText(it.Output), true
			}
		}
	}
	return "", false
}

// contentText is a tool result's text: a string, or the text of each
// block of a list.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []string
	for _, bl := range blocks(raw) {
		parts = append(parts, bl.Text)
	}
	return strings.Join(parts, "\n")
}
