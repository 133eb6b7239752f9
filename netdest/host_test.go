package netdest

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestLoopbackSpellings(t *testing.T) {
	want := Dest{Host: "127.0.0.1", Port: 80, Addr: netip.MustParseAddr("127.0.0.1")}
	for _, h := range []string{
		"127.1", "2130706433", "0x7f000001", "0177.0.0.1", "[::ffff:127.0.0.1]",
		"[::1]", "0.0.0.0", "localhost.", "LOCALHOST",
		// More of the same destination.
		"127.0.0.1", "127.0.0.1.", "0x7f.1", "0x7F.0.0.1", "0177.1", "127.0.1",
		"017700000001", "[::]", "[0:0:0:0:0:0:0:1]", "[::ffff:7f00:1]", "[::ffff:0.0.0.0]",
		"0", "0.0", "0x0", "foo.localhost", "a.b.LocalHost.", "localhost",
		"\uff11\uff12\uff17.0.0.1", // full-width digits
	} {
		d, err := ParseHostPort(h + ":80")
		if err != nil || d != want {
			t.Errorf("ParseHostPort(%q) = %+v, %v; want %+v", h+":80", d, err, want)
		}
		if !d.Loopback() {
			t.Errorf("%q: Loopback() = false", h)
		}
	}
}

func TestParseHostPort(t *testing.T) {
	for _, tc := range []struct{ in, host, str string }{
		{"example.com:443", "example.com", "example.com:443"},
		{"Example.COM.:443", "example.com", "example.com:443"},
		{"EXAMPLE.com:80", "example.com", "example.com:80"},
		{"a-b.c-d.example:65535", "a-b.c-d.example", "a-b.c-d.example:65535"},
		{"123.example.com:1", "123.example.com", "123.example.com:1"},
		{"bücher.de:443", "xn--bcher-kva.de", "xn--bcher-kva.de:443"},
		{"XN--BCHER-KVA.de:443", "xn--bcher-kva.de", "xn--bcher-kva.de:443"},
		{"ex\u00adample.com:443", "example.com", "example.com:443"}, // soft hyphen is mapped away
		{"example\u3002com:443", "example.com", "example.com:443"},  // ideographic full stop
		{"example.com\u3002:443", "example.com", "example.com:443"},
		{"\uff25xample.com:443", "example.com", "example.com:443"},                      // full-width E
		{"straße.de:443", "xn--strae-oqa.de", "xn--strae-oqa.de:443"},                   // non-transitional
		{"مثال.إختبار:443", "xn--mgbh0fb.xn--kgbechtv", "xn--mgbh0fb.xn--kgbechtv:443"}, // Bidi
		{"مثال.com:443", "xn--mgbh0fb.com", "xn--mgbh0fb.com:443"},
		{"10.1.2.3:5432", "10.1.2.3", "10.1.2.3:5432"},
		{"10.1.2.3.:5432", "10.1.2.3", "10.1.2.3:5432"},
		{"167772161:80", "10.0.0.1", "10.0.0.1:80"},
		{"0xa.0x1:80", "10.0.0.1", "10.0.0.1:80"},
		{"012.0.0.01:80", "10.0.0.1", "10.0.0.1:80"},
		{"10.1.515:80", "10.1.2.3", "10.1.2.3:80"},
		{"8.8.8.8:53", "8.8.8.8", "8.8.8.8:53"},
		{"127.0.0.2:80", "127.0.0.2", "127.0.0.2:80"},
		{"0177.0.0.2:80", "127.0.0.2", "127.0.0.2:80"},
		{"[2001:DB8::1]:443", "2001:db8::1", "[2001:db8::1]:443"},
		{"[2001:0db8:0000:0000:0000:0000:0000:0001]:443", "2001:db8::1", "[2001:db8::1]:443"},
		{"[::ffff:10.0.0.1]:80", "10.0.0.1", "10.0.0.1:80"},
		{"[::ffff:a00:1]:80", "10.0.0.1", "10.0.0.1:80"},
		{"[::127.0.0.1]:80", "::7f00:1", "[::7f00:1]:80"},
		{"[64:ff9b::a00:1]:80", "64:ff9b::a00:1", "[64:ff9b::a00:1]:80"},
	} {
		d, err := ParseHostPort(tc.in)
		if err != nil {
			t.Errorf("ParseHostPort(%q): %v", tc.in, err)
			continue
		}
		if d.Host != tc.host || d.String() != tc.str {
			t.Errorf("ParseHostPort(%q) = %q (%s); want %q (%s)", tc.in, d.Host, d, tc.host, tc.str)
		}
		if a, err := netip.ParseAddr(d.Host); (err == nil) != d.IsIP() || (err == nil && a != d.Addr) {
			t.Errorf("ParseHostPort(%q): Host %q and Addr %v disagree", tc.in, d.Host, d.Addr)
		}
	}
}

