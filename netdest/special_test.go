package netdest

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
)

type specialCase struct{ addr, want string }

func checkSpecial(t *testing.T, cases []specialCase) {
	t.Helper()
	for _, tc := range cases {
		a := netip.MustParseAddr(tc.addr)
		if got := Special(a); got != tc.want {
			t.Errorf("Special(%s) = %q; want %q", tc.addr, got, tc.want)
		}
	}
}

func TestSpecial4(t *testing.T) {
	checkSpecial(t, []specialCase{
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "this network (0/8)"},
		{"10.0.0.1", "private (RFC 1918)"},
		{"10.255.255.255", "private (RFC 1918)"},
		{"100.64.0.1", "shared address space (CGNAT)"},
		{"100.127.255.255", "shared address space (CGNAT)"},
		{"127.0.0.1", "loopback"},
		{"127.255.0.1", "loopback"},
		{"169.254.169.254", "link-local"}, // cloud metadata
		{"172.16.0.1", "private (RFC 1918)"},
		{"172.31.255.255", "private (RFC 1918)"},
		{"192.0.0.1", "IETF protocol assignments"},
		{"192.0.2.1", "documentation"},
		{"192.88.99.1", "6to4 relay anycast (deprecated)"},
		{"192.168.1.1", "private (RFC 1918)"},
		{"198.18.0.1", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"198.51.100.1", "documentation"},
		{"203.0.113.1", "documentation"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.255", "multicast"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.254", "reserved"},
		{"255.255.255.255", "broadcast"},
		// Public IPv4, including the edges of special ranges.
		{"8.8.8.8", ""}, {"1.1.1.1", ""}, {"9.255.255.255", ""}, {"11.0.0.0", ""},
		{"100.63.255.255", ""}, {"100.128.0.0", ""}, {"172.15.255.255", ""}, {"172.32.0.0", ""},
		{"192.0.1.1", ""}, {"192.167.255.255", ""}, {"198.17.255.255", ""}, {"198.20.0.0", ""},
		{"223.255.255.255", ""}, {"126.255.255.255", ""}, {"128.0.0.0", ""}, {"169.253.255.255", ""},
	})
	if got := Special(netip.Addr{}); got == "" {
		t.Error("Special(invalid) is public")
	}
}

func TestSpecial6(t *testing.T) {
	checkSpecial(t, []specialCase{
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"fc00::1", "unique local (ULA)"},
		{"fd12:3456::1", "unique local (ULA)"},
		{"fe80::1", "link-local"},
		{"febf::1", "link-local"},
		{"fec0::1", "site-local (deprecated)"},
		{"ff02::1", "multicast"},
		{"2001:db8::1", "documentation"},
		{"3fff::1", "documentation"},
		{"3fff:fff::1", "documentation"},
		{"100::1", "discard-only"},
		{"100:0:0:1::", "reserved"},
		{"2001::1", "Teredo"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
		{"2001:2::1", "benchmarking"},
		{"2001:10::1", "ORCHID (deprecated)"},
		{"2001:20::1", "ORCHIDv2"},
		{"2001:1::1", "IETF protocol assignments"},
		{"2001:1ff::1", "IETF protocol assignments"},
		{"5f00::1", "reserved"},
		{"4000::1", "reserved"},
		{"::ffff:0:a00:1", "reserved"}, // SIIT, not mapped
		{"::1:0:0:1", "reserved"},
		// Public IPv6.
		{"2606:4700:4700::1111", ""}, {"2001:4860:4860::8888", ""}, {"2001:200::1", ""},
		{"2620:4f:8000::1", ""}, {"3ffe::1", ""}, {"3fff:1000::1", ""},
		// Scoped.
		{"fe80::1%eth0", "scoped"},
		{"2001:4860:4860::8888%eth0", "scoped"},
	})
}

