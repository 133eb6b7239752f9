package netdest

import (
	"net/netip"
	"strconv"
	"strings"
)

// patternKind says what a Pattern's host part names.
type patternKind uint8

const (
	kindHost    patternKind = iota + 1 // exactly one name
	kindSubtree                        // every name strictly under host
	kindAnyName                        // every name, no address
	kindAddr                           // addresses in prefix
)

// portKind says which ports a Pattern names.
type portKind uint8

const (
	portsDefault portKind = iota + 1 // 80 and 443
	portsAny                         // 1-65535
	portsOne                         // port
)

// Pattern is a parsed `net connect` rule target. The zero Pattern
// matches nothing. Patterns are comparable: two patterns are == when
// they name the same host part and ports in the same canonical form.
type Pattern struct {
	kind   patternKind
	host   string       // kindHost: the name; kindSubtree: the parent
	prefix netip.Prefix // kindAddr: masked, IPv4 unmapped
	ports  portKind
	port   uint16 // portsOne
}

// ParsePattern parses a rule target, "host" or "host:port".
//
// The host part is one of:
//   - a name ("example.com"), normalised exactly like a destination
//     host (see ParseHost), so case, one trailing dot and IDNA
//     spellings do not matter; a name that normalises to an address
//     ("localhost", "2130706433") is an address pattern;
//   - "*.name": every name strictly below name, at any depth, never
//     name itself; the wildcard must be the whole leftmost label and
//     name must not be an address or a localhost name;
//   - "*": every name. A name pattern never matches an address
//     destination, so "*" does not open IP literals;
//   - an IP literal ("10.1.2.3", "::1", "[::1]"), normalised like a
//     destination (loopback spellings become 127.0.0.1, IPv4-mapped
//     addresses are unmapped), except that a dotless number
//     ("2130706433", "0x7f000001") is refused: in a rule, "443:22"
//     is a typo, not 0.0.1.187 port 22;
//   - a CIDR ("10.0.0.0/8", "fd00::/8", "[fd00::/8]"). It must be in
//     canonical masked form: "10.1.2.3/8" is refused rather than
//     guessed at, since the author meant either a host or a network.
//     A full-length prefix ("10.1.2.3/32") is the literal address.
//     IPv4-mapped prefixes (::ffff:0:0/96 and longer) are unmapped.
//
// The port part is absent (ports 80 and 443), "*" (any port) or a port
// as ParsePort parses it. An IPv6 literal or CIDR with a port must be
// bracketed ("[::1]:8080"); unbracketed, every colon belongs to the
// address.
//
// Schemes, userinfo, paths, spaces, partial wildcards ("foo*.com",
// "a.*.com", "**") and wildcards over addresses ("*.1.2.3.4") are
// refused. Errors wrap ErrInvalid.
func ParsePattern(s string) (Pattern, error) {
	if why := patternJunk(s); why != "" {
		return Pattern{}, invalid("pattern", s, why)
	}
	host, port, bracketed, err := splitPattern(s)
	if err != nil {
		return Pattern{}, err
	}
	p := Pattern{ports: portsDefault}
	if port != "" {
		if port == "*" {
			p.ports = portsAny
		} else {
			n, err := ParsePort(port)
			if err != nil {
				return Pattern{}, invalid("pattern", s, "bad port "+strconv.Quote(port)+": "+reason(err))
			}
			p.ports, p.port = portsOne, n
		}
	}
	if err := p.parseHostPart(s, host, bracketed); err != nil {
		return Pattern{}, err
	}
	return p, nil
}

// patternJunk rejects what no rule target may contain, so that a URL
// pasted as a rule fails loudly instead of being half-understood.
func patternJunk(s string) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > maxInput:
		return "too long"
	case strings.Contains(s, "://"):
		return "a rule names a host, not a URL (remove the scheme)"
	case strings.ContainsRune(s, '@'):
		return "userinfo is not allowed"
	case strings.ContainsAny(s, "?#\\"):
		return "a rule names a host, not a URL"
	case strings.Contains(s, "**"):
		return "'**' is not a wildcard; use '*.' before a name"
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return "spaces and control characters are not allowed"
		}
	}
	return ""
}

