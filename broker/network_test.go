package broker

import (
	"context"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/netdest"
)

// heldReq is a held network request; addrs is comma-separated, each
// element typed as the proxy would hand it over, in the order given. An
// element that is no address (a space, an empty element, junk) becomes
// the invalid netip.Addr, which the broker must refuse like any other
// malformed address.
func heldReq(dest, addrs string) grants.Request {
	r := netReq(dest)
	r.Held = true
	if addrs != "" {
		for _, s := range strings.Split(addrs, ",") {
			a, _ := netip.ParseAddr(s)
			r.Addresses = append(r.Addresses, a)
		}
	}
	return r
}

// Network decisions: host rules name names, IP rules name addresses, and
// an address that is not public is reached only under a rule naming it.
func TestNetworkPipeline(t *testing.T) {
	allowAll := &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh}}
	for _, tc := range []struct {
		name  string
		allow []string
		ask   []string
		deny  []string
		model Reviewer
		req   grants.Request
		want  Outcome
		src   Source
	}{
		{"exact host default ports", []string{"net connect example.com"}, nil, nil, nil, heldReq("example.com:443", ""), Allow, SourcePolicy},
		{"exact host port 80", []string{"net connect example.com"}, nil, nil, nil, heldReq("example.com:80", ""), Allow, SourcePolicy},
		{"exact host other port", []string{"net connect example.com"}, nil, nil, nil, heldReq("example.com:8443", ""), Deny, SourceNoReviewer},
		{"wildcard is not the apex", []string{"net connect *.example.com"}, nil, nil, nil, heldReq("example.com:443", ""), Deny, SourceNoReviewer},
		{"wildcard trap", []string{"net connect *.example.com"}, nil, nil, nil, heldReq("evilexample.com:443", ""), Deny, SourceNoReviewer},
		{"suffix trap", []string{"net connect example.com:*"}, nil, nil, nil, heldReq("example.com.evil.test:443", ""), Deny, SourceNoReviewer},
		{"star never names an IP", []string{"net connect *:*"}, nil, nil, nil, heldReq("8.8.8.8:443", ""), Deny, SourceNoReviewer},
		{"public IP by rule", []string{"net connect 8.8.8.8:443"}, nil, nil, nil, heldReq("8.8.8.8:443", ""), Allow, SourcePolicy},
		{"public IP reviewed", nil, nil, nil, allowAll, heldReq("8.8.8.8:443", ""), Allow, SourceReviewer},
		{"loopback without rule", []string{"net connect *:*"}, nil, nil, allowAll, heldReq("127.0.0.1:8080", ""), Deny, SourceHardDeny},
		{"loopback named", []string{"net connect 127.0.0.1:8080"}, nil, nil, nil, heldReq("127.0.0.1:8080", ""), Allow, SourcePolicy},
		{"loopback other port", []string{"net connect 127.0.0.1:8080"}, nil, nil, allowAll, heldReq("127.0.0.1:8081", ""), Deny, SourceHardDeny},
		{"private by CIDR ask", nil, []string{"net connect 10.0.0.0/8:5432"}, nil, allowAll, heldReq("10.1.2.3:5432", ""), Allow, SourceReviewer},
		{"private unnamed", nil, nil, nil, allowAll, heldReq("10.1.2.3:5432", ""), Deny, SourceHardDeny},
		{"host's own address", nil, nil, nil, allowAll, heldReq("203.0.114.7:22", ""), Deny, SourceHardDeny},
		{"metadata named is still refused", []string{"net connect 169.254.169.254:80"}, nil, nil, allowAll, heldReq("169.254.169.254:80", ""), Deny, SourceHardDeny},
		{"deny beats allow", []string{"net connect *.example.com"}, nil, []string{"net connect a.example.com"}, nil, heldReq("a.example.com:443", ""), Deny, SourcePolicy},
		{"ask beats allow", []string{"net connect *.example.com"}, []string{"net connect a.example.com"}, nil, nil, heldReq("a.example.com:443", ""), Deny, SourceNoReviewer},
		{"not normalised", []string{"net connect *:*"}, nil, nil, allowAll, heldReq("Example.com:443", ""), Deny, SourceError},
		{"addresses unsorted", []string{"net connect *:*"}, nil, nil, allowAll, heldReq("example.com:443", "9.9.9.9,8.8.8.8"), Deny, SourceError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rules Rules
			for _, set := range []struct {
				in  []string
				out *[]Rule
			}{{tc.allow, &rules.Allow}, {tc.ask, &rules.Ask}, {tc.deny, &rules.Deny}} {
				for _, s := range set.in {
					*set.out = append(*set.out, mustRule(t, s))
				}
			}
			b := New(Config{Rules: rules, Model: tc.model, Grants: grants.NewStore(),
				Hard: HardDenies{Local: isAddr("203.0.114.7")}})
			res := b.Decide(context.Background(), tc.req)
			if res.Decision.Outcome != tc.want || res.Decision.Source != tc.src {
				t.Fatalf("got %s/%s (%s), want %s/%s", res.Decision.Outcome, res.Decision.Source, res.Decision.Rationale, tc.want, tc.src)
			}
			if (res.Grant != nil) != (tc.want == Allow) {
				t.Fatalf("grant %v for %s", res.Grant, tc.want)
			}
		})
	}
}

