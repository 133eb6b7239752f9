package netdest

import (
	"net/netip"
	"strings"
)

// parseIPv4 parses every inet_aton spelling of an IPv4 address: one to
// four dot-separated parts, each decimal, 0x-prefixed hex or
// 0-prefixed octal, the last part filling the remaining bytes
// ("127.1" is 127.0.0.1, "2130706433" is too). These are the
// spellings that libc, curl and browsers dial, so they must all name
// the address they reach. It is stricter than inet_aton where that is
// lenient: an empty part, a bare "0x", a sign, trailing junk or a
// value out of range fails.
func parseIPv4(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var vals [4]uint64
	for i, p := range parts {
		v, ok := parseIPv4Part(p)
		if !ok {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	n := len(parts)
	// All but the last part are one byte; the last fills the rest.
	for i := 0; i < n-1; i++ {
		if vals[i] > 0xff {
			return netip.Addr{}, false
		}
	}
	lastBits := uint(8 * (5 - n))
	if vals[n-1] >= 1<<lastBits {
		return netip.Addr{}, false
	}
	var u uint64
	for i := 0; i < n-1; i++ {
		u |= vals[i] << (24 - 8*uint(i))
	}
	u |= vals[n-1]
	return netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)}), true
}

// parseIPv4Part parses one inet_aton part. Values are capped just above
// 32 bits so that long inputs cannot overflow.
func parseIPv4Part(p string) (uint64, bool) {
	base := uint64(10)
	switch {
	case p == "":
		return 0, false
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, p = 16, p[2:]
		if p == "" {
			return 0, false
		}
	case len(p) >= 2 && p[0] == '0':
		base, p = 8, p[1:]
	}
	var v uint64
	for i := 0; i < len(p); i++ {
		d, ok := digitValue(p[i])
		if !ok || d >= base {
			return 0, false
		}
		v = v*base + d
		if v > 0xffffffff {
			return 0, false
		}
	}
	return v, true
}

func digitValue(c byte) (uint64, bool) {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0'), true
	case c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}
