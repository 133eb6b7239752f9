package netdest

import (
	"errors"
	"net/netip"
	"testing"
)

func TestParsePatternCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"example.com":              "example.com",
		"Example.COM.":             "example.com",
		"example.com:8443":         "example.com:8443",
		"example.com:*":            "example.com:*",
		"*.example.com":            "*.example.com",
		"*.Example.com.:443":       "*.example.com:443",
		"*.bücher.de":              "*.xn--bcher-kva.de",
		"*":                        "*",
		"*:443":                    "*:443",
		"*:*":                      "*:*",
		"10.1.2.3":                 "10.1.2.3",
		"10.1.2.3:5432":            "10.1.2.3:5432",
		"10.1.2.3/32":              "10.1.2.3",
		"127.1:8080":               "127.0.0.1:8080",
		"0x7f.1":                   "127.0.0.1",
		"localhost:8080":           "127.0.0.1:8080",
		"dev.localhost:3000":       "127.0.0.1:3000",
		"0.0.0.0:80":               "127.0.0.1:80",
		"[::1]:8080":               "127.0.0.1:8080",
		"::1":                      "127.0.0.1",
		"[::1]":                    "127.0.0.1",
		"::1/128":                  "127.0.0.1",
		"[::]:80":                  "127.0.0.1:80",
		"[::ffff:10.1.2.3]:80":     "10.1.2.3:80",
		"10.0.0.0/8":               "10.0.0.0/8",
		"10.0.0.0/8:5432":          "10.0.0.0/8:5432",
		"10.0.0.0/8:*":             "10.0.0.0/8:*",
		"0.0.0.0/0":                "0.0.0.0/0",
		"fd00::/8":                 "[fd00::/8]",
		"[fd00::/8]":               "[fd00::/8]",
		"[fd00::/8]:443":           "[fd00::/8]:443",
		"[FD00::/8]:*":             "[fd00::/8]:*",
		"::ffff:10.0.0.0/104":      "10.0.0.0/8",
		"2001:DB8::1":              "[2001:db8::1]",
		"[2001:db8:0::1]:443":      "[2001:db8::1]:443",
		"[2001:db8::1/128]:443":    "[2001:db8::1]:443",
		"::1:8080":                 "[::1:8080]", // unbracketed: every colon is the address's
		"xn--bcher-kva.de:443":     "xn--bcher-kva.de:443",
		"ex\u0430mple.com":         "xn--exmple-4nf.com",
		"a.b.c.d.e.example.org:22": "a.b.c.d.e.example.org:22",
	} {
		p, err := ParsePattern(in)
		if err != nil {
			t.Errorf("ParsePattern(%q): %v", in, err)
			continue
		}
		if p.String() != want {
			t.Errorf("ParsePattern(%q).String() = %q; want %q", in, p.String(), want)
		}
		q, err := ParsePattern(p.String())
		if err != nil || q != p {
			t.Errorf("ParsePattern(%q) re-parse = %+v, %v; want %+v", p.String(), q, err, p)
		}
	}
}

func TestParsePatternRejects(t *testing.T) {
	for _, in := range []string{
		"", " ", "*.", ".", "..", "example.com..", ".example.com", "foo*.com", "*foo.com", "a.*.com",
		"*.*.com", "**", "**.example.com", "*.", "*.example.com*", "example.*", "*:", "example.com:",
		"user@example.com", "user:pass@example.com", "example.com/path", "example.com/", "http://example.com",
		"https://example.com:443", "example.com?x", "example.com#x", "example.com:443:22", "443:22",
		"example.com:+443", "example.com:0", "example.com:65536", "example.com: 443", " example.com",
		"example.com:0443", "example.com:**", "*.1.2.3.4", "*.10.0.0.0/8", "*.localhost",
		"*.dev.localhost", "*.[::1]", "*.::1", "[*.example.com]", "[example.com]:443", "[10.1.2.3]:80",
		"[10.0.0.0/8]", "10.1.2.3/8", "10.0.0.0/33", "10.0.0.0/08", "10/8", "fd00::1/8", "[fd00::/8]443",
		"[fd00::/8", "fe80::1%eth0", "[fe80::1%eth0]:80", "fe80::/10%eth0", "fd00::/8:443",
		"2001:db8::1:443:", "::1:80:*", "_dmarc.example.com", "1.2.3.256", "0x1g", "2130706433",
		"0x7f000001:80", "443.", "\uff14\uff14\uff13:22", "0:80", "exa mple.com", "example.com\t", "ex\\ample.com",
		"*.*", "*.example.com:*:*", "[::1]:*:80", "[::1]:",
	} {
		p, err := ParsePattern(in)
		if err == nil {
			t.Errorf("ParsePattern(%q) = %q; want error", in, p)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("ParsePattern(%q): %v does not wrap ErrInvalid", in, err)
		}
	}
}

