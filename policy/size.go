package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes. In policy files it is written as a string: an
// integer with an optional unit B, KiB, MiB, GiB, TiB (K, M, G, T are the
// same powers of 1024; KB, MB, GB, TB are powers of 1000), e.g. "8GiB". A
// bare TOML integer is read as a number of bytes.
type Size int64

// Binary size units.
const (
	// KiB is 1024 bytes.
	KiB Size = 1 << 10
	// MiB is 1024 KiB.
	MiB Size = 1 << 20
	// GiB is 1024 MiB.
	GiB Size = 1 << 30
	// TiB is 1024 GiB.
	TiB Size = 1 << 40
)

// sizeUnit returns the multiplier of a unit suffix.
func sizeUnit(u string) (int64, bool) {
	switch u {
	case "", "B":
		return 1, true
	case "K", "KiB":
		return 1 << 10, true
	case "M", "MiB":
		return 1 << 20, true
	case "G", "GiB":
		return 1 << 30, true
	case "T", "TiB":
		return 1 << 40, true
	case "KB":
		return 1e3, true
	case "MB":
		return 1e6, true
	case "GB":
		return 1e9, true
	case "TB":
		return 1e12, true
	}
	return 0, false
}

// ParseSize parses a size string such as "8GiB", "512M" or "1000000" (see
// Size for the syntax). Spaces around the number and the unit are allowed.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("invalid size %q: want an integer with an optional unit, e.g. \"8GiB\"", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q: number out of range", s)
	}
	unit := strings.TrimSpace(t[i:])
	mult, ok := sizeUnit(unit)
	if !ok {
		return 0, fmt.Errorf("invalid size %q: unknown unit %q (use B, KiB, MiB, GiB, TiB, K, M, G, T, KB, MB, GB or TB)", s, unit)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("invalid size %q: too large", s)
	}
	return Size(n * mult), nil
}

// String formats the size with the largest binary unit that divides it
// exactly ("8GiB", "1536KiB"), or in bytes ("1000B").
func (s Size) String() string {
	if s > 0 {
		for _, u := range []struct {
			name string
			mult Size
		}{{"TiB", TiB}, {"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}} {
			if s%u.mult == 0 {
				return strconv.FormatInt(int64(s/u.mult), 10) + u.name
			}
		}
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}

// MarshalText implements encoding.TextMarshaler using String.
func (s Size) MarshalText() ([]byte, error) {
	return []byte(s.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler using ParseSize.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
