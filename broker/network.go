package broker

import (
	"net/netip"
	"strings"

	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/netdest"
)

// checkNetwork is the network's hard denies: cloud metadata endpoints,
// whatever names them; and any address that is not public (loopback,
// private, link-local, the host's own interfaces, ...) unless an allow
// or ask rule names that address or a range containing it. A wildcard
// host never names an address, so `net connect *` opens no private
// network, and a name that resolves to 127.0.0.1 is caught here too.
func (b *Broker) checkNetwork(req grants.Request) (bool, string) {
	if req.Surface != grants.Network {
		return false, ""
	}
	d, ok := destOf(req)
	if !ok {
		return true, "a malformed destination is refused"
	}
	if metadataHost(d.Host) {
		return true, "cloud metadata endpoints hold credentials"
	}
	for _, a := range addrsOf(req) {
		if metadataHost(a.String()) {
			return true, "cloud metadata endpoints hold credentials"
		}
		why := netdest.Special(a)
		if why == "" && b.cfg.Hard.Local != nil && b.cfg.Hard.Local(a) {
			why = "one of this host's own addresses"
		}
		if why == "" || b.namedByRule(a, d.Port) {
			continue
		}
		what := d.String()
		if !d.IsIP() {
			what += " resolves to " + a.String() + ", which is"
		} else {
			what += " is"
		}
		return true, what + " " + article(why) + "; only an allow or ask rule naming that address (or a range containing it) may open it"
	}
	return false, ""
}

// namedByRule reports whether an allow or ask rule names address a on
// port: the one way to reach a non-public address.
func (b *Broker) namedByRule(a netip.Addr, port uint16) bool {
	for _, set := range [][]Rule{b.cfg.Rules.Allow, b.cfg.Rules.Ask} {
		for _, r := range set {
			if r.Surface == grants.Network && r.matchOperation(grants.OpConnect) && r.dest.NamesAddr(a, port) {
				return true
			}
		}
	}
	return false
}

// article puts "a"/"an" before a range's name ("a loopback address").
func article(why string) string {
	if why == "" {
		return why
	}
	if strings.ContainsRune("aeiou", rune(why[0])) {
		return "an " + why + " address"
	}
	return "a " + why + " address"
}
