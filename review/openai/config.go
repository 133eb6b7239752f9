package openai

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/sandboxd/sandboxd/reviewurl"
)

// Structured-output modes.
const (
	ModeAuto       = "auto"
	ModeJSONSchema = "json_schema"
	ModeJSONObject = "json_object"
)

const (
	defaultMaxOutputTokens = 512
	defaultMaxBody         = 1 << 20
	maxMaxBody             = 64 << 20
	schemaName             = "verdict"
)

// Config says which endpoint and model review, and how. The zero values of
// the optional fields are documented defaults; New rejects the rest.
type Config struct {
	BaseURL          string         // required, e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1
	Model            string         // required
	APIKey           string         // may be empty (local servers); sent only as a Bearer header
	MaxOutputTokens  int            // max_completion_tokens; 0: 512
	ReasoningEffort  string         // "", "low", "medium", "high" ("" sends none)
	StructuredOutput string         // "auto" (""), "json_schema" or "json_object"
	Schema           map[string]any // the verdict's JSON schema, sent as a strict json_schema named "verdict"
	MaxBody          int64          // largest response body read (0: 1 MiB); larger is a fault
	HTTPClient       *http.Client   // nil: a client of its own, with Dial and Proxy
	// Dial makes every connection the client of its own opens, to the
	// endpoint or to its proxy (nil: a net.Dialer's). A daemon gives it
	// the caller's identity (fsid.Dialer), so that a host firewall sees
	// the caller's connections, and refuses its own listeners there.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Proxy names the proxy for a request, as the caller's environment
	// says (http.ProxyFromEnvironment's rules over the caller's HTTP_PROXY,
	// HTTPS_PROXY and NO_PROXY); nil: none. The process's own environment
	// is never read: in a daemon it is not the caller's.
	Proxy  func(*http.Request) (*url.URL, error)
	Logger *slog.Logger // nil: no logs; debug lines carry only fault class and status
}

// Client sends reviews to one endpoint; it is safe for concurrent use.
type Client struct {
	chat      openai.ChatCompletionService
	http      *http.Client
	model     string
	maxTokens int64
	effort    string
	mode      string // configured mode
	schema    map[string]any
	log       *slog.Logger
	// objectOnly is set once "auto" learned that the endpoint refuses
	// json_schema; from then on every request goes as json_object.
	objectOnly atomic.Bool
}

// New checks cfg and builds a Client. It reads no environment variable
// (OPENAI_API_KEY, OPENAI_BASE_URL, ... are ignored) and sends nothing.
func New(cfg Config) (*Client, error) {
	if err := checkConfig(&cfg); err != nil {
		return nil, err
	}
	hc := httpClient(cfg, cfg.MaxBody)
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // Complete retries, within the deadline
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{
		// The service, not openai.NewClient: NewClient would read OPENAI_*
		// from the environment and could send a key to the wrong host.
		chat:      openai.NewChatCompletionService(opts...),
		http:      hc,
		model:     cfg.Model,
		maxTokens: int64(cfg.MaxOutputTokens),
		effort:    cfg.ReasoningEffort,
		mode:      cfg.StructuredOutput,
		schema:    cfg.Schema,
		log:       log,
	}, nil
}

// CloseIdleConnections closes the kept-alive connections of the client's
// transport (for shutdown and tests).
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// checkConfig validates cfg and fills its defaults.
func checkConfig(cfg *Config) error {
	if why := reviewurl.Check(cfg.BaseURL); why != "" {
		return configFault("%s", why)
	}
	if cfg.Model == "" {
		return configFault("model is required")
	}
	if cfg.MaxOutputTokens < 0 {
		return configFault("max output tokens %d is negative", cfg.MaxOutputTokens)
	}
	if cfg.MaxOutputTokens == 0 {
		cfg.MaxOutputTokens = defaultMaxOutputTokens
	}
	switch cfg.ReasoningEffort {
	case "", "low", "medium", "high":
	default:
		return configFault("reasoning effort %q is not one of low, medium, high", cfg.ReasoningEffort)
	}
	switch cfg.StructuredOutput {
	case "":
		cfg.StructuredOutput = ModeAuto
	case ModeAuto, ModeJSONSchema, ModeJSONObject:
	default:
		return configFault("structured output %q is not auto, json_schema or json_object", cfg.StructuredOutput)
	}
	if cfg.StructuredOutput == ModeJSONSchema && len(cfg.Schema) == 0 {
		return configFault("structured output json_schema needs a schema")
	}
	if len(cfg.Schema) > 0 {
		// A copy of our own: the caller may reuse its map, and a schema that
		// cannot be encoded is a configuration error, not a request's.
		b, err := json.Marshal(cfg.Schema)
		if err != nil {
			return configFault("schema does not encode as JSON: %w", err)
		}
		cfg.Schema = nil
		if err := json.Unmarshal(b, &cfg.Schema); err != nil {
			return configFault("schema does not decode: %w", err)
		}
	}
	if cfg.MaxBody < 0 || cfg.MaxBody > maxMaxBody {
		return configFault("max body %d is outside 0..%d", cfg.MaxBody, maxMaxBody)
	}
	if cfg.MaxBody == 0 {
		cfg.MaxBody = defaultMaxBody
	}
	return nil
}
