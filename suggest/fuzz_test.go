package suggest

import (
	"path"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/netdest"
)

// FuzzSuggest: for any denied path (and home) or destination, a rule is
// offered exactly when one can name it, its TOML parses (as the policy
// loads it) to that one rule, and the rule parses with the same home to
// one that matches that boundary and no name or destination next to it.
func FuzzSuggest(f *testing.F) {
	for _, s := range []struct {
		name, home, host string
		port             uint16
		pick             uint8
	}{
		{"/etc/hosts", "/home/u", "example.org", 443, 0},
		{"/home/u/my data/\"q\"\n*", "/home/u", "[2001:db8::1]", 8443, 1},
		{"/home/*/x", "/home/*", "10.0.0.1", 5432, 2},
		{"/home/a b/[x]?", "/home/a b", "bücher.de", 80, 3},
		{`/home/a\b/\`, `/home/a\b`, "[::ffff:10.1.2.3]", 1, 4},
		{"/~/x", "~", "xn--bcher-kva.de", 65535, 5},
		{"/srv/\u202e\u00a0\u3000\x1b", "/", "localhost", 3000, 6},
		{"/home/u/**", "/home/u/", "a.b.c", 22, 7},
		{"/\xff", "/home/u", "127.0.0.1", 8080, 8},
	} {
		f.Add(s.name, s.home, s.host, s.port, s.pick)
	}
	ops := boundary.Operations(boundary.Filesystem)
	offered := []broker.Source{broker.SourceNoReviewer, broker.SourceReviewer, broker.SourceHuman}
	f.Fuzz(func(t *testing.T, name, home, host string, port uint16, pick uint8) {
		if len(name) > 1024 || len(home) > 256 || len(host) > 256 {
			return
		}
		src := offered[int(pick)%len(offered)]
		b := fsDenial(ops[int(pick)%len(ops)], name, src)
		s := For(b, home, policyFile, nothingBefore)
		nameable := strings.HasPrefix(name, "/") && path.Clean(name) == name && utf8.ValidString(name) &&
			!strings.ContainsRune(name, utf8.RuneError) && !strings.ContainsRune(name, 0)
		if (s.Rule != "") != nameable {
			t.Fatalf("path %q: rule %q, why %q", name, s.Rule, s.Why)
		}
		if s.Rule != "" {
			checkSuggestion(t, b, s, home)
		}
		if pick%5 == 0 {
			// The same boundary from a source no allow rule overrides.
			b.Source = []broker.Source{broker.SourceHardDeny, broker.SourcePolicy, broker.SourceError,
				broker.SourceCircuitBreaker, broker.SourceQuiet}[int(pick/5)%5]
			if s := For(b, home, policyFile, nothingBefore); s.Rule != "" || s.Why == "" {
				t.Fatalf("%s: %+v", b.Source, s)
			}
		}
		d, err := netdest.ParseHostPort(host + ":" + strconv.Itoa(int(port)))
		if err != nil {
			return
		}
		nb := netDenial(d.String(), src)
		ns := For(nb, home, policyFile, nothingBefore)
		if ns.Rule == "" {
			t.Fatalf("destination %s: no rule: %s", d, ns.Why)
		}
		checkSuggestion(t, nb, ns, home)
	})
}
