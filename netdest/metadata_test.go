package netdest

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// Every row is one address or one name in normal form, with whose it is
// and where that is written.
func TestMetadataTable(t *testing.T) {
	for _, e := range MetadataEndpoints() {
		if e.Prefix.IsValid() == (e.Name != "") {
			t.Errorf("%+v: want exactly one of an address and a name", e)
		}
		if e.Name != "" {
			if d, err := ParseHost(e.Name, 80); err != nil || d.Host != e.Name || d.IsIP() {
				t.Errorf("%q is not a name in normal form: %+v %v", e.Name, d, err)
			}
		}
		if e.Prefix.IsValid() && (e.Prefix != e.Prefix.Masked() || e.Prefix.Addr().Is4In6() || e.Prefix.Addr().Zone() != "") {
			t.Errorf("%s is not a canonical prefix", e.Prefix)
		}
		if e.Provider == "" || e.Service == "" || !strings.HasPrefix(e.Source, "https://") {
			t.Errorf("%+v: provider, service and an https source are required", e)
		}
	}
}

// A metadata endpoint is matched in every spelling that reaches it: a
// name in any case, with a trailing dot or in full-width letters; an
// address in every inet_aton form, IPv4-mapped, IPv4-compatible, NAT64
// and 6to4; an IPv6 address in any notation. What ParseHostPort refuses
// (a zone) never gets this far: the broker refuses it as malformed.
func TestMetadataSpellings(t *testing.T) {
	for _, tc := range []struct {
		host     string
		provider string // one of the providers it must name; "" = none
	}{
		{"168.63.129.16", "Azure"},
		{"168.63.129.16.", "Azure"},
		{"2822734096", "Azure"},
		{"0xa83f8110", "Azure"},
		{"0250.077.0201.020", "Azure"},
		{"168.63.33040", "Azure"},
		{"168.4161808", "Azure"},
		{"[::ffff:168.63.129.16]", "Azure"},
		{"[::ffff:a83f:8110]", "Azure"},
		{"[::a83f:8110]", "Azure"},
		{"[64:ff9b::a83f:8110]", "Azure"},
		{"[64:ff9b:1::a83f:8110]", "Azure"},
		{"[2002:a83f:8110::1]", "Azure"},
		{"169.254.169.254", "AWS"},
		{"169.254.169.254", "Google Cloud"},
		{"2852039166", "Azure"},
		{"0xa9fea9fe", "Oracle Cloud"},
		{"0251.0376.0251.0376", "AWS"},
		{"169.254.43518", "AWS"},
		{"169.16689662", "AWS"},
		{"[::ffff:169.254.169.254]", "AWS"},
		{"169.254.170.2", "AWS"},
		{"169.254.170.23", "AWS"},
		{"[fd00:ec2:0::23]", "AWS"},
		{"[FD00:EC2::23]", "AWS"},
		{"[fd00:ec2::254]", "AWS"},
		{"[fd00:c1::a9fe:a9fe]", "Oracle Cloud"},
		{"[fd00:a9fe:a9fe::1]", "Akamai (Linode)"},
		{"[fe80::a9fe:a9fe]", "OpenStack"},
		{"100.100.100.200", "Alibaba Cloud"},
		{"100.96.0.96", "BytePlus (Volcengine)"},
		{"169.254.42.42", "Scaleway"},
		{"[fd00:42::42]", "Scaleway"},
		{"metadata.google.internal", "Google Cloud"},
		{"METADATA.GOOGLE.INTERNAL.", "Google Cloud"},
		{"Metadata", "Google Cloud"},
		{"\uff4d\uff45\uff54\uff41\uff44\uff41\uff54\uff41.google.internal", "Google Cloud"},
		{"metadata.tencentyun.com.", "Tencent Cloud"},
		{"API.Metadata.Cloud.IBM.com", "IBM Cloud"},
		{"global.cloudinit.sdns.ksyun.com", "Kingsoft Cloud"},
		{"168.63.129.17", ""},
		{"168.63.129.15", ""},
		{"169.254.169.253", ""},
		{"169.254.170.24", ""},
		{"[fd00:ec2::255]", ""},
		{"100.100.100.201", ""},
		{"8.8.8.8", ""},
		{"example.org", ""},
		{"x.metadata.google.internal", ""},
		{"metadata.google.internal.example.org", ""},
		{"metadata.goog.example", ""},
	} {
		d, err := ParseHost(tc.host, 80)
		if err != nil {
			t.Errorf("%s: %v", tc.host, err)
			continue
		}
		var providers []string
		for _, e := range Metadata(d) {
			providers = append(providers, e.Provider)
		}
		if ok := slices.Contains(providers, tc.provider); tc.provider != "" && !ok {
			t.Errorf("%s (%s): providers %v, want %s among them", tc.host, d.Host, providers, tc.provider)
		} else if tc.provider == "" && len(providers) > 0 {
			t.Errorf("%s (%s) taken for a metadata endpoint of %v", tc.host, d.Host, providers)
		}
	}
	if _, err := ParseHost("[fe80::a9fe:a9fe%eth0]", 80); err == nil {
		t.Error("a zoned address parsed")
	}
	if len(MetadataAddr(netip.MustParseAddr("fe80::a9fe:a9fe%eth0"))) == 0 {
		t.Error("a zone hid fe80::a9fe:a9fe")
	}
	if len(MetadataAddr(netip.Addr{})) != 0 {
		t.Error("the invalid address is a metadata endpoint")
	}
}

// Azure's WireServer is a public address: only the metadata class
// refuses it, which is why the class is more than the special ranges.
func TestWireServerIsPublic(t *testing.T) {
	if why := Special(netip.MustParseAddr("168.63.129.16")); why != "" {
		t.Fatalf("168.63.129.16 is %q; this test documents that it is public", why)
	}
}
