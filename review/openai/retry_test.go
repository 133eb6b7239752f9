package openai

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name, header, value string
		want                time.Duration
		ok                  bool
	}{
		{"seconds", "Retry-After", "2", 2 * time.Second, true},
		{"fractional", "Retry-After", "0.5", 500 * time.Millisecond, true},
		{"date", "Retry-After", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"past date", "Retry-After", now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"ms", "Retry-After-Ms", "250", 250 * time.Millisecond, true},
		{"negative", "Retry-After", "-3", 0, false},
		{"absurd", "Retry-After", "1e30", 0, false},
		{"garbage", "Retry-After", "soon", 0, false},
		{"absent", "X-Other", "1", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			h.Set(tc.header, tc.value)
			got, ok := retryAfter(h, now)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("retryAfter(%s: %s) = %v, %v; want %v, %v", tc.header, tc.value, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	prev := time.Duration(0)
	for n := 1; n <= 40; n++ {
		d := backoff(n)
		if d <= 0 || d > backoffMax {
			t.Fatalf("backoff(%d) = %v", n, d)
		}
		if n <= 3 && d < prev {
			t.Errorf("backoff(%d) = %v shrank from %v", n, d, prev)
		}
		prev = d
	}
}

func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "1.5", "Wed, 21 Oct 2015 07:28:00 GMT", "NaN", "Inf", "99999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{}
		h.Set("Retry-After", v)
		h.Set("Retry-After-Ms", v)
		if d, ok := retryAfter(h, time.Now()); d < 0 || (!ok && d != 0) {
			t.Fatalf("retryAfter(%q) = %v, %v", v, d, ok)
		}
	})
}
