package broker

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/netdest"
)

// checkNetwork is the network's hard denies: cloud metadata endpoints
// (netdest.MetadataEndpoints, the one list), whatever names them and
// whatever rule names them; and any address that is not public (loopback,
// private, link-local, the host's own interfaces, ...) unless an allow
// or ask rule names that address or a range containing it. A wildcard
// host never names an address, so `net connect *` opens no private
// network, and a name that resolves to 127.0.0.1 is caught here too.
func (b *Broker) checkNetwork(req grants.Request) (bool, string) {
	if req.Surface != boundary.Network {
		return false, ""
	}
	d, ok := destOf(req)
	if !ok {
		return true, "a malformed destination is refused"
	}
	if eps := netdest.Metadata(d); len(eps) > 0 {
		return true, metadataRefusal(d.String()+" is", eps)
	}
	for _, a := range addrsOf(req) {
		if eps := netdest.MetadataAddr(a); len(eps) > 0 {
			return true, metadataRefusal(d.String()+" resolves to "+a.String()+", which is", eps)
		}
		why := netdest.Special(a)
		if why == "" && b.cfg.Hard.Local != nil && b.cfg.Hard.Local(a) {
			why = ownAddress
		}
		if why == "" || b.namedByRule(a, d.Port) {
			continue
		}
		return true, notPublic(d, a, why)
	}
	return false, ""
}

// metadataRefusal says why a metadata endpoint is refused: what (the
// destination, and the address it resolved to) is one, of whom.
func metadataRefusal(what string, eps []netdest.MetadataEndpoint) string {
	var whose []string
	for _, e := range eps {
		if !slices.Contains(whose, e.Provider) {
			whose = append(whose, e.Provider)
		}
	}
	return what + " a cloud metadata endpoint (" + strings.Join(whose, ", ") + "); metadata endpoints hold credentials, so no rule or reviewer opens one"
}

// ownAddress is the range name of the host's own interface addresses.
const ownAddress = "one of this host's own addresses"

// notPublic says why the address a of destination d is refused; why is
// netdest.Special's name for its range, or ownAddress.
func notPublic(d netdest.Dest, a netip.Addr, why string) string {
	what := d.String() + " is "
	if !d.IsIP() {
		what = d.String() + " resolves to " + a.String() + ", which is "
	}
	return what + addressPhrase(why) + "; only an allow or ask rule naming that address (or a range containing it) may open it"
}

// namedByRule reports whether an allow or ask rule names address a on
// port: the one way to reach a non-public address.
func (b *Broker) namedByRule(a netip.Addr, port uint16) bool {
	for _, set := range [][]Rule{b.cfg.Rules.Allow, b.cfg.Rules.Ask} {
		for _, r := range set {
			if r.Surface == boundary.Network && r.matchOperation(boundary.OpConnect) && r.dest.NamesAddr(a, port) {
				return true
			}
		}
	}
	return false
}

// addressPhrase turns a range's name (netdest.Special's, or ownAddress)
// into the noun phrase that follows "is": "a loopback address", "an
// address in the shared address space (CGNAT)", "a NAT64 form of a
// private address (RFC 1918)". A name it does not know (netdest grew a
// range) still makes a sentence.
func addressPhrase(why string) string {
	switch why {
	case ownAddress:
		return ownAddress
	case "invalid address":
		return "an invalid address"
	case "scoped":
		return "an address with a zone"
	case "unspecified":
		return "the unspecified address"
	case "this network (0/8)":
		return "an address of \"this network\" (0.0.0.0/8)"
	case "private (RFC 1918)":
		return "a private address (RFC 1918)"
	case "shared address space (CGNAT)":
		return "an address in the shared address space (CGNAT)"
	case "loopback":
		return "a loopback address"
	case "link-local":
		return "a link-local address"
	case "IETF protocol assignments":
		return "an address reserved for IETF protocol assignments"
	case "documentation":
		return "a documentation address"
	case "6to4 relay anycast (deprecated)":
		return "a 6to4 relay anycast address (deprecated)"
	case "benchmarking":
		return "a benchmarking address"
	case "multicast":
		return "a multicast address"
	case "broadcast":
		return "the broadcast address"
	case "reserved":
		return "a reserved address"
	case "Teredo":
		return "a Teredo address"
	case "ORCHID (deprecated)":
		return "an ORCHID address (deprecated)"
	case "ORCHIDv2":
		return "an ORCHIDv2 address"
	case "discard-only":
		return "a discard-only address"
	case "unique local (ULA)":
		return "a unique local address (ULA)"
	case "site-local (deprecated)":
		return "a site-local address (deprecated)"
	case "IPv4-compatible (deprecated)":
		return "an IPv4-compatible address (deprecated)"
	}
	// An IPv6 address classified by the IPv4 address it embeds.
	for _, e := range []struct{ kind, phrase string }{
		{"IPv4-mapped ", "an IPv4-mapped form of "}, {"IPv4-compatible ", "an IPv4-compatible form of "},
		{"NAT64 ", "a NAT64 form of "}, {"6to4 ", "a 6to4 form of "},
	} {
		if base, ok := strings.CutPrefix(why, e.kind); ok && base != "" {
			return e.phrase + addressPhrase(base)
		}
	}
	return unknownRange(why)
}

// unknownRange is addressPhrase for a range name it has no phrase for.
func unknownRange(why string) string { return "a special-purpose address (" + why + ")" }
