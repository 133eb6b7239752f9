package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Fault classes, one per kind of failure; they label counters and the report.
const (
	ClassTimeout     = "timeout"      // ctx's deadline passed (or ctx was cancelled)
	ClassAuth        = "auth"         // HTTP 401 or 403
	ClassRefusal     = "refusal"      // the model refused (refusal set, or finish_reason content_filter)
	ClassTruncated   = "truncated"    // finish_reason "length"
	ClassOversized   = "oversized"    // the response body passed MaxBody
	ClassContentType = "content_type" // a 2xx answer not labelled application/json
	ClassEmpty       = "empty"        // no choices, or empty content
	ClassHTTPStatus  = "http_status"  // any other non-2xx status (4xx, refused redirect)
	ClassServer      = "server"       // 5xx or 429, after the retries the deadline allowed
	ClassConnection  = "connection"   // no HTTP answer (dial, reset, TLS), after retries
	ClassMalformed   = "malformed"    // validate rejected the content, after retries
	ClassConfig      = "config"       // Config or Complete's arguments are unusable
)

// Fault is every failure New and Complete return. Class is one of the
// Class constants; Status is the HTTP status when there was one; Err is the
// internal cause (for logs, never shown: it may name the endpoint).
type Fault struct {
	Class  string
	Status int
	Err    error
}

// Error returns a short sentence that is safe to show: it never includes
// Err's text, the endpoint, the API key or any prompt or content.
func (f *Fault) Error() string {
	switch f.Class {
	case ClassTimeout:
		return "model reviewer: no answer before the review's deadline"
	case ClassAuth:
		return fmt.Sprintf("model reviewer: the endpoint refused the credentials (HTTP %d)", f.Status)
	case ClassRefusal:
		return "model reviewer: the model refused to answer"
	case ClassTruncated:
		return "model reviewer: the answer was cut off at the token limit"
	case ClassOversized:
		return "model reviewer: the response was larger than allowed"
	case ClassContentType:
		return "model reviewer: the response was not JSON"
	case ClassEmpty:
		return "model reviewer: the response had no answer"
	case ClassHTTPStatus:
		return fmt.Sprintf("model reviewer: the endpoint answered HTTP %d", f.Status)
	case ClassServer:
		return fmt.Sprintf("model reviewer: the endpoint kept failing (HTTP %d)", f.Status)
	case ClassConnection:
		return "model reviewer: could not reach the endpoint"
	case ClassMalformed:
		return "model reviewer: the answer was not a valid verdict"
	case ClassConfig:
		return "model reviewer: invalid configuration"
	default:
		return "model reviewer: failed"
	}
}

// Unwrap returns the internal cause.
func (f *Fault) Unwrap() error { return f.Err }

// FaultClass is f's class (one of the Class constants), for a reviewer
// that counts faults by class without importing this package.
func (f *Fault) FaultClass() string { return f.Class }

// Sentinel causes raised by this package's transport; classify maps them.
var (
	errOversized   = errors.New("response body exceeds the limit")
	errContentType = errors.New("response content type is not application/json")
)

// redirectError is a redirect the client refused to follow.
type redirectError struct{ status int }

func (e *redirectError) Error() string {
	return fmt.Sprintf("redirect (HTTP %d) to another origin refused", e.status)
}

func configFault(format string, args ...any) *Fault {
	return &Fault{Class: ClassConfig, Err: fmt.Errorf("openai: "+format, args...)}
}

// classifyTransport classifies an error that came with no usable HTTP
// status: the body guards, a refused redirect, a 2xx body that is not a
// chat completion, the deadline, or the network.
func classifyTransport(ctx context.Context, err error) *Fault {
	var (
		re  *redirectError
		se  *json.SyntaxError
		ute *json.UnmarshalTypeError
	)
	switch {
	case errors.Is(err, errOversized):
		return &Fault{Class: ClassOversized, Err: err}
	case errors.Is(err, errContentType):
		return &Fault{Class: ClassContentType, Err: err}
	case errors.As(err, &re):
		return &Fault{Class: ClassHTTPStatus, Status: re.status, Err: err}
	case errors.As(err, &se) || errors.As(err, &ute):
		return &Fault{Class: ClassMalformed, Err: err}
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return &Fault{Class: ClassTimeout, Err: err}
	default:
		return &Fault{Class: ClassConnection, Err: err}
	}
}

// classifyStatus classifies a non-2xx HTTP status.
func classifyStatus(status int, err error) *Fault {
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &Fault{Class: ClassAuth, Status: status, Err: err}
	case status == http.StatusTooManyRequests || status >= 500:
		return &Fault{Class: ClassServer, Status: status, Err: err}
	default:
		return &Fault{Class: ClassHTTPStatus, Status: status, Err: err}
	}
}

// retryable reports whether another attempt may cure f.
func retryable(f *Fault) bool {
	switch f.Class {
	case ClassServer, ClassConnection, ClassMalformed:
		return true
	}
	return false
}
