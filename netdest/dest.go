package netdest

import (
	"errors"
	"net/netip"
)

// Dest is a normalised destination: what a rule matches, a reviewer
// sees, the report shows and the proxy dials.
type Dest struct {
	// Host is a lowercase ASCII name (IDNA labels in punycode, one
	// trailing dot removed) or, for an address, its canonical text
	// (IPv4 dotted quad, IPv6 RFC 5952, no brackets, no zone). Every
	// loopback spelling (127.1, 2130706433, 0x7f000001, ::1,
	// ::ffff:127.0.0.1, 0.0.0.0, ::, localhost, *.localhost) is 127.0.0.1.
	Host string
	// Port is 1-65535.
	Port uint16
	// Addr is the address when Host is one (invalid for names).
	Addr netip.Addr
}

// ErrInvalid wraps every parse error (errors.Is).
var ErrInvalid = errors.New("netdest: invalid destination")
