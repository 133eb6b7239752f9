package netproxy

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/netdest"
)

// refusal is why a connection is not forwarded, and what the client is
// told: a short text/plain body safe to show the command.
type refusal struct {
	status   int    // 403, 407, 400 or 502
	decision string // "deny", or "error" when an allowed destination failed
	source   string // who decided ("policy", "reviewer", "auth", ...)
	dest     netdest.Dest
	line     string // the second line: who decided and why
}

// refusalError carries a refusal out of a dialer.
type refusalError struct{ r *refusal }

func (e *refusalError) Error() string { return "netproxy: refused: " + e.r.source }

const retryLine = "Retrying another way (another proxy, a raw connection, another name for the same host) will be denied too."

func deniedRefusal(dest netdest.Dest, v Verdict) *refusal {
	src := sourceKey(v.Source)
	reason := clean(v.Reason, 300)
	var line string
	switch src {
	case "error":
		line = "The reviewer could not decide (error)"
	case "reviewer":
		line = "Denied by the reviewer"
	case "human":
		line = "Denied by a person"
	case "client":
		line = "Denied by a person's answer relayed by a client of the daemon (client)"
	case "page":
		line = "Denied by a person on the approvals page (page)"
	case "policy":
		line = "Denied by policy"
	case "hard-deny":
		line = "Denied by a rule that cannot be overridden (hard-deny)"
	case "no-reviewer":
		line = "No reviewer was available to decide (no-reviewer)"
	case "circuit-breaker":
		line = "Denied because too many recent requests were denied (circuit-breaker)"
	default:
		line = "Denied (" + src + ")"
	}
	if reason != "" {
		line += ": " + reason
	}
	return &refusal{status: http.StatusForbidden, decision: "deny", source: src, dest: dest, line: line}
}

func timeoutRefusal(dest netdest.Dest, hold time.Duration) *refusal {
	return &refusal{status: http.StatusForbidden, decision: "deny", source: "timeout", dest: dest,
		line: "No decision was made in time (waited " + hold.String() + ")."}
}

func unreachableRefusal(dest netdest.Dest, why string) *refusal {
	return &refusal{status: http.StatusBadGateway, decision: "error", source: "unreachable", dest: dest, line: why}
}

func malformedRefusal(err error) *refusal {
	return &refusal{status: http.StatusBadRequest, decision: "deny", source: "malformed", line: clean(err.Error(), 200)}
}

func authRefusal() *refusal {
	return &refusal{status: http.StatusProxyAuthRequired, decision: "deny", source: "auth"}
}

// sourceKey keeps a decider's Source usable as a header and counter
// value: lowercase letters, digits and '-', never empty.
func sourceKey(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' {
			b.WriteRune(c)
		}
		if b.Len() >= 32 {
			break
		}
	}
	if b.Len() == 0 {
		return "unknown"
	}
	return b.String()
}

// clean strips control characters and invalid UTF-8 and caps length,
// so that nothing from a request or a decider can shape the body.
func clean(s string, limit int) string {
	s = strings.ToValidUTF8(s, "?")
	var b strings.Builder
	n := 0
	for _, c := range s {
		if c < ' ' || c == 0x7f || (c >= 0x80 && c < 0xa0) || c == '\u2028' || c == '\u2029' {
			c = ' '
		}
		if n >= limit {
			b.WriteString("...")
			break
		}
		b.WriteRune(c)
		n++
	}
	return strings.TrimSpace(b.String())
}

func (r *refusal) body() string {
	switch r.status {
	case http.StatusProxyAuthRequired:
		return "sandboxd: proxy authentication required.\n"
	case http.StatusBadRequest:
		return "sandboxd refused a malformed proxy request: " + strings.TrimPrefix(r.line, "netproxy: ") + "\n"
	case http.StatusBadGateway:
		return fmt.Sprintf("sandboxd allowed the connection to %s but could not reach it: %s.\n", r.dest, r.line)
	}
	return fmt.Sprintf("sandboxd denied the connection to %s.\n%s\n%s\n", r.dest, r.line, retryLine)
}

// response builds the refusal's HTTP response (refuse counts it).
func (r *refusal) response(req *http.Request) *http.Response {
	body := r.body()
	if !utf8.ValidString(body) {
		body = strings.ToValidUTF8(body, "?")
	}
	h := make(http.Header)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	h.Set("X-Sandboxd-Decision", r.decision+"; source="+r.source)
	if r.status == http.StatusProxyAuthRequired {
		h.Set("Proxy-Authenticate", `Basic realm="sandboxd"`)
	}
	closeConn := r.status == http.StatusBadRequest || (req != nil && req.Method == http.MethodConnect)
	if closeConn {
		h.Set("Connection", "close")
	}
	return &http.Response{
		StatusCode:    r.status,
		Status:        fmt.Sprintf("%d %s", r.status, http.StatusText(r.status)),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Close:         closeConn,
		Request:       req,
	}
}
