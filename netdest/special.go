package netdest

import (
	"net/netip"
	"slices"
)

// rangeName is one row of a special-purpose table.
type rangeName struct {
	prefix netip.Prefix
	name   string
}

// special4Table is the IANA IPv4 Special-Purpose Address Registry
// plus multicast, collapsed to what an egress check needs. Order
// matters where rows overlap: the more specific row comes first.
// Sub-blocks of 192.0.0.0/24 that IANA marks globally reachable
// (192.0.0.9, 192.0.0.10) stay special: nothing a sandboxed command
// needs lives there, and a shorter table is easier to review.
// Read-only after package initialisation.
var special4Table = []rangeName{
	{netip.MustParsePrefix("0.0.0.0/32"), "unspecified"},
	{netip.MustParsePrefix("0.0.0.0/8"), "this network (0/8)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (CGNAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast (deprecated)"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("255.255.255.255/32"), "broadcast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
}

// special6Table is the IANA IPv6 Special-Purpose Address Registry for
// ranges that do not embed an IPv4 address (those are classified by
// the address they embed, see embeddings). All of 2001::/23 is
// special, including the few globally reachable anycast assignments
// in it, for the same reason as 192.0.0.0/24. Anything outside
// 2000::/3 that is not listed is reported as "reserved" by special6.
// Read-only after package initialisation.
var special6Table = []rangeName{
	{netip.MustParsePrefix("2001::/32"), "Teredo"},
	{netip.MustParsePrefix("2001:2::/48"), "benchmarking"},
	{netip.MustParsePrefix("2001:10::/28"), "ORCHID (deprecated)"},
	{netip.MustParsePrefix("2001:20::/28"), "ORCHIDv2"},
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (ULA)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local (deprecated)"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// Well-known prefixes that embed an IPv4 address. Read-only.
var (
	nat64WKP      = netip.MustParsePrefix("64:ff9b::/96")   // RFC 6052
	nat64Local    = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215
	sixToFour     = netip.MustParsePrefix("2002::/16")      // RFC 3056
	v4Compatible  = netip.MustParsePrefix("::/96")          // RFC 4291, deprecated
	globalUnicast = netip.MustParsePrefix("2000::/3")
)

// Special reports why a is not a public address, as one short phrase
// naming the range ("loopback", "private (RFC 1918)", "link-local",
// ...), or "" when it is public. It fails closed: an invalid address
// is "invalid address" and one with a zone is "scoped".
//
// An IPv6 address that embeds an IPv4 address, IPv4-mapped
// (::ffff:0:0/96), IPv4-compatible (::/96), NAT64 (64:ff9b::/96 and
// the local-use 64:ff9b:1::/48) or 6to4 (2002::/16), is classified by
// the IPv4 address it embeds, prefixed with the embedding
// ("IPv4-mapped loopback", "NAT64 private (RFC 1918)"), because that
// is where a translator or tunnel delivers it. Mapped, NAT64 and 6to4
// embeddings of a public address are public. IPv4-compatible
// addresses are deprecated and no stack routes them, so they are
// always special. The local-use NAT64 prefix may be used with any
// RFC 6052 prefix length, so every layout that fits is checked and any
// special one makes the address special. Teredo (2001::/32) is always
// special: it tunnels to an obfuscated address.
func Special(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "invalid address"
	case a.Zone() != "":
		return "scoped"
	case a.Is4():
		return special4(a)
	}
	return special6(a)
}

// embeddingKinds are the prefixes Special puts before the name of the
// IPv4 range an IPv6 address embeds ("NAT64 loopback"), as embeddings
// returns them.
func embeddingKinds() []string {
	return []string{"IPv4-mapped", "IPv4-compatible", "NAT64", "6to4"}
}

// SpecialNames returns every phrase Special can return, sorted: what a
// caller that turns them into sentences must handle.
func SpecialNames() []string {
	names := []string{"invalid address", "scoped", "unspecified", "loopback", "reserved", "IPv4-compatible (deprecated)"}
	for _, r := range special6Table {
		names = append(names, r.name)
	}
	for _, r := range special4Table {
		names = append(names, r.name)
		for _, kind := range embeddingKinds() {
			names = append(names, kind+" "+r.name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func special4(a netip.Addr) string {
	for _, r := range special4Table {
		if r.prefix.Contains(a) {
			return r.name
		}
	}
	return ""
}

func special6(a netip.Addr) string {
	switch a {
	case netip.IPv6Unspecified():
		return "unspecified"
	case netip.IPv6Loopback():
		return "loopback"
	}
	if kind, v4s := embeddings(a); kind != "" {
		if why := firstSpecial4(v4s); why != "" {
			return kind + " " + why
		}
		if kind == "IPv4-compatible" {
			return "IPv4-compatible (deprecated)"
		}
		return ""
	}
	for _, r := range special6Table {
		if r.prefix.Contains(a) {
			return r.name
		}
	}
	if !globalUnicast.Contains(a) {
		return "reserved"
	}
	return ""
}

// firstSpecial4 classifies the candidate embedded addresses: the first
// special one, preferring one that is not 0.0.0.0, since with several
// RFC 6052 layouts an all-zero window is usually just the wrong layout.
func firstSpecial4(v4s []netip.Addr) string {
	first := ""
	for _, v4 := range v4s {
		why := special4(v4)
		if why != "" && !v4.IsUnspecified() {
			return why
		}
		if first == "" {
			first = why
		}
	}
	return first
}

// embeddings reports which IPv4-embedding range the IPv6 address a is
// in ("" if none) and the IPv4 addresses it may embed.
func embeddings(a netip.Addr) (string, []netip.Addr) {
	if !a.Is6() {
		return "", nil
	}
	b := a.WithZone("").As16()
	v4at := func(i, j, k, l int) netip.Addr {
		return netip.AddrFrom4([4]byte{b[i], b[j], b[k], b[l]})
	}
	switch {
	case a.Is4In6():
		return "IPv4-mapped", []netip.Addr{a.Unmap()}
	case nat64WKP.Contains(a.WithZone("")):
		return "NAT64", []netip.Addr{v4at(12, 13, 14, 15)}
	case nat64Local.Contains(a.WithZone("")):
		// RFC 6052 section 2.2 layouts for /48, /56, /64 (byte 8, "u",
		// must be zero) and /96.
		v4s := []netip.Addr{v4at(12, 13, 14, 15)}
		if b[8] == 0 {
			v4s = append(v4s, v4at(6, 7, 9, 10), v4at(7, 9, 10, 11), v4at(9, 10, 11, 12))
		}
		return "NAT64", v4s
	case sixToFour.Contains(a.WithZone("")):
		return "6to4", []netip.Addr{v4at(2, 3, 4, 5)}
	case v4Compatible.Contains(a.WithZone("")) &&
		a != netip.IPv6Unspecified() && a != netip.IPv6Loopback():
		return "IPv4-compatible", []netip.Addr{v4at(12, 13, 14, 15)}
	}
	return "", nil
}