// An allowed name's grant is exchanged, once, for one bound to the
// addresses it resolved to; a name that resolves to loopback is refused
// there, and its grant is gone.
func TestResolved(t *testing.T) {
	store := grants.NewStore()
	b := New(Config{Rules: Rules{Allow: []Rule{mustRule(t, "net connect *.example.com")}}, Grants: store})
	ctx := context.Background()
	byName := heldReq("a.example.com:443", "")
	res := b.Decide(ctx, byName)
	if res.Grant == nil || res.Grant.Uses != 1 {
		t.Fatalf("by name: %+v", res)
	}
	loop := b.Resolved(ctx, res.Grant.Token, heldReq("a.example.com:443", "127.0.0.1"))
	if loop.Decision.Outcome != Deny || loop.Decision.Source != SourceHardDeny || !strings.Contains(loop.Decision.Rationale, "resolves to 127.0.0.1") {
		t.Fatalf("resolved to loopback: %+v", loop.Decision)
	}
	if store.Len() != 0 {
		t.Fatalf("%d grants left after a refused resolution", store.Len())
	}
	res = b.Decide(ctx, byName)
	resolved := heldReq("a.example.com:443", "93.184.215.14")
	ok := b.Resolved(ctx, res.Grant.Token, resolved)
	if ok.Decision.Outcome != Allow || ok.Grant == nil || ok.Grant.Uses != grants.Unlimited {
		t.Fatalf("resolved: %+v", ok)
	}
	if again := b.Resolved(ctx, res.Grant.Token, resolved); again.Decision.Outcome != Deny {
		t.Fatalf("the name's grant was exchanged twice: %+v", again.Decision)
	}
	for range 50 {
		if err := b.Consume(ctx, ok.Grant.Token, resolved); err != nil {
			t.Fatalf("use: %v", err)
		}
	}
	if err := b.Consume(ctx, ok.Grant.Token, heldReq("a.example.com:443", "10.0.0.1")); err == nil {
		t.Fatal("the grant carried other addresses")
	}
}

// A deny rule naming an address stops a name that resolves to it.
func TestResolvedDenyRule(t *testing.T) {
	b := New(Config{Rules: Rules{Allow: []Rule{mustRule(t, "net connect *.example.com")}, Deny: []Rule{mustRule(t, "net connect 93.184.0.0/16:*")}},
		Grants: grants.NewStore()})
	ctx := context.Background()
	res := b.Decide(ctx, heldReq("a.example.com:443", ""))
	got := b.Resolved(ctx, res.Grant.Token, heldReq("a.example.com:443", "93.184.215.14"))
	if got.Decision.Outcome != Deny || got.Decision.Source != SourcePolicy {
		t.Fatalf("%+v", got.Decision)
	}
}

