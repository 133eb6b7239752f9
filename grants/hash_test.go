package grants

import (
	"testing"

	"github.com/sandboxd/sandboxd/boundary"
)

// netRequests are network requests as the proxy makes them: a name
// before its lookup, a name with the addresses it resolved to (both
// families), an IPv6 literal, and a filesystem request beside them.
func netRequests() map[string]Request {
	base := Request{Session: "uid 1000: s1", Cwd: "/home/u/proj", Command: "npm install", Surface: boundary.Network,
		Operation: boundary.OpConnect, Agent: "cli", Intent: "install the dependencies", ToolCallID: "t1", Attempt: 1, Held: true}
	byName := base
	byName.Destination = "registry.npmjs.org:443"
	resolved := byName
	resolved.Addresses = "104.16.1.34,104.16.2.34,2606:4700::6810:122"
	v6 := base
	v6.Destination, v6.Addresses = "[2001:db8::1]:8443", "2001:db8::1"
	fs := Request{Session: "s", Cwd: "/w", Command: "cp a /etc/x", Surface: boundary.Filesystem, Operation: boundary.OpWriteFile,
		Path: "/etc/x", ResolvedPath: "/etc/x", Dev: 2049, Ino: 77}
	return map[string]Request{"by name": byName, "resolved": resolved, "ipv6": v6, "filesystem": fs}
}

// The request hash is a contract (DESIGN.md §3.2): a request hashes the
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