func mustPattern(t *testing.T, s string) Pattern {
	t.Helper()
	p, err := ParsePattern(s)
	if err != nil {
		t.Fatalf("ParsePattern(%q): %v", s, err)
	}
	return p
}

func mustDest(t *testing.T, s string) Dest {
	t.Helper()
	d, err := ParseHostPort(s)
	if err != nil {
		t.Fatalf("ParseHostPort(%q): %v", s, err)
	}
	return d
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		yes, no []string
	}{
		{"example.com",
			[]string{"example.com:443", "example.com:80", "Example.COM.:443", "EXAMPLE.com:80"},
			[]string{"example.com:8443", "www.example.com:443", "example.com.evil.test:443", "evilexample.com:443", "xample.com:443", "ex\u0430mple.com:443"}},
		{"example.com:8443", []string{"example.com:8443"}, []string{"example.com:443", "example.com:80"}},
		{"example.com:*", []string{"example.com:1", "example.com:65535"}, []string{"a.example.com:1"}},
		{"*.example.com",
			[]string{"a.example.com:443", "a.b.c.example.com:80", "WWW.Example.Com.:443"},
			[]string{"example.com:443", "evilexample.com:443", "example.com.evil.test:443", "a.example.com.evil.test:443", "aexample.com:443", "a.example.com:22"}},
		{"*.example.com:22", []string{"git.example.com:22"}, []string{"git.example.com:443", "example.com:22"}},
		{"*", []string{"example.com:443", "a.b:80"}, []string{"example.com:22", "10.0.0.1:443", "127.0.0.1:80", "localhost:80", "[2001:db8::1]:443", "8.8.8.8:443"}},
		{"*:*", []string{"example.com:22"}, []string{"1.2.3.4:22", "[::1]:22", "2130706433:22"}},
		{"10.1.2.3:5432", []string{"10.1.2.3:5432", "0xa.1.2.3:5432", "[::ffff:10.1.2.3]:5432", "167838211:5432"}, []string{"10.1.2.4:5432", "10.1.2.3:443"}},
		{"10.0.0.0/8", []string{"10.0.0.1:443", "10.255.255.255:80"}, []string{"11.0.0.0:443", "10.0.0.1:22", "10.example.com:443"}},
		{"10.0.0.0/8:*", []string{"10.0.0.1:22", "[::ffff:10.9.9.9]:1"}, []string{"9.255.255.255:22", "[64:ff9b::a00:1]:22"}},
		{"[fd00::/8]:443", []string{"[fd00::1]:443", "[fdff::1]:443"}, []string{"[fc00::1]:443", "[fd00::1]:80"}},
		{"[::1]:8080", []string{"127.0.0.1:8080", "localhost:8080", "[::1]:8080", "127.1:8080", "0.0.0.0:8080"}, []string{"127.0.0.2:8080", "127.0.0.1:80"}},
		{"localhost", []string{"127.0.0.1:80"}, []string{"localhost.example.com:80"}},
		{"127.0.0.0/8:*", []string{"127.0.0.1:1", "127.9.9.9:1", "localhost:1"}, []string{"[::7f00:1]:1"}},
	} {
		p := mustPattern(t, tc.pattern)
		for _, s := range tc.yes {
			if d := mustDest(t, s); !p.Match(d) {
				t.Errorf("%q does not match %q (%s)", tc.pattern, s, d)
			}
		}
		for _, s := range tc.no {
			if d := mustDest(t, s); p.Match(d) {
				t.Errorf("%q matches %q (%s)", tc.pattern, s, d)
			}
		}
	}
}

