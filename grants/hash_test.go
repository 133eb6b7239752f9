package grants

import (
	"net/netip"
	"testing"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/netdest"
)

// mustDest is s parsed, as the proxy types a destination.
func mustDest(s string) netdest.Dest {
	d, err := netdest.ParseHostPort(s)
	if err != nil {
		panic(err)
	}
	return d
}

// addrs are the addresses, in the order given.
func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// netRequests are network requests as the proxy makes them: a name
// before its lookup, a name with the addresses it resolved to (both
// families), an IPv6 literal, and a filesystem request beside them.
func netRequests() map[string]Request {
	base := Request{Session: "uid 1000: s1", Cwd: "/home/u/proj", Command: "npm install", Surface: boundary.Network,
		Operation: boundary.OpConnect, Agent: "cli", Intent: "install the dependencies", ToolCallID: "t1", Attempt: 1, Held: true}
	byName := base
	byName.Destination = mustDest("registry.npmjs.org:443")
	resolved := byName
	resolved.Addresses = addrs("104.16.1.34", "104.16.2.34", "2606:4700::6810:122")
	v6 := base
	v6.Destination, v6.Addresses = mustDest("[2001:db8::1]:8443"), addrs("2001:db8::1")
	fs := Request{Session: "s", Cwd: "/w", Command: "cp a /etc/x", Surface: boundary.Filesystem, Operation: boundary.OpWriteFile,
		Path: "/etc/x", ResolvedPath: "/etc/x", Dev: 2049, Ino: 77}
	return map[string]Request{"by name": byName, "resolved": resolved, "ipv6": v6, "filesystem": fs}
}

// The request hash is a contract (docs/ARCHITECTURE.md §3.4): a request hashes the
// same whatever the release. These were pinned when a destination was
// carried as its text ("host:port") and its addresses as sorted,
// comma-joined text; the typed form must encode to the same bytes.
func TestHashPinned(t *testing.T) {
	want := map[string]string{
		"by name":    "78e0c22fc422b3b48805b8a0450214bf41db8918688dc0bb0a8ff2bc73590857",
		"resolved":   "2837b0497069cfea8b165ff8895be897df0e78b4b1435b3b8bb670a7c6d7a775",
		"ipv6":       "9efe27407b421a2f8ef8af24b89ff3c0da824942f0f86db1c03c22254cb04e48",
		"filesystem": "fdffc593d838762b2b9a866f72a84fb0620dffd5e9c5bf1c5863233230409628",
	}
	for name, req := range netRequests() {
		if got := req.HashHex(); got != want[name] {
			t.Errorf("%s: hash %s, want %s", name, got, want[name])
		}
	}
}

// The typed destination and addresses encode as their old text did:
// "host:port" and the addresses comma-joined; a destination read from
// text hashes as the typed one.
func TestHashOfTextForm(t *testing.T) {
	for name, req := range netRequests() {
		text := map[string]string{}
		for _, kv := range req.Fields() {
			text[kv[0]] = kv[1]
		}
		if req.Surface != boundary.Network {
			continue
		}
		if text["destination"] != req.Destination.String() {
			t.Errorf("%s: destination encoded as %q", name, text["destination"])
		}
		again := req.WithDestinationText(text["destination"])
		if again.Destination != req.Destination || again.MalformedDestination != "" || again.HashHex() != req.HashHex() {
			t.Errorf("%s: read from its text, %+v hashes %s, want %s", name, again, again.HashHex(), req.HashHex())
		}
	}
	resolved := netRequests()["resolved"]
	if got := resolved.Fields(); !containsPair(got, "addresses", "104.16.1.34,104.16.2.34,2606:4700::6810:122") {
		t.Errorf("addresses encoded as %q", got)
	}
	// Text that is no normalised host:port is kept as it came, and
	// hashed in the destination's place.
	bad := Request{Surface: boundary.Network, Operation: boundary.OpConnect}.WithDestinationText("[::1]:80")
	if bad.Destination != (netdest.Dest{}) || bad.MalformedDestination != "[::1]:80" || !containsPair(bad.Fields(), "destination", "[::1]:80") {
		t.Errorf("malformed text: %+v", bad)
	}
}

func containsPair(fs [][2]string, k, v string) bool {
	for _, f := range fs {
		if f == [2]string{k, v} {
			return true
		}
	}
	return false
}
