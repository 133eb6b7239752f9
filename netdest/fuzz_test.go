package netdest

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// destSeeds and patternSeeds seed the fuzzers with every shape the
// table tests cover, so mutation starts at the interesting edges.
func destSeeds() []string {
	return []string{
		"example.com:443", "Example.COM.:80", "bücher.de:443", "ex\u0430mple.com:443", "a.b..:1",
		"127.1:80", "2130706433:80", "0x7f000001:80", "0177.0.0.1:80", "0x7f.1:80", "1.2.3.256:80",
		"0x1g:80", "[::1]:80", "[::ffff:127.0.0.1]:80", "[fe80::1%eth0]:80", "[64:ff9b::a00:1]:80",
		"[2002:a00:1::1]:80", "localhost.:80", "a.localhost:80", "0.0.0.0:80", "[::]:80",
		"\uff11\uff12\uff17.0.0.1:80", "example\u3002com\u3002:443", "_x.example.com:1", "r3---sn.x.com:1",
		"xn--bcher-kva.de:443", "xn--zz.de:1", "example.com:0443", "[1.2.3.4]:80", "::1:80",
	}
}

func patternSeeds() []string {
	return []string{
		"example.com", "example.com:8443", "example.com:*", "*.example.com", "*.example.com:443",
		"*", "*:443", "*:*", "10.1.2.3", "10.1.2.3:5432", "[::1]:8080", "::1", "10.0.0.0/8:5432",
		"10.0.0.0/8", "10.0.0.0/8:*", "[fd00::/8]:443", "fd00::/8", "::ffff:10.0.0.0/104",
		"localhost:3000", "127.1", "foo*.com", "a.*.com", "**", "*.1.2.3.4", "443:22", "x:+443",
		"http://x", "u@x", "x/y", "10.1.2.3/8", "[fe80::1%eth0]:80", "*.bücher.de", "Example.COM.",
	}
}

// checkDest asserts the invariants of a parsed Dest.
func checkDest(t *testing.T, in string, d Dest) {
	t.Helper()
	if d.Port == 0 || d.Host == "" {
		t.Fatalf("%q: empty host or port: %+v", in, d)
	}
	for i := 0; i < len(d.Host); i++ {
		if c := d.Host[i]; c >= 0x80 || (c >= 'A' && c <= 'Z') {
			t.Fatalf("%q: host %q is not lowercase ASCII", in, d.Host)
		}
	}
	if strings.HasSuffix(d.Host, ".") {
		t.Fatalf("%q: host %q has a trailing dot", in, d.Host)
	}
	if d.IsIP() {
		if d.Addr.Zone() != "" || d.Addr.Is4In6() || d.Host != d.Addr.String() {
			t.Fatalf("%q: address %+v is not canonical", in, d)
		}
		if d.Addr.IsUnspecified() || d.Addr == netip.IPv6Loopback() {
			t.Fatalf("%q: loopback spelling %v not folded", in, d.Addr)
		}
	} else if _, err := netip.ParseAddr(d.Host); err == nil || checkLDH(d.Host) != "" {
		t.Fatalf("%q: name %q is an address or not LDH", in, d.Host)
	}
	d2, err := ParseHostPort(d.String())
	if err != nil || d2 != d {
		t.Fatalf("%q: String %q re-parses to %+v, %v; want %+v", in, d.String(), d2, err, d)
	}
	if !d.Valid() {
		t.Fatalf("%q: %+v, as parsed, is not Valid", in, d)
	}
	d3, err := ParseHost(d.Host, d.Port)
	if err != nil || d3 != d {
		t.Fatalf("%q: ParseHost(%q) = %+v, %v; want %+v", in, d.Host, d3, err, d)
	}
	_ = d.Loopback()
	if d.IsIP() && d.Loopback() && Special(d.Addr) == "" {
		t.Fatalf("%q: loopback %v is public", in, d.Addr)
	}
}

func FuzzParseHostPort(f *testing.F) {
	for _, s := range destSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseHostPort(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || d != (Dest{}) {
				t.Fatalf("%q: error %v with %+v", s, err, d)
			}
			return
		}
		checkDest(t, s, d)
	})
}

func FuzzParsePattern(f *testing.F) {
	for _, s := range patternSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePattern(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || p != (Pattern{}) {
				t.Fatalf("%q: error %v with %+v", s, err, p)
			}
			return
		}
		q, err := ParsePattern(p.String())
		if err != nil || q != p {
			t.Fatalf("%q: String %q re-parses to %+v, %v; want %+v", s, p.String(), q, err, p)
		}
		if q.String() != p.String() {
			t.Fatalf("%q: String not stable: %q then %q", s, p.String(), q.String())
		}
	})
}

func FuzzMatch(f *testing.F) {
	for i, p := range patternSeeds() {
		ds := destSeeds()
		f.Add(p, ds[i%len(ds)])
	}
	f.Add("*.example.com", "example.com:443")
	f.Add("*.example.com", "evilexample.com:443")
	f.Add("example.com", "example.com.evil.test:443")
	f.Add("*:*", "10.0.0.1:80")
	f.Fuzz(func(t *testing.T, ps, ds string) {
		p, perr := ParsePattern(ps)
		d, derr := ParseHostPort(ds)
		if derr == nil {
			checkDest(t, ds, d)
		}
		if perr != nil || derr != nil {
			return
		}
		m := p.Match(d)
		if m && d.IsIP() && !p.IsAddrPattern() {
			t.Fatalf("name pattern %q matched address %s", ps, d)
		}
		if m && !d.IsIP() && p.IsAddrPattern() {
			t.Fatalf("address pattern %q matched name %s", ps, d)
		}
		if d.IsIP() && m != p.NamesAddr(d.Addr, d.Port) {
			t.Fatalf("%q: Match(%s) = %v but NamesAddr = %v", ps, d, m, !m)
		}
		if !d.IsIP() {
			if p.NamesAddr(netip.MustParseAddr("10.0.0.1"), d.Port) && !p.IsAddrPattern() {
				t.Fatalf("name pattern %q names an address", ps)
			}
		}
		if m && p.kind == kindSubtree && !strings.HasSuffix(d.Host, "."+p.host) {
			t.Fatalf("%q matched %s outside its subtree", ps, d)
		}
		if m && p.kind == kindHost && d.Host != p.host {
			t.Fatalf("%q matched other host %s", ps, d)
		}
		q, _ := ParsePattern(p.String())
		d2, _ := ParseHostPort(d.String())
		if q.Match(d2) != m {
			t.Fatalf("%q/%q: match changes after round trip", ps, ds)
		}
	})
}