func TestMatchHandBuiltDest(t *testing.T) {
	// A Dest that did not come from ParseHost must not pass an address
	// off as a name.
	anyName := mustPattern(t, "*:*")
	for _, d := range []Dest{
		{Host: "10.0.0.1", Port: 80},
		{Host: "::1", Port: 80},
		{Host: "localhost", Port: 80},
		{Host: "Example.com", Port: 80},
		{Host: "example.com.", Port: 80},
		{Host: "example.com", Port: 0},
		{Host: "", Port: 80},
	} {
		if anyName.Match(d) {
			t.Errorf("*:* matched hand-built %+v", d)
		}
	}
	cidr := mustPattern(t, "10.0.0.0/8:*")
	for _, d := range []Dest{
		{Host: "example.com", Port: 80, Addr: netip.MustParseAddr("10.0.0.1")},
		{Host: "::ffff:10.0.0.1", Port: 80, Addr: netip.MustParseAddr("::ffff:10.0.0.1")},
	} {
		if cidr.Match(d) {
			t.Errorf("10.0.0.0/8:* matched hand-built %+v", d)
		}
	}
	if (Pattern{}).Match(mustDest(t, "example.com:443")) {
		t.Error("zero Pattern matched")
	}
}

func TestNamesAddr(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		addr    string
		port    uint16
		want    bool
	}{
		{"10.0.0.0/8:5432", "10.1.2.3", 5432, true},
		{"10.0.0.0/8:5432", "::ffff:10.1.2.3", 5432, true},
		{"10.0.0.0/8:5432", "10.1.2.3", 5433, false},
		{"10.0.0.0/8", "10.1.2.3", 443, true},
		{"10.0.0.0/8", "10.1.2.3", 22, false},
		{"127.0.0.1:8080", "127.0.0.1", 8080, true},
		{"127.0.0.1:8080", "::1", 8080, true},
		{"[::1]:8080", "127.0.0.1", 8080, true},
		{"localhost:8080", "127.0.0.1", 8080, true},
		{"127.0.0.1:8080", "127.0.0.2", 8080, false},
		{"[fd00::/8]:*", "fd00::1", 1, true},
		{"[fd00::/8]:*", "fe80::1%eth0", 1, false},
		{"[fe80::/10]:*", "fe80::1%eth0", 1, false},
		{"*", "10.0.0.1", 443, false},
		{"*:*", "127.0.0.1", 80, false},
		{"example.com", "93.184.215.14", 443, false},
		{"*.example.com:*", "10.0.0.1", 443, false},
	} {
		p := mustPattern(t, tc.pattern)
		if got := p.NamesAddr(netip.MustParseAddr(tc.addr), tc.port); got != tc.want {
			t.Errorf("%q.NamesAddr(%s, %d) = %v; want %v", tc.pattern, tc.addr, tc.port, got, tc.want)
		}
	}
	if mustPattern(t, "10.0.0.0/8:*").NamesAddr(netip.Addr{}, 80) {
		t.Error("NamesAddr(invalid address) = true")
	}
}

func TestIsAddrPattern(t *testing.T) {
	for in, want := range map[string]bool{
		"example.com": false, "*.example.com": false, "*": false, "*:*": false,
		"10.1.2.3": true, "10.0.0.0/8": true, "[::1]:80": true, "localhost": true, "fd00::/8": true,
	} {
		if got := mustPattern(t, in).IsAddrPattern(); got != want {
			t.Errorf("%q.IsAddrPattern() = %v; want %v", in, got, want)
		}
	}
}