// Per-connection scope: every grant covers one connection.
func TestNetworkUsesOne(t *testing.T) {
	b := New(Config{Rules: Rules{Allow: []Rule{mustRule(t, "net connect 8.8.8.8:443")}}, Grants: grants.NewStore(), NetworkUses: 1})
	ctx := context.Background()
	req := heldReq("8.8.8.8:443", "8.8.8.8")
	res := b.Decide(ctx, req)
	if err := b.Consume(ctx, res.Grant.Token, req); err != nil {
		t.Fatal(err)
	}
	if err := b.Consume(ctx, res.Grant.Token, req); err == nil {
		t.Fatal("a per-connection grant carried two connections")
	}
}

// isAddr is a HardDenies.Local that knows one address.
func isAddr(s string) func(netip.Addr) bool {
	want := netip.MustParseAddr(s)
	return func(a netip.Addr) bool { return a == want }
}

// The refusal of a non-public address reads as English for every range
// netdest.Special can name and for the host's own addresses: one
// article that agrees with the word after it, no "address address".
func TestNotPublicSentence(t *testing.T) {
	article := regexp.MustCompile(`\b(a|an) (\S+)`)
	ip := netdest.Dest{Host: "192.0.2.1", Port: 80, Addr: netip.MustParseAddr("192.0.2.1")}
	name := netdest.Dest{Host: "example.test", Port: 80}
	a := netip.MustParseAddr("192.0.2.1")
	for _, why := range append(netdest.SpecialNames(), ownAddress) {
		t.Run(why, func(t *testing.T) {
			phrase := addressPhrase(why)
			if phrase == unknownRange(why) {
				t.Errorf("no phrase for %q", why)
			}
			for _, s := range []string{notPublic(ip, a, why), notPublic(name, a, why)} {
				head, _, _ := strings.Cut(s, ";")
				for _, bad := range []string{"an one", "address address", "addresses address", "  ", "a a ", "an an "} {
					if strings.Contains(head, bad) {
						t.Errorf("%q contains %q", head, bad)
					}
				}
				if !strings.Contains(head, "address") {
					t.Errorf("%q names no address", head)
				}
				for _, m := range article.FindAllStringSubmatch(head, -1) {
					vowel := strings.ContainsRune("aeiouAEIOU", rune(m[2][0])) && m[2] != "unique"
					if (m[1] == "an") != vowel {
						t.Errorf("%q: %q %q", head, m[1], m[2])
					}
				}
			}
		})
	}
	for _, tc := range []struct{ why, want string }{
		{ownAddress, "192.0.2.1:80 is one of this host's own addresses; only"},
		{"loopback", "192.0.2.1:80 is a loopback address; only"},
		{"unique local (ULA)", "192.0.2.1:80 is a unique local address (ULA); only"},
		{"NAT64 private (RFC 1918)", "192.0.2.1:80 is a NAT64 form of a private address (RFC 1918); only"},
		{"IPv4-mapped shared address space (CGNAT)", "192.0.2.1:80 is an IPv4-mapped form of an address in the shared address space (CGNAT); only"},
	} {
		if got := notPublic(ip, a, tc.why); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want it to start %q", tc.why, got, tc.want)
		}
	}
	if got := notPublic(name, a, "link-local"); !strings.HasPrefix(got, "example.test:80 resolves to 192.0.2.1, which is a link-local address; only") {
		t.Errorf("name: %q", got)
	}
}

// The host's own address is refused with that sentence, end to end.
func TestOwnAddressRationale(t *testing.T) {
	b := New(Config{Grants: grants.NewStore(), Hard: HardDenies{Local: isAddr("203.0.114.7")}})
	d := b.Decide(context.Background(), heldReq("203.0.114.7:22", "")).Decision
	if want := "203.0.114.7:22 is one of this host's own addresses; only an allow or ask rule"; !strings.HasPrefix(d.Rationale, want) {
		t.Fatalf("rationale %q, want it to start %q", d.Rationale, want)
	}
}