func TestSpecialEmbedded(t *testing.T) {
	checkSpecial(t, []specialCase{
		{"::ffff:10.0.0.1", "IPv4-mapped private (RFC 1918)"},
		{"::ffff:127.0.0.1", "IPv4-mapped loopback"},
		{"::ffff:169.254.169.254", "IPv4-mapped link-local"},
		{"::ffff:8.8.8.8", ""},
		{"::127.0.0.1", "IPv4-compatible loopback"},
		{"::10.0.0.1", "IPv4-compatible private (RFC 1918)"},
		{"::8.8.8.8", "IPv4-compatible (deprecated)"},
		{"::2", "IPv4-compatible this network (0/8)"},
		{"64:ff9b::a00:1", "NAT64 private (RFC 1918)"},
		{"64:ff9b::7f00:1", "NAT64 loopback"},
		{"64:ff9b::a9fe:a9fe", "NAT64 link-local"},
		{"64:ff9b::808:808", ""},
		{"64:ff9b:1::a00:1", "NAT64 private (RFC 1918)"},             // /96 layout
		{"64:ff9b:1:a00:1::", "NAT64 private (RFC 1918)"},            // /48 layout
		{"64:ff9b:1:8c0:a8:101:808:808", "NAT64 private (RFC 1918)"}, // only the /56 layout is special
		{"64:ff9b:1:808:a:0:108:808", "NAT64 private (RFC 1918)"},    // only the /64 layout is special
		{"64:ff9b:1:808:8:808:a00:1", "NAT64 private (RFC 1918)"},    // only the /96 layout is special
		{"64:ff9b:1:808:8:808:808:808", ""},
		{"2002:0a00:0001::1", "6to4 private (RFC 1918)"},
		{"2002:7f00:1::", "6to4 loopback"},
		{"2002:c0a8:101::1", "6to4 private (RFC 1918)"},
		{"2002:808:808::1", ""},
	})
}

// TestSpecialCoversStdlib cross-checks Special against the standard
// library's own classifiers: anything it calls non-global must be
// special here too.
func TestSpecialCoversStdlib(t *testing.T) {
	for _, s := range []string{
		"127.0.0.1", "10.0.0.1", "172.16.0.1", "192.168.0.1", "169.254.0.1", "224.0.0.1",
		"0.0.0.0", "::", "::1", "fe80::1", "fc00::1", "ff02::1", "ff0e::1", "::ffff:10.0.0.1",
	} {
		a := netip.MustParseAddr(s)
		if !a.IsGlobalUnicast() || a.IsPrivate() {
			if Special(a) == "" {
				t.Errorf("Special(%s) is public but the stdlib says it is not", s)
			}
		}
	}
}

// TestSpecialNamesComplete: whatever Special returns for any address in
// any table row, at its edges and under every embedding, is one of
// SpecialNames, so a caller that handles those handles them all.
func TestSpecialNamesComplete(t *testing.T) {
	names := SpecialNames()
	known := func(why string) bool { _, ok := slices.BinarySearch(names, why); return ok }
	var addrs []netip.Addr
	for _, r := range append(slices.Clone(special4Table), special6Table...) {
		addrs = append(addrs, r.prefix.Addr(), r.prefix.Masked().Addr().Next(), lastAddr(r.prefix))
	}
	for _, s := range []string{"::", "::1", "::8.8.8.8", "4000::1", "fe80::1%eth0"} {
		addrs = append(addrs, netip.MustParseAddr(s))
	}
	for _, a := range slices.Clone(addrs) {
		if !a.Is4() {
			continue
		}
		b := a.As4()
		for _, s := range []string{"::ffff:%d.%d.%d.%d", "::%d.%d.%d.%d", "64:ff9b::%d.%d.%d.%d"} {
			addrs = append(addrs, netip.MustParseAddr(fmt.Sprintf(s, b[0], b[1], b[2], b[3])))
		}
		addrs = append(addrs, netip.AddrFrom16([16]byte{0x20, 0x02, b[0], b[1], b[2], b[3], 15: 1}))
	}
	addrs = append(addrs, netip.Addr{})
	for _, a := range addrs {
		if why := Special(a); why != "" && !known(why) {
			t.Errorf("Special(%s) = %q, which SpecialNames does not list", a, why)
		}
	}
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