func TestParseHostPortRejects(t *testing.T) {
	for _, in := range []string{
		"", ":", ":80", "example.com", "example.com:", "example.com:0", "example.com:65536",
		"example.com:+443", "example.com:-1", "example.com: 443", "example.com:443 ", "example.com:0443",
		"example.com:0x1bb", "example.com:443:22", " example.com:443", "exa mple.com:443",
		"example.com..:443", "..:443", ".:443", ".example.com:443", "a..b:443", "\u3002:443",
		"_dmarc.example.com:443", "a_b.example.com:443", "-a.example.com:443", "a-.example.com:443",
		"ab--cd.example.com:443", "xn--zz.example.com:443", "user@example.com:443",
		"example.com/path:443", "http://example.com:443", "exa%6dple.com:443", "*.example.com:443",
		"1.2.3.256:80", "256.1:80", "1.2.3.4.5:80", "0x1g:80", "1e3:80", "08.1.1.1:80", "0x:80",
		"1.2.3.0x:80", "4294967296:80", "0x100000000:80", "1.16777216:80", "1..2:80", "foo.1:80",
		"example.123:80", "[1.2.3.4]:80", "[::1]", "[::1]80", "[::1:80", "::1:80", "fe80::1:80",
		"[fe80::1%eth0]:80", "[fe80::1%25eth0]:80", "[::1]:", "[[::1]]:80", "[:::1]:80",
		"[2001:db8::1::2]:80", "[02001:db8::1]:80", "[]:80", "a\x00b:80", "\xff:80",
		strings.Repeat("a", 64) + ".com:443",
		strings.Repeat("a.", 127) + "com:443",
		strings.Repeat("a", 2000) + ":443",
		"example.com\u200d:443", // ZWJ outside a joining context
		"\u05d0a.com:443",       // Bidi rule
		"\U000e0001.com:443",    // tag character
		// 29 combining marks: the xn-- form's NFC check inserts a
		// CGJ (stream-safe format) and refuses it, so the name is not
		// a fixed point (fuzz regression, see testdata/fuzz).
		"\ud635" + strings.Repeat("\u0618", 23) + "\u0592\u0598\u0612\u0592\u0598\u0612.com:443",
	} {
		d, err := ParseHostPort(in)
		if err == nil {
			t.Errorf("ParseHostPort(%q) = %+v; want error", in, d)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseHostPort(%q): %v does not wrap ErrInvalid", in, err)
		}
		if len(err.Error()) > 300 {
			t.Errorf("ParseHostPort(%q): error too long: %d bytes", in, len(err.Error()))
		}
	}
}

