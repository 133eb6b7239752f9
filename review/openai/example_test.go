package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sandboxd/sandboxd/review/openai"
)

func ExampleClient_Complete() {
	// A local stand-in for an OpenAI-compatible server (Ollama, vLLM, ...).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1767225600, "model": "llama3",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": `{"outcome":"deny"}`, "refusal": nil}}},
			"usage": map[string]any{"prompt_tokens": 90, "completion_tokens": 6, "total_tokens": 96},
		})
	}))
	defer srv.Close()

	c, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "llama3", StructuredOutput: "json_object"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Complete(ctx, "You review one sandbox boundary.", "write /etc/passwd", func(s string) error {
		if !json.Valid([]byte(s)) {
			return errors.New("not JSON")
		}
		return nil
	})
	var f *openai.Fault
	if errors.As(err, &f) {
		fmt.Println("deny:", f.Class) // fail closed on every fault
		return
	}
	fmt.Println(res.Content, res.Mode, res.Attempts, res.PromptTokens)
	// Output: {"outcome":"deny"} json_object 1 90
}
