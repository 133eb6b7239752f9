package netdest

import (
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// maxInput bounds every string this package is asked to parse. A
// valid name is at most 253 bytes of ASCII, but IDNA input may be
// longer (UTF-8, characters the mapping deletes), so the bound is
// generous; it only exists so that hostile input cannot make the
// IDNA mapping or the error messages arbitrarily expensive.
const maxInput = 1024

// idnaProfile is the strict UTS #46 lookup profile (non-transitional,
// STD3 ASCII rules, hyphen, joiner and Bidi checks, DNS lengths). It is
// built once and never modified: a Profile is read-only after New.
var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.Transitional(false),
	idna.ValidateLabels(true),
	idna.CheckHyphens(true),
	idna.CheckJoiners(true),
	idna.BidiRule(),
	idna.StrictDomainName(true),
	idna.VerifyDNSLength(true),
)

// parseError is every error this package returns. It names what was
// being parsed and why it was refused, and unwraps to ErrInvalid.
type parseError struct {
	what  string // "destination", "host", "port", "pattern"
	input string
	why   string
}

func (e *parseError) Error() string {
	in := e.input
	if len(in) > 80 {
		// Keep messages short even for hostile input; %q below
		// makes the truncation point harmless.
		in = in[:80] + "..."
	}
	return "netdest: invalid " + e.what + " " + strconv.Quote(in) + ": " + e.why
}

func (e *parseError) Unwrap() error { return ErrInvalid }

func invalid(what, input, why string) error {
	return &parseError{what: what, input: input, why: why}
}

// ParseHostPort parses "host:port", a CONNECT authority. The host is a
// name, an IPv4 address in any inet_aton spelling, or a bracketed IPv6
// address ("[2001:db8::1]:443"); an unbracketed IPv6 address is refused
// because its last group could be read as the port. The port is
// required and parsed by ParsePort. The host is normalised as
// ParseHost describes.
func ParseHostPort(s string) (Dest, error) {
	if s == "" {
		return Dest{}, invalid("destination", s, "empty")
	}
	if len(s) > maxInput {
		return Dest{}, invalid("destination", s, "too long")
	}
	host, port, err := splitHostPort(s)
	if err != nil {
		return Dest{}, err
	}
	p, err := ParsePort(port)
	if err != nil {
		return Dest{}, err
	}
	return ParseHost(host, p)
}

// splitHostPort splits s at the port colon. A bracketed host keeps its
// brackets so that ParseHost insists it is IPv6.
func splitHostPort(s string) (host, port string, err error) {
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", invalid("destination", s, "missing ']'")
		}
		rest := s[end+1:]
		if rest == "" {
			return "", "", invalid("destination", s, "missing port")
		}
		if rest[0] != ':' {
			return "", "", invalid("destination", s, "expected ':' after ']'")
		}
		return s[:end+1], rest[1:], nil
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", "", invalid("destination", s, "missing port")
	}
	if strings.IndexByte(s[:i], ':') >= 0 {
		return "", "", invalid("destination", s, "an IPv6 address with a port must be bracketed")
	}
	return s[:i], s[i+1:], nil
}

// ParsePort parses a decimal port strictly: ASCII digits only (no
// sign, no spaces, no "0x"), 1-65535, and no leading zero ("0443" is
// refused), so that every port has exactly one spelling and no reader
// can take it for octal.
func ParsePort(s string) (uint16, error) {
	if s == "" {
		return 0, invalid("port", s, "empty")
	}
	if len(s) > 5 {
		return 0, invalid("port", s, "must be 1-65535")
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, invalid("port", s, "must be decimal digits only")
		}
		n = n*10 + int(c-'0')
	}
	if s[0] == '0' && len(s) > 1 {
		return 0, invalid("port", s, "leading zeros are not allowed")
	}
	if n < 1 || n > 65535 {
		return 0, invalid("port", s, "must be 1-65535")
	}
	return uint16(n), nil
}