func TestParsePort(t *testing.T) {
	for in, want := range map[string]uint16{"1": 1, "80": 80, "443": 443, "65535": 65535, "10000": 10000} {
		if got, err := ParsePort(in); err != nil || got != want {
			t.Errorf("ParsePort(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "00", "0443", "65536", "99999", "100000", "+443", "-1", " 443", "443 ", "4 43", "0x1bb", "443a", "１", "*"} {
		if got, err := ParsePort(in); err == nil || !errors.Is(err, ErrInvalid) {
			t.Errorf("ParsePort(%q) = %d, %v; want ErrInvalid", in, got, err)
		}
	}
}

func TestParseHost(t *testing.T) {
	for _, tc := range []struct{ in, host string }{
		{"::1", "127.0.0.1"},
		{"[::1]", "127.0.0.1"},
		{"2001:db8::1", "2001:db8::1"},
		{"[2001:db8::1]", "2001:db8::1"},
		{"Example.com", "example.com"},
		{"127.1", "127.0.0.1"},
	} {
		d, err := ParseHost(tc.in, 443)
		if err != nil || d.Host != tc.host || d.Port != 443 {
			t.Errorf("ParseHost(%q) = %+v, %v; want host %q", tc.in, d, err, tc.host)
		}
	}
	for _, tc := range []struct {
		in   string
		port uint16
	}{{"example.com", 0}, {"", 80}, {"[::1", 80}, {"[1.2.3.4]", 80}, {"fe80::1%eth0", 80}, {"example.com:80", 80}, {"[::1]:80", 80}} {
		if d, err := ParseHost(tc.in, tc.port); err == nil {
			t.Errorf("ParseHost(%q, %d) = %+v; want error", tc.in, tc.port, d)
		}
	}
}

func TestIDNHomoglyph(t *testing.T) {
	// "exаmple.com" with U+0430 CYRILLIC SMALL LETTER A.
	d, err := ParseHostPort("ex\u0430mple.com:443")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(d.Host, "xn--") || d.Host != "xn--exmple-4nf.com" {
		t.Errorf("homoglyph host = %q; want its xn-- form", d.Host)
	}
	p, err := ParsePattern("example.com")
	if err != nil {
		t.Fatal(err)
	}
	if p.Match(d) {
		t.Errorf("pattern example.com matched homoglyph %s", d)
	}
	if q, _ := ParsePattern("ex\u0430mple.com"); !q.Match(d) || q.String() != "xn--exmple-4nf.com" {
		t.Errorf("homoglyph pattern %q does not match its own destination", q)
	}
}

func TestLoopback(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"127.0.0.1:1", true}, {"127.9.9.9:1", true}, {"[::7f00:1]:1", true},
		{"[64:ff9b::7f00:1]:1", true}, {"[2002:7f00:1::1]:1", true}, {"localhost:1", true},
		{"10.0.0.1:1", false}, {"example.com:1", false}, {"[2001:db8::1]:1", false}, {"0.1.2.3:1", false},
	} {
		d, err := ParseHostPort(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if d.Loopback() != tc.want {
			t.Errorf("%q: Loopback() = %v; want %v", tc.in, d.Loopback(), tc.want)
		}
	}
}

func TestParseIPv4(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0.0.0.0", "4294967295": "255.255.255.255", "0xffffffff": "255.255.255.255",
		"037777777777": "255.255.255.255", "1.2": "1.0.0.2", "1.2.3": "1.2.0.3",
		"1.0xffffff": "1.255.255.255", "1.2.0xffff": "1.2.255.255", "0xFF.0.0.1": "255.0.0.1",
		"00": "0.0.0.0", "0x0": "0.0.0.0",
	} {
		a, ok := parseIPv4(in)
		if !ok || a.String() != want {
			t.Errorf("parseIPv4(%q) = %v, %v; want %s", in, a, ok, want)
		}
	}
	for _, in := range []string{"", ".", "1.", ".1", "1.2.3.4.5", "256.0.0.0", "1.0x1000000",
		"1.2.0x10000", "4294967296", "08", "09.1", "0x", "0xg", "-1", "+1", "1 ", "1.2.3.4 ",
		"99999999999999999999999"} {
		if a, ok := parseIPv4(in); ok {
			t.Errorf("parseIPv4(%q) = %v; want failure", in, a)
		}
	}
}

// Valid holds for what a parse makes and for nothing built otherwise:
// a host in another spelling, an address without its Addr (or the other
// way round), no port.
func TestValid(t *testing.T) {
	for _, s := range []string{"example.com:443", "127.0.0.1:80", "[2001:db8::1]:443", "10.1.2.3:5432"} {
		d, err := ParseHostPort(s)
		if err != nil || !d.Valid() {
			t.Errorf("%s: parsed %+v (%v) is not Valid", s, d, err)
		}
	}
	v4 := netip.MustParseAddr("10.1.2.3")
	for _, d := range []Dest{
		{},
		{Host: "example.com"},
		{Host: "Example.com", Port: 443},
		{Host: "example.com.", Port: 443},
		{Host: "10.1.2.3", Port: 80},
		{Host: "example.com", Port: 80, Addr: v4},
		{Host: "10.1.2.3", Port: 80, Addr: netip.MustParseAddr("10.1.2.4")},
		{Host: "localhost", Port: 80},
		{Host: "::1", Port: 80, Addr: netip.IPv6Loopback()},
		{Host: "[2001:db8::1]", Port: 443, Addr: netip.MustParseAddr("2001:db8::1")},
	} {
		if d.Valid() {
			t.Errorf("%+v is Valid", d)
		}
	}
}
