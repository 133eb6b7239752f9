package suggest

import (
	"path"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/netdest"
)

func fsAllow(op boundary.Operation, p string, src broker.Source) Boundary {
	return Boundary{Surface: boundary.Filesystem, Operation: op, Path: p, Decision: broker.Allow, Source: src}
}

// Which allows get a rule (the audit report's repeated allows): a
// reviewer's, a person's, a client's; never where a hard deny comes
// first, whatever the record says.
func TestAllowed(t *testing.T) {
	startup := func(req grants.Request) (string, bool) {
		if req.Path == "/home/u/.bashrc" {
			return "a start-up location: bash runs it", true
		}
		return "", false
	}
	for _, tc := range []struct {
		name string
		b    Boundary
		rule string
		why  string
	}{
		{"the model", fsAllow(boundary.OpWriteFile, "/home/u/data/x.csv", broker.SourceReviewer), "fs write_file ~/data/x.csv", ""},
		{"a person", fsAllow(boundary.OpMakeReg, "/srv/a b/[x]", broker.SourceHuman), `fs make_reg /srv/a\ b/\[x\]`, ""},
		{"a client", Boundary{Surface: boundary.Network, Operation: boundary.OpConnect, Destination: "example.org:443",
			Decision: broker.Allow, Source: broker.SourceClient}, "net connect example.org:443", ""},
		{"a policy rule already", fsAllow(boundary.OpWriteFile, "/etc/hosts", broker.SourcePolicy), "", `"policy"`},
		{"a grant", fsAllow(boundary.OpWriteFile, "/etc/hosts", broker.SourceGrant), "", `"grant"`},
		{"denied", fsDenial(boundary.OpWriteFile, "/etc/hosts", broker.SourceReviewer), "", "not allowed"},
		{"a start-up location", fsAllow(boundary.OpWriteFile, "/home/u/.bashrc", broker.SourceHuman), "", "start-up location"},
		{"invalid UTF-8", fsAllow(boundary.OpWriteFile, "/tmp/\xff", broker.SourceReviewer), "", "UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Allowed(tc.b, home, policyFile, startup)
			if s.Rule != tc.rule {
				t.Fatalf("rule %q, want %q (why %q)", s.Rule, tc.rule, s.Why)
			}
			if tc.rule == "" {
				if s.TOML != "" || !strings.Contains(s.Why, tc.why) {
					t.Fatalf("toml %q why %q, want %q", s.TOML, s.Why, tc.why)
				}
				return
			}
			checkSuggestion(t, tc.b, s, home)
		})
	}
	if s := Allowed(fsAllow(boundary.OpWriteFile, "/etc/hosts", broker.SourceHuman), home, policyFile, nil); s.Rule != "" {
		t.Fatalf("a rule offered without the hard denies checked: %q", s.Rule)
	}
}

// FuzzAllowed: the rule offered for a repeated allow parses back (TOML,
// then the rule) to exactly that boundary and nothing next to it.
func FuzzAllowed(f *testing.F) {
	f.Add("/home/u/my data/\"q\"\n*", "/home/u", "example.org", uint16(443), uint8(0))
	f.Add("/home/*/x", "/home/*", "[2001:db8::1]", uint16(8443), uint8(1))
	f.Add(`/home/a\b/\`, `/home/a\b`, "bücher.de", uint16(1), uint8(2))
	ops := boundary.Operations(boundary.Filesystem)
	by := []broker.Source{broker.SourceReviewer, broker.SourceHuman, broker.SourceClient}
	f.Fuzz(func(t *testing.T, name, home, host string, port uint16, pick uint8) {
		if len(name) > 1024 || len(home) > 256 || len(host) > 256 {
			return
		}
		b := fsAllow(ops[int(pick)%len(ops)], name, by[int(pick)%len(by)])
		s := Allowed(b, home, policyFile, nothingBefore)
		nameable := strings.HasPrefix(name, "/") && path.Clean(name) == name && utf8.ValidString(name) &&
			!strings.ContainsRune(name, utf8.RuneError) && !strings.ContainsRune(name, 0)
		if (s.Rule != "") != nameable {
			t.Fatalf("path %q: rule %q, why %q", name, s.Rule, s.Why)
		}
		if s.Rule != "" {
			checkSuggestion(t, b, s, home)
		}
		d, err := netdest.ParseHostPort(host + ":" + strconv.Itoa(int(port)))
		if err != nil {
			return
		}
		nb := Boundary{Surface: boundary.Network, Operation: boundary.OpConnect, Destination: d.String(), Decision: broker.Allow, Source: b.Source}
		if ns := Allowed(nb, home, policyFile, nothingBefore); ns.Rule == "" {
			t.Fatalf("destination %s: no rule: %s", d, ns.Why)
		} else {
			checkSuggestion(t, nb, ns, home)
		}
	})
}