// ParseHost normalises host (no port) and pairs it with port, which
// must be 1-65535.
//
// Normalisation, so that one destination has one spelling:
//   - An IPv6 address may be bracketed or not; a zone ("fe80::1%eth0")
//     is refused; an IPv4-mapped address (::ffff:a.b.c.d) is unmapped
//     to its IPv4 address; Host is the RFC 5952 text.
//   - A name is mapped with the strict IDNA lookup profile (UTS #46,
//     non-transitional, STD3 rules, hyphen/joiner/Bidi checks) to
//     lowercase ASCII with punycode ("xn--") labels. Exactly one
//     trailing dot is removed ("a.b..", "." are refused). Every label
//     must be 1-63 letters, digits or hyphens (no leading or trailing
//     hyphen, and, by CheckHyphens, no "--" in positions 3-4 except
//     in xn-- labels); the name at most 253 bytes. Underscores are
//     refused: "_dmarc"-style names are records, not hosts one dials.
//   - A name whose last label starts with a digit must be an IPv4
//     address in an inet_aton spelling (a, a.b, a.b.c, a.b.c.d; each
//     part decimal, 0x-hex or 0-octal: "127.1", "2130706433",
//     "0x7f000001", "0177.0.0.1"), which becomes the dotted quad;
//     anything else ("1.2.3.256", "0x1g", "1e3") is refused, because
//     resolvers and URL parsers disagree about such names. The check
//     runs after IDNA, so full-width digits are addresses too.
//   - Loopback spellings become 127.0.0.1: 127.0.0.1 in any spelling,
//     ::1, ::ffff:127.0.0.1, 0.0.0.0, ::, "localhost" and any name
//     under ".localhost". Other 127.x.y.z addresses keep their own
//     text (Loopback and Special still report them).
func ParseHost(host string, port uint16) (Dest, error) {
	if port == 0 {
		return Dest{}, invalid("port", "0", "must be 1-65535")
	}
	h, a, err := normaliseHost(host)
	if err != nil {
		return Dest{}, err
	}
	return Dest{Host: h, Port: port, Addr: a}, nil
}

// normaliseHost is ParseHost without the port: the canonical host text
// and, when the host is an address, that address.
func normaliseHost(host string) (string, netip.Addr, error) {
	switch {
	case host == "":
		return "", netip.Addr{}, invalid("host", host, "empty")
	case len(host) > maxInput:
		return "", netip.Addr{}, invalid("host", host, "too long")
	case host[0] == '[':
		if len(host) < 2 || host[len(host)-1] != ']' {
			return "", netip.Addr{}, invalid("host", host, "missing ']'")
		}
		return parseIPv6(host[1 : len(host)-1])
	case strings.IndexByte(host, ':') >= 0:
		return parseIPv6(host)
	}
	return parseName(host)
}

// parseIPv6 parses an unbracketed IPv6 literal.
func parseIPv6(s string) (string, netip.Addr, error) {
	if strings.IndexByte(s, ':') < 0 {
		// "[1.2.3.4]": brackets are for IPv6 only.
		return "", netip.Addr{}, invalid("host", s, "brackets are only for IPv6 addresses")
	}
	if strings.IndexByte(s, '%') >= 0 {
		return "", netip.Addr{}, invalid("host", s, "IPv6 zones are not allowed")
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Zone() != "" {
		return "", netip.Addr{}, invalid("host", s, "not an IPv6 address")
	}
	a = canonicalAddr(a)
	return a.String(), a, nil
}

// canonicalAddr unmaps an IPv4-mapped address and folds the loopback
// spellings (127.0.0.1, ::1, 0.0.0.0, ::) to 127.0.0.1: connecting to
// an unspecified address reaches the local host, so they are one
// destination.
func canonicalAddr(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.IsUnspecified() || a == netip.IPv6Loopback() || a == loopback4() {
		return loopback4()
	}
	return a
}

func loopback4() netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, 1}) }