// splitPattern splits a pattern into its host part and port part ("" if
// none); bracketed says the host part was in brackets.
func splitPattern(s string) (host, port string, bracketed bool, err error) {
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", false, invalid("pattern", s, "missing ']'")
		}
		host, rest := s[1:end], s[end+1:]
		if rest == "" {
			return host, "", true, nil
		}
		if rest[0] != ':' || rest == ":" {
			return "", "", false, invalid("pattern", s, "expected ':port' after ']'")
		}
		return host, rest[1:], true, nil
	}
	switch strings.Count(s, ":") {
	case 0:
		return s, "", false, nil
	case 1:
		i := strings.IndexByte(s, ':')
		if i == len(s)-1 {
			return "", "", false, invalid("pattern", s, "empty port")
		}
		return s[:i], s[i+1:], false, nil
	}
	// Several colons: an unbracketed IPv6 literal or CIDR, no port.
	return s, "", false, nil
}

// parseHostPart fills in p's host part from host (brackets removed).
func (p *Pattern) parseHostPart(s, host string, bracketed bool) error {
	if host == "" {
		return invalid("pattern", s, "empty host")
	}
	if bracketed && strings.IndexByte(host, ':') < 0 {
		return invalid("pattern", s, "brackets are only for IPv6")
	}
	if !bracketed && strings.IndexByte(host, ':') >= 0 && strings.IndexByte(host, '/') < 0 {
		if _, err := netip.ParseAddr(host); err != nil {
			return invalid("pattern", s, "not an IPv6 address (an IPv6 address with a port must be bracketed)")
		}
	}
	switch {
	case host == "*":
		p.kind = kindAnyName
		return nil
	case strings.HasPrefix(host, "*."):
		return p.parseSubtree(s, host[2:])
	case strings.ContainsRune(host, '*'):
		return invalid("pattern", s, "a wildcard must be the whole leftmost label ('*.example.com')")
	case strings.ContainsRune(host, '/'):
		return p.parseCIDR(s, host)
	}
	h, a, err := normaliseHost(host)
	if err != nil {
		return invalid("pattern", s, reason(err))
	}
	if a.IsValid() && !bracketed && dotlessNumber(host) {
		// "443:22" would otherwise be 0.0.1.187 port 22: a dotless
		// number in a rule is a typo, not an address.
		return invalid("pattern", s, "a bare number is not a host (write the address as a dotted quad)")
	}
	if a.IsValid() {
		p.kind, p.prefix = kindAddr, netip.PrefixFrom(a, a.BitLen())
		return nil
	}
	p.kind, p.host = kindHost, h
	return nil
}

// dotlessNumber reports whether host is an inet_aton number without a
// dot ("443", "2130706433", "0x7f000001", full-width "４４３"), judged
// after the same IDNA mapping normaliseHost applies.
func dotlessNumber(host string) bool {
	if strings.IndexByte(host, ':') >= 0 {
		return false
	}
	m, err := idnaProfile.ToASCII(host)
	if err != nil {
		return false
	}
	m = strings.TrimSuffix(strings.ToLower(m), ".")
	_, ok := parseIPv4(m)
	return ok && !strings.Contains(m, ".")
}

// parseSubtree handles "*.parent".
func (p *Pattern) parseSubtree(s, parent string) error {
	if strings.ContainsAny(parent, "*:/[]") {
		return invalid("pattern", s, "a wildcard must be the whole leftmost label ('*.example.com')")
	}
	h, a, err := normaliseHost(parent)
	if err != nil {
		return invalid("pattern", s, reason(err))
	}
	if a.IsValid() {
		// "*.1.2.3.4" names no address, and "*.localhost" would only
		// name 127.0.0.1, which a name pattern never matches.
		return invalid("pattern", s, "a wildcard cannot be applied to an address or localhost")
	}
	p.kind, p.host = kindSubtree, h
	return nil
}

// parseCIDR handles "addr/bits".
func (p *Pattern) parseCIDR(s, host string) error {
	if strings.IndexByte(host, '%') >= 0 {
		return invalid("pattern", s, "IPv6 zones are not allowed")
	}
	pf, err := netip.ParsePrefix(host)
	if err != nil {
		addr, _, _ := strings.Cut(host, "/")
		if _, err := netip.ParseAddr(addr); err != nil {
			return invalid("pattern", s, "a rule names a host, not a URL path")
		}
		return invalid("pattern", s, "not a CIDR (write e.g. 10.0.0.0/8)")
	}
	if pf.Masked() != pf {
		return invalid("pattern", s, "host bits set; write "+pf.Masked().String())
	}
	if pf.Addr().Is4In6() && pf.Bits() >= 96 {
		// Destinations are unmapped, so a mapped prefix is the IPv4 one.
		pf = netip.PrefixFrom(pf.Addr().Unmap(), pf.Bits()-96)
	}
	if pf.IsSingleIP() {
		a := canonicalAddr(pf.Addr())
		pf = netip.PrefixFrom(a, a.BitLen())
	}
	p.kind, p.prefix = kindAddr, pf
	return nil
}

