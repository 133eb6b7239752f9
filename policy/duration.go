package policy

import (
	"fmt"
	"time"
)

// Duration is a length of time. In policy files it is a string Go's
// time.ParseDuration reads ("300s", "5m"); a bare TOML integer is seconds.
type Duration time.Duration

// String formats d as time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes d as a duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a duration string, or an integer number of seconds.
func (d *Duration) UnmarshalText(b []byte) error {
	s := string(b)
	if v, err := time.ParseDuration(s); err == nil {
		*d = Duration(v)
		return nil
	}
	var n int64
	if _, err := fmt.Sscanf(s, "%d", &n); err == nil && fmt.Sprint(n) == s {
		*d = Duration(time.Duration(n) * time.Second)
		return nil
	}
	return fmt.Errorf("invalid duration %q (want e.g. \"300s\" or \"5m\")", s)
}