// parseName normalises a name or a numeric IPv4 spelling.
func parseName(s string) (string, netip.Addr, error) {
	if !utf8.ValidString(s) {
		return "", netip.Addr{}, invalid("host", s, "not valid UTF-8")
	}
	if strings.HasSuffix(s, "..") {
		return "", netip.Addr{}, invalid("host", s, "more than one trailing dot")
	}
	if why := asciiJunk(s); why != "" {
		return "", netip.Addr{}, invalid("host", s, why)
	}
	// IDNA first: it folds case and width (full-width digits and
	// dots), so the numeric check below sees what a resolver would.
	a, err := idnaProfile.ToASCII(s)
	if err != nil {
		return "", netip.Addr{}, invalid("host", s, "not a valid host name (IDNA)")
	}
	a = strings.ToLower(a)
	if a != s && strings.Contains(a, "xn--") {
		// x/net/idna validates a Unicode label and its xn-- form by
		// different paths (e.g. a label with over 30 combining marks
		// passes, but its decoded xn-- form fails the NFC check), so
		// a name can map to an A-label that is itself refused. Only a
		// fixed point is a destination: what is reported, matched
		// and dialled must parse as itself.
		if again, err := idnaProfile.ToASCII(a); err != nil || again != a {
			return "", netip.Addr{}, invalid("host", s, "not a valid host name (IDNA)")
		}
	}
	name, ok := strings.CutSuffix(a, ".")
	if name == "" || (ok && strings.HasSuffix(name, ".")) {
		return "", netip.Addr{}, invalid("host", s, "empty label")
	}
	last := name[strings.LastIndexByte(name, '.')+1:]
	if last != "" && last[0] >= '0' && last[0] <= '9' {
		ip, ok := parseIPv4(name)
		if !ok {
			return "", netip.Addr{}, invalid("host", s, "looks numeric but is not an IPv4 address")
		}
		ip = canonicalAddr(ip)
		return ip.String(), ip, nil
	}
	if why := checkLDH(name); why != "" {
		return "", netip.Addr{}, invalid("host", s, why)
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		// RFC 6761: resolvers must answer loopback for these.
		return "127.0.0.1", loopback4(), nil
	}
	return name, netip.Addr{}, nil
}

// asciiJunk names the first ASCII byte of s that no host may contain,
// for a clearer message than the IDNA error (which would refuse it
// too). Non-ASCII is left to IDNA.
func asciiJunk(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf, c == '.', c == '-',
			c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '_':
			return "underscores are not allowed in host names"
		default:
			return "only letters, digits, hyphens and dots are allowed"
		}
	}
	return ""
}

// checkLDH re-checks the IDNA output for what a dialled host name may
// hold, so that no profile quirk can let another byte through. It
// returns why the name is refused, or "".
func checkLDH(name string) string {
	if len(name) > 253 {
		return "name longer than 253 bytes"
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return "empty label"
		}
		if len(label) > 63 {
			return "label longer than 63 bytes"
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "label starts or ends with a hyphen"
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "only letters, digits, hyphens and dots are allowed"
			}
		}
	}
	return ""
}

// String returns "host:port", with an IPv6 host bracketed
// ("[2001:db8::1]:443"). ParseHostPort parses it back to d.
func (d Dest) String() string {
	port := strconv.Itoa(int(d.Port))
	if d.Addr.Is6() {
		return "[" + d.Host + "]:" + port
	}
	return d.Host + ":" + port
}

// Valid reports whether d is a destination ParseHost makes: its host in
// the normal form, with Addr set exactly when the host is an address,
// and a port. A Dest built field by field rather than parsed is matched,
// hashed and dialled only if it is one.
func (d Dest) Valid() bool {
	if d.Host == "" || d.Port == 0 {
		return false
	}
	n, err := ParseHost(d.Host, d.Port)
	return err == nil && n == d
}

// IsIP reports whether the destination is an address rather than a
// name.
func (d Dest) IsIP() bool { return d.Addr.IsValid() }

// Loopback reports whether the destination is the host's loopback:
// 127.0.0.1 (every loopback spelling), any other 127.0.0.0/8 address,
// or an IPv6 address embedding one (IPv4-compatible, NAT64, 6to4).
// Names other than localhost are not loopback here: what they resolve
// to is the proxy's business.
func (d Dest) Loopback() bool {
	if d.Host == "127.0.0.1" {
		return true
	}
	if !d.Addr.IsValid() {
		return false
	}
	a := d.Addr.Unmap()
	if a == netip.IPv6Loopback() || a.IsUnspecified() {
		return true
	}
	if a.Is4() {
		return a.IsLoopback()
	}
	_, embedded := embeddings(a)
	for _, e := range embedded {
		if e.IsLoopback() {
			return true
		}
	}
	return false
}
