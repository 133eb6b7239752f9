package stats

import (
	"sort"
	"time"
)

// Sorted returns a sorted copy of d.
func Sorted(d []time.Duration) []time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

// Median is the 50th percentile of d.
func Median(d []time.Duration) time.Duration { return Pct(d, 50) }

// Pct is the p-th percentile of d (nearest rank, rounding down).
func Pct(d []time.Duration, p int) time.Duration {
	s := Sorted(d)
	return s[(len(s)-1)*p/100]
}