// reason is the "why" of one of this package's errors, for re-wrapping
// under another input.
func reason(err error) string {
	if pe, ok := err.(*parseError); ok {
		return pe.why
	}
	return err.Error()
}

// String returns the canonical form of p, which ParsePattern parses
// back to p: normalised host, IPv6 always bracketed, a full-length
// prefix as the bare address, and the port part only when it is not
// the default 80/443.
func (p Pattern) String() string {
	var host string
	switch p.kind {
	case kindHost:
		host = p.host
	case kindSubtree:
		host = "*." + p.host
	case kindAnyName:
		host = "*"
	case kindAddr:
		host = p.prefix.String()
		if p.prefix.IsSingleIP() {
			host = p.prefix.Addr().String()
		}
		if p.prefix.Addr().Is6() {
			host = "[" + host + "]"
		}
	default:
		return "<invalid pattern>"
	}
	switch p.ports {
	case portsAny:
		return host + ":*"
	case portsOne:
		return host + ":" + strconv.Itoa(int(p.port))
	}
	return host
}

// IsAddrPattern reports whether the pattern is an IP literal or CIDR.
func (p Pattern) IsAddrPattern() bool { return p.kind == kindAddr }

// portMatch reports whether p names port.
func (p Pattern) portMatch(port uint16) bool {
	switch p.ports {
	case portsDefault:
		return port == 80 || port == 443
	case portsAny:
		return port != 0
	case portsOne:
		return port == p.port
	}
	return false
}

// Match reports whether p names destination d. A name pattern (exact,
// "*.parent" or "*") matches only name destinations, never an address;
// "*.parent" matches names strictly below parent, label-aligned (not
// parent itself, not "evilparent"). An address pattern matches only
// address destinations inside it. d must be as ParseHost returns it;
// a hand-built Dest that is not fails closed (no match).
func (p Pattern) Match(d Dest) bool {
	if !wellFormed(d) || !p.portMatch(d.Port) {
		return false
	}
	switch p.kind {
	case kindHost:
		return !d.IsIP() && d.Host == p.host
	case kindSubtree:
		return !d.IsIP() && len(d.Host) > len(p.host)+1 &&
			strings.HasSuffix(d.Host, p.host) &&
			d.Host[len(d.Host)-len(p.host)-1] == '.'
	case kindAnyName:
		return !d.IsIP()
	case kindAddr:
		return d.IsIP() && p.prefix.Contains(d.Addr)
	}
	return false
}

// wellFormed is a cheap check that d looks like ParseHost's output, so
// that a hand-built Dest cannot pass an address off as a name.
func wellFormed(d Dest) bool {
	if d.Host == "" || d.Port == 0 {
		return false
	}
	if d.Addr.IsValid() {
		return d.Addr.Zone() == "" && canonicalAddr(d.Addr) == d.Addr && d.Host == d.Addr.String()
	}
	last := d.Host[strings.LastIndexByte(d.Host, '.')+1:]
	return last != "" && !(last[0] >= '0' && last[0] <= '9') && checkLDH(d.Host) == "" &&
		d.Host != "localhost" && !strings.HasSuffix(d.Host, ".localhost")
}

// NamesAddr reports whether p is an address pattern containing a on
// port. a is unmapped and loopback spellings (::1, 0.0.0.0, ::) are
// folded to 127.0.0.1 first, as for destinations; an address with a
// zone is never named. Name patterns never name an address: the proxy
// uses NamesAddr to let a rule that explicitly names a non-public
// address override its refusal to dial one, and "*" or a name that
// happens to resolve there must not do that.
func (p Pattern) NamesAddr(a netip.Addr, port uint16) bool {
	if p.kind != kindAddr || !a.IsValid() || a.Zone() != "" || !p.portMatch(port) {
		return false
	}
	return p.prefix.Contains(canonicalAddr(a))
}
