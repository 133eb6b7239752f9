package openai

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const (
	backoffBase = 250 * time.Millisecond
	backoffMax  = 4 * time.Second
)

// retryAfter reads the wait a 429 or 5xx asks for: retry-after-ms (OpenAI's),
// else Retry-After in seconds or as an HTTP date. ok is false when neither
// is present and parsable; a date in the past is a zero wait.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms <= 1e12 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if !(s >= 0 && s <= 1e9) { // also refuses NaN
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// backoff is the wait before retry n (1-based) when the server named none:
// exponential from 250 ms, capped, less up to a quarter of jitter.
func backoff(n int) time.Duration {
	d := backoffMax
	if n < 6 {
		d = min(backoffBase<<(n-1), backoffMax)
	}
	return d - rand.N(d/4+1)
}
