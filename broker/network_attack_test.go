package broker

import (
	"context"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/grants"
)

// Attacks on the network decision found in review; each is a regression test.

// An ask rule over a private range sends every connection into that range
// to a reviewer. An IP literal is reviewed (TestNetworkPipeline "private by
// CIDR ask"), but a name allowed by `net connect *` that resolves into the
// range is let through by Resolved with no review at all: the ask rule is
// only used there to lift the hard deny, never to ask.
func TestAttackAskRuleBypassedByName(t *testing.T) {
	for _, tc := range []struct{ ask, literal, addr string }{
		{"net connect 10.0.0.0/8:*", "10.1.2.3:5432", "10.1.2.3"},
		{"net connect 127.0.0.1:*", "127.0.0.1:2375", "127.0.0.1"}, // host loopback (docker API, ...)
	} {
		t.Run(tc.ask, func(t *testing.T) {
			model := &fakeReviewer{d: Decision{Outcome: Deny, RiskLevel: RiskHigh}}
			b := New(Config{
				Rules: Rules{Allow: []Rule{mustRule(t, "net connect *:*")}, Ask: []Rule{mustRule(t, tc.ask)}},
				Model: model, Grants: grants.NewStore(),
			})
			ctx := context.Background()
			// The literal: asked, and the reviewer denies.
			if d := b.Decide(ctx, heldReq(tc.literal, "")).Decision; d.Outcome != Deny || model.calls != 1 {
				t.Fatalf("literal: %+v (reviewer calls %d)", d, model.calls)
			}
			// The same address behind a name (e.g. 10.1.2.3.nip.io).
			_, port, _ := strings.Cut(tc.literal, ":")
			name := "db.attacker.example:" + port
			res := b.Decide(ctx, heldReq(name, ""))
			if res.Grant == nil {
				t.Fatalf("by name: %+v", res.Decision)
			}
			got := b.Resolved(ctx, res.Grant.Token, heldReq(name, tc.addr))
			if got.Decision.Outcome == Allow {
				t.Fatalf("BYPASS: %s resolving to %s allowed with no review (source %s, reviewer calls %d, grant %v): %q",
					name, tc.addr, got.Decision.Source, model.calls, got.Grant != nil, got.Decision.Rationale)
			}
		})
	}
}

// The same gap with the hard-deny list: a name resolving to one public and
// one private address must be refused as a whole (regression, passes).
func TestAttackMixedResolutionRefused(t *testing.T) {
	b := New(Config{Rules: Rules{Allow: []Rule{mustRule(t, "net connect *:*")}}, Grants: grants.NewStore(),
		Hard: HardDenies{Local: isAddr("8.9.10.11")}})
	ctx := context.Background()
	for _, addrs := range []string{
		"10.0.0.1,93.184.215.14",
		"93.184.215.14,fd00::1",
		"93.184.215.14,169.254.169.254",
		"8.9.10.11,93.184.215.14",              // the host's own (public) address
		"93.184.215.14,::ffff:7f00:1",          // mapped loopback (not canonical: malformed)
		"93.184.215.14,64:ff9b::a00:1",         // NAT64 private
		"2002:7f00:1::1,93.184.215.14",         // 6to4 loopback
		"93.184.215.14,fe80::1%eth0",           // zone
		"93.184.215.14,93.184.215.14",          // duplicates
		"93.184.215.14, 10.0.0.1",              // a space
		"93.184.215.14,,10.0.0.1",              // an empty element
		"0.0.0.0,93.184.215.14",                // unspecified
		"93.184.215.14,100.100.100.200",        // alibaba metadata
		"93.184.215.14,fd00:ec2::254",          // aws v6 metadata
		"93.184.215.14,2001:db8::1",            // documentation
		"93.184.215.14,::a00:1",                // v4-compatible
		"93.184.215.14,ff02::1",                // multicast
		"93.184.215.14,192.0.0.170",            // NAT64 discovery
		"93.184.215.14,255.255.255.255",        // broadcast
		"93.184.215.14,not-an-address",         // junk
		"93.184.215.14,10.0.0.1\x0093.184.1.1", // NUL
	} {
		res := b.Decide(ctx, heldReq("a.example.com:443", ""))
		if res.Grant == nil {
			t.Fatalf("by name: %+v", res.Decision)
		}
		if got := b.Resolved(ctx, res.Grant.Token, heldReq("a.example.com:443", addrs)); got.Decision.Outcome == Allow {
			t.Errorf("%q allowed", addrs)
		}
	}
}

// The circuit breaker: three hard-denied IP literals lock the session, but
// any number of names resolving to private addresses (an SSRF scan of the
// internal network through DNS) never do: Decide counts each as an allow
// (resetting the consecutive count) and the Resolved hard deny is not
// counted.
func TestAttackBreakerBlindToResolvedDenials(t *testing.T) {
	dir := t.TempDir()
	b := New(Config{Rules: Rules{Allow: []Rule{mustRule(t, "net connect *:*")}}, Grants: grants.NewStore(), Breaker: NewBreaker(dir)})
	ctx := context.Background()
	for i := range 20 {
		name := "h" + string(rune('a'+i)) + ".corp.example:22"
		res := b.Decide(ctx, heldReq(name, ""))
		if res.Grant == nil {
			if res.Decision.Source == SourceCircuitBreaker {
				return // locked: the breaker saw them
			}
			t.Fatalf("%s: %+v", name, res.Decision)
		}
		if got := b.Resolved(ctx, res.Grant.Token, heldReq(name, "10.0.0."+string(rune('1'+i%9)))); got.Decision.Outcome == Allow {
			t.Fatalf("%s allowed", name)
		}
	}
	locked, _, _ := NewBreaker(dir).Locked("s")
	if !locked {
		t.Fatal("20 hard-denied connections to private addresses (via names) did not lock the session; " +
			"3 hard-denied literals would")
	}
}

// A grant issued for one destination cannot carry another, nor other
// addresses, nor another session (regression, passes).
func TestAttackGrantBinding(t *testing.T) {
	b := New(Config{Rules: Rules{Allow: []Rule{mustRule(t, "net connect *:*"), mustRule(t, "net connect 8.8.8.8:443")}}, Grants: grants.NewStore()})
	ctx := context.Background()
	res := b.Decide(ctx, heldReq("8.8.8.8:443", "8.8.8.8"))
	if res.Grant == nil {
		t.Fatal(res.Decision)
	}
	for _, other := range []grants.Request{
		heldReq("8.8.4.4:443", "8.8.4.4"),
		heldReq("8.8.8.8:444", "8.8.8.8"),
		heldReq("8.8.8.8:443", "8.8.8.8,8.8.4.4"),
		func() grants.Request { r := heldReq("8.8.8.8:443", "8.8.8.8"); r.Session = "s2"; return r }(),
	} {
		r2 := b.Decide(ctx, heldReq("8.8.8.8:443", "8.8.8.8"))
		if err := b.Consume(ctx, r2.Grant.Token, other); err == nil {
			t.Errorf("grant for 8.8.8.8:443 carried %+v", other)
		}
	}
	// A name's (pre-lookup) grant cannot be used as a connection grant.
	byName := b.Decide(ctx, heldReq("a.example.com:443", ""))
	if err := b.Consume(ctx, byName.Grant.Token, heldReq("a.example.com:443", "10.0.0.1")); err == nil {
		t.Error("a name's grant carried a connection to addresses never checked")
	}
}