// Cloud metadata endpoints are a hard deny whatever names them and
// whatever rule, reviewer or person would open them: the WireServer by
// its (public) address, by a rule naming it exactly, by a range, by a
// name resolving to it (alone or among other addresses, on any port),
// the EKS Pod Identity Agent over IPv6, and names of the class. The
// model is never asked and the rationale says whose endpoint it is.
func TestMetadataClass(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		allow  []string
		ask    []string
		dest   string
		addrs  string // what the name resolved to ("": decided before any lookup)
		whose  string
		lookup bool // the name is allowed before its lookup; Resolved refuses
	}{
		{"wireserver reviewed", nil, nil, "168.63.129.16:80", "", "Azure", false},
		{"wireserver named by an allow rule", []string{"net connect 168.63.129.16:80"}, nil, "168.63.129.16:80", "", "Azure", false},
		{"host agent port named", []string{"net connect 168.63.129.16:32526"}, nil, "168.63.129.16:32526", "", "Azure", false},
		{"wireserver by a range", []string{"net connect 168.63.0.0/16:*"}, nil, "168.63.129.16:443", "", "Azure", false},
		{"wireserver by an ask rule", nil, []string{"net connect 168.63.129.16:*"}, "168.63.129.16:80", "", "Azure", false},
		{"wireserver as NAT64", []string{"net connect [64:ff9b::/96]:*"}, nil, "[64:ff9b::a83f:8110]:80", "", "Azure", false},
		{"eks agent over IPv6", []string{"net connect [fd00:ec2::23]:80"}, nil, "[fd00:ec2::23]:80", "", "AWS", false},
		{"imds", []string{"net connect 169.254.169.254:80"}, nil, "169.254.169.254:80", "", "AWS, Azure, Google Cloud", false},
		{"scaleway", []string{"net connect 169.254.42.42:80"}, nil, "169.254.42.42:80", "", "Scaleway", false},
		{"tencent name", []string{"net connect metadata.tencentyun.com"}, nil, "metadata.tencentyun.com:80", "", "Tencent Cloud", false},
		{"name resolving to the wireserver", []string{"net connect wire.example.com:*", "net connect 168.63.129.16:*"}, nil, "wire.example.com:80", "168.63.129.16", "Azure", true},
		{"name resolving to it among others", []string{"net connect *"}, nil, "mixed.example.com:443", "93.184.215.14,168.63.129.16", "Azure", true},
		{"name resolving to byteplus", []string{"net connect *:*"}, nil, "mixed.example.com:8080", "100.96.0.96", "BytePlus (Volcengine)", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rules Rules
			for _, r := range tc.allow {
				rules.Allow = append(rules.Allow, mustRule(t, r))
			}
			for _, r := range tc.ask {
				rules.Ask = append(rules.Ask, mustRule(t, r))
			}
			model := &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh}}
			b := New(Config{Rules: rules, Model: model, Grants: grants.NewStore()})
			res := b.Decide(ctx, heldReq(tc.dest, ""))
			if tc.lookup {
				if res.Grant == nil {
					t.Fatalf("the name was not allowed before its lookup: %+v", res.Decision)
				}
				res = b.Resolved(ctx, res.Grant.Token, heldReq(tc.dest, tc.addrs))
			}
			d := res.Decision
			if d.Outcome != Deny || d.Source != SourceHardDeny || res.Grant != nil {
				t.Fatalf("%+v, grant %v", d, res.Grant)
			}
			if !strings.Contains(d.Rationale, "a cloud metadata endpoint ("+tc.whose) || !strings.Contains(d.Rationale, "no rule or reviewer opens one") {
				t.Errorf("rationale %q does not say whose endpoint (%s) it is", d.Rationale, tc.whose)
			}
			if model.calls != 0 {
				t.Errorf("the model was asked %d times", model.calls)
			}
		})
	}
}
