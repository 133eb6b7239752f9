package session

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/envlist"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/netdest"
	"github.com/sandboxd/sandboxd/netproxy"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/sandbox"
)

// egressPlan is the run's way out, chosen before the first attempt: the
// proxy's port inside the namespace and its credential.
type egressPlan struct {
	port  uint16
	token string
}

// newEgressPlan picks the proxy's port, in the kernel's ephemeral range
// (so no port the command binds itself by number is likely taken, and an
// ephemeral bind skips it), and a fresh credential.
func newEgressPlan() egressPlan {
	var b [34]byte
	rand.Read(b[:])
	port := 32768 + binary.BigEndian.Uint16(b[:2])%(60999-32768)
	return egressPlan{port: port, token: hex.EncodeToString(b[2:])}
}

// proxyURL is what the command's proxy variables hold.
func (e egressPlan) proxyURL() string {
	return "http://sandboxd:" + e.token + "@127.0.0.1:" + strconv.Itoa(int(e.port))
}

// socksAddr is the SOCKS5 endpoint's address inside the run.
func (e egressPlan) socksAddr() string { return "127.0.0.1:" + strconv.Itoa(int(e.port)+2) }

// openbsdNC is OpenBSD netcat, whose -X 5 speaks SOCKS5 for ssh's
// ProxyCommand ("" when it is not installed).
func openbsdNC() string {
	for _, p := range []string{"/usr/bin/nc.openbsd", "/bin/nc.openbsd"} {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// env is the environment that sends unmodified tools through the proxy:
// the conventional variables in both cases (ALL_PROXY names the SOCKS5
// endpoint, socks5h: names resolved by the proxy), git's ssh through
// it when OpenBSD netcat is there, the tool-specific ones of
// tools that do not read them, and git's http.proxy through
// GIT_CONFIG_COUNT (the caller's own GIT_CONFIG_* entries never reach the
// command: see dropGitConfigEnv). NO_PROXY is empty: every request goes
// to the proxy, which delivers one for the run's own loopback there.
func (e egressPlan) env() []string {
	u := e.proxyURL()
	out := []string{"ALL_PROXY=socks5h://" + e.socksAddr(), "all_proxy=socks5h://" + e.socksAddr()}
	if nc := openbsdNC(); nc != "" {
		// git over ssh through the SOCKS5 endpoint (without capture the
		// only way out for ssh; with it, the same decision).
		out = append(out, "GIT_SSH_COMMAND=ssh -o 'ProxyCommand="+nc+" -X 5 -x "+e.socksAddr()+" %h %p'")
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY",
		"npm_config_proxy", "npm_config_https_proxy", "YARN_HTTP_PROXY", "YARN_HTTPS_PROXY",
		"yarn_proxy", "yarn_https_proxy", "PIP_PROXY"} {
		out = append(out, k+"="+u)
		if lk := strings.ToLower(k); lk != k {
			out = append(out, lk+"="+u)
		}
	}
	out = append(out, "NO_PROXY=", "no_proxy=", "npm_config_noproxy=")
	return append(out, "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.proxy", "GIT_CONFIG_VALUE_0="+u)
}

// envFor is env for a command whose own environment is environ: the
// caller's GIT_SSH_COMMAND (a key, options of its own) is kept, since
// with capture its connects are decided anyway.
func (e egressPlan) envFor(environ []string) []string {
	env := e.env()
	if _, ok := envlist.Lookup(environ, "GIT_SSH_COMMAND"); ok {
		return envlist.Drop(env, "GIT_SSH_COMMAND")
	}
	return env
}

// dropGitConfigEnv removes git's configuration-by-environment entries
// (GIT_CONFIG_COUNT, GIT_CONFIG_KEY_n, GIT_CONFIG_VALUE_n): the credential
// filter strips the keys (they match *_KEY_*) and would leave git a count
// it cannot satisfy, and the values can carry credentials
// (http.extraHeader).
func dropGitConfigEnv(env []string) []string {
	return envlist.DropFunc(env, func(k string) bool {
		return k == "GIT_CONFIG_COUNT" || strings.HasPrefix(k, "GIT_CONFIG_KEY_") || strings.HasPrefix(k, "GIT_CONFIG_VALUE_")
	})
}

// netLimits are the proxy's limits from the policy.
func netLimits(n policy.Network) netproxy.Limits {
	return netproxy.Limits{Hold: time.Duration(n.HoldTimeout), MaxConns: int(n.MaxConnections), MaxDests: int(n.MaxDestinations)}
}

// newProxy builds the run's proxy; its decider is the run's broker.
func (st *run) newProxy() (*netproxy.Proxy, error) {
	n := st.plan.policy.Network
	// Every connection the proxy makes for the run is the caller's.
	dial := dialer(st.caller, st.r.reserved).DialContext
	var res netproxy.Resolver
	if n.Resolver != "" {
		res = dnsServer(n.Resolver, dial)
	}
	scope := netproxy.ScopeRun
	if n.GrantScope == policy.ScopeConnection {
		scope = netproxy.ScopeConnection
	}
	return netproxy.New(netproxy.Config{
		Decider: egressDecider{st}, Token: st.plan.egress.token, Resolver: res,
		Reserved: st.r.reserved, Scope: scope, Limits: netLimits(n), Log: st.r.log, Dial: dial,
	})
}

// dnsServer is a resolver that asks only the DNS server at addr, through
// dial (as the caller).
func dnsServer(addr string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dial(ctx, network, addr)
	}}
}

// localAddrCheck reports whether an address is one of the host's own
// interface addresses; they are read when a network request first needs
// them, once per run (not at every launch).
func localAddrCheck() func(netip.Addr) bool {
	addrs := sync.OnceValue(localAddrs)
	return func(a netip.Addr) bool { return slices.Contains(addrs(), a) }
}

// localAddrs reads the host's own interface addresses.
func localAddrs() []netip.Addr {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range as {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}

// egressDecider is the broker, seen from the proxy: each destination is
// decided while its connection waits and recorded once, as a held
// network boundary or, when the policy allowed it, under egress.allowed.
type egressDecider struct{ st *run }

// request is the broker's request for what the proxy asks: the
// destination and addresses as the proxy typed them, never text.
func (e egressDecider) request(r netproxy.Request) grants.Request {
	req := e.st.request(sandbox.Denial{Surface: boundary.Network, Operation: boundary.OpConnect})
	req.Held, req.Destination, req.Addresses = true, r.Dest, canonicalAddrs(r.Addrs)
	return req
}

// Decide has the broker decide a destination while its connection waits.
// A loopback destination nothing listens on (inside the proxy already
// looked) that the hard denies refuse is no boundary: a client polling
// for a dev server it is still starting gets the same 403 as any other
// unruled loopback port (so the answer says nothing about which host
// ports listen), but nothing is recorded or counted, and the next
// connection is decided again.
func (e egressDecider) Decide(ctx context.Context, r netproxy.Request) netproxy.Verdict {
	req := e.request(r)
	if r.Dest.Loopback() && !sandbox.LoopbackListens(r.Dest.Port) {
		res := e.st.plan.broker.DecideAgain(ctx, req)
		if res.Decision.Source == broker.SourceHardDeny {
			v := verdict(res)
			v.Once = true
			return v
		}
		e.st.noteNetwork(req, res.Decision, res.Grant != nil)
		return e.st.keepGrant(verdict(res))
	}
	e.st.holdNetwork(req)
	start := time.Now()
	res := e.st.askRequest(ctx, req)
	if reviewed(res.Decision) {
		e.st.countReview(time.Since(start))
	}
	e.st.noteNetwork(req, res.Decision, res.Grant != nil)
	if res.Grant != nil && len(req.Addresses) > 0 {
		e.st.noteAddresses(req)
	}
	return e.st.keepGrant(verdict(res))
}

// reviewed reports whether a reviewer (the model or a person, at a
// terminal or through a client) answered.
func reviewed(d broker.Decision) bool {
	return d.Source == broker.SourceReviewer || d.Source == broker.SourceHuman || d.Source == broker.SourceClient || d.Source == broker.SourcePage
}

// policyAllowed reports whether the policy allowed a request outright:
// no refusal happened and nobody was asked, so it is no boundary.
func policyAllowed(d broker.Decision, granted bool) bool {
	return d.Outcome == broker.Allow && d.Source == broker.SourcePolicy && granted
}

// countReview counts one destination a reviewer answered.
func (st *run) countReview(wait time.Duration) {
	st.mu.Lock()
	st.netReviews++
	st.netReviewWait += wait
	st.mu.Unlock()
}

// Resolved has the broker check the addresses an allowed name resolved to.
func (e egressDecider) Resolved(ctx context.Context, r netproxy.Request, token string) netproxy.Verdict {
	req := e.request(r)
	start := time.Now()
	res := e.st.plan.broker.Resolved(ctx, token, req)
	if reviewed(res.Decision) {
		// An ask rule naming an address sent it to a reviewer: a review,
		// and a boundary whatever the answer.
		e.st.countReview(time.Since(start))
	}
	if res.Decision.Outcome != broker.Allow || reviewed(res.Decision) {
		e.st.noteNetwork(req, res.Decision, res.Decision.Outcome == broker.Allow)
	}
	if res.Decision.Outcome == broker.Allow {
		e.st.noteAddresses(req)
	}
	return e.st.keepGrant(verdict(res))
}

// Use spends one use of the destination's grant for one connection.
func (e egressDecider) Use(ctx context.Context, r netproxy.Request, token string) error {
	req := e.request(r)
	if err := e.st.plan.broker.Consume(ctx, token, req); err != nil {
		return err
	}
	e.st.countConnection(req)
	return nil
}

func verdict(res broker.Result) netproxy.Verdict {
	v := netproxy.Verdict{Allow: res.Decision.Outcome == broker.Allow && res.Grant != nil,
		Source: string(res.Decision.Source), Reason: res.Decision.Rationale}
	if v.Allow {
		v.Grant = res.Grant.Token
	}
	return v
}

// canonicalAddrs are the addresses the proxy checked as a request binds
// them: unmapped, sorted and distinct (nil for none).
func canonicalAddrs(as []netip.Addr) []netip.Addr {
	var s []netip.Addr
	for _, a := range as {
		s = append(s, a.Unmap())
	}
	slices.SortFunc(s, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(s)
}

// noteNetwork records a network boundary's decision: one entry per
// destination, the latest decision in it, and an event the first time
// and whenever the decision changes. An allow's grant is revoked when
// the run ends.
func (st *run) noteNetwork(req grants.Request, d broker.Decision, granted bool) {
	st.mu.Lock()
	if policyAllowed(d, granted) {
		st.allowedLocked(req.Destination)
		st.mu.Unlock()
		return
	}
	// A destination the policy allowed that a later decision refused
	// (an address it resolved to) or a reviewer answered is a boundary
	// from then on; what it carried while allowed moves with it.
	was := st.takeAllowedLocked(req.Destination)
	b, fresh := st.netBoundaryLocked(req.Destination)
	if was != nil {
		b.Connections += was.Connections
		for _, a := range was.Addresses {
			if !slices.Contains(b.Addresses, a) {
				b.Addresses = append(b.Addresses, a)
			}
		}
	}
	changed := fresh || b.pending || b.Decision != d.Outcome || b.Source != d.Source
	b.Decision, b.Source, b.Rationale, b.pending = d.Outcome, d.Source, d.Rationale, false
	b.Production = d.Production
	if granted && b.Grant == "" {
		b.Grant = "issued"
	}
	shown := *b
	st.mu.Unlock()
	if changed {
		st.ev.Event(Event{Kind: KindBoundary, Attempt: st.attempt, Boundary: &shown})
	}
}

// holdNetwork records a destination as soon as its connection waits for
// a decision: if none comes before the run ends (the connection gave up
// first), the report still says it was refused, and why.
func (st *run) holdNetwork(req grants.Request) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if b, fresh := st.netBoundaryLocked(req.Destination); fresh {
		b.Decision, b.Source, b.pending = broker.Deny, broker.SourceNoReviewer, true
		b.Rationale = "no decision was made while the connection waited"
	}
}

// noteAddresses records the addresses a destination resolved to.
func (st *run) noteAddresses(req grants.Request) {
	st.mu.Lock()
	defer st.mu.Unlock()
	addrs := new([]string)
	if a := st.findAllowedLocked(req.Destination); a != nil {
		addrs = &a.Addresses
	} else {
		b, _ := st.netBoundaryLocked(req.Destination)
		addrs = &b.Addresses
	}
	for _, a := range req.Addresses {
		if s := a.String(); !slices.Contains(*addrs, s) {
			*addrs = append(*addrs, s) // the report's text
		}
	}
}

// countConnection counts one connection a destination's grant carried.
func (st *run) countConnection(req grants.Request) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if a := st.findAllowedLocked(req.Destination); a != nil {
		a.Connections++
		return
	}
	b, _ := st.netBoundaryLocked(req.Destination)
	b.Connections++
	b.Grant = "consumed"
}

// allowedLocked lists dest as allowed by the policy, and drops the entry
// holdNetwork made for it while its decision was pending; a destination
// that is a boundary already (refused or reviewed earlier in the run)
// stays one. st.mu must be held.
func (st *run) allowedLocked(d netdest.Dest) {
	dest := d.String() // the report's text
	st.rep.Boundaries = slices.DeleteFunc(st.rep.Boundaries, func(b Boundary) bool {
		return b.pending && b.Held && b.Surface == boundary.Network && b.Destination == dest
	})
	for _, b := range st.rep.Boundaries {
		if b.Held && b.Surface == boundary.Network && b.Destination == dest {
			return
		}
	}
	if st.findAllowedLocked(d) == nil {
		st.netAllowed = append(st.netAllowed, AllowedDest{Destination: dest})
	}
}

// takeAllowedLocked removes dest from the allowed list and returns its
// entry (nil if it was not there). st.mu must be held.
func (st *run) takeAllowedLocked(d netdest.Dest) *AllowedDest {
	a := st.findAllowedLocked(d)
	if a == nil {
		return nil
	}
	was := *a
	dest := d.String()
	st.netAllowed = slices.DeleteFunc(st.netAllowed, func(a AllowedDest) bool { return a.Destination == dest })
	return &was
}

// findAllowedLocked is dest's allowed entry, or nil. st.mu must be held.
func (st *run) findAllowedLocked(d netdest.Dest) *AllowedDest {
	dest := d.String()
	for i := range st.netAllowed {
		if st.netAllowed[i].Destination == dest {
			return &st.netAllowed[i]
		}
	}
	return nil
}

// netBoundaryLocked is the report's entry for a destination, made on
// first use. st.mu must be held.
func (st *run) netBoundaryLocked(d netdest.Dest) (*Boundary, bool) {
	dest := d.String() // the report's text
	for i := range st.rep.Boundaries {
		b := &st.rep.Boundaries[i]
		if b.Held && b.Surface == boundary.Network && b.Destination == dest {
			return b, false
		}
	}
	st.rep.Boundaries = append(st.rep.Boundaries, Boundary{Attempt: st.attempt, Surface: boundary.Network,
		Operation: boundary.OpConnect, Destination: dest, Held: true})
	return &st.rep.Boundaries[len(st.rep.Boundaries)-1], true
}

// endEgress stops the run's proxy, revokes the run's network grants and
// records what the proxy saw.
func (st *run) endEgress(px *netproxy.Proxy) {
	px.Close() // waits for decisions in flight
	st.mark("proxy closed")
	st.mu.Lock()
	toks := st.netGrants
	st.netGrants = nil
	var undecided []Boundary
	for i := range st.rep.Boundaries {
		if b := &st.rep.Boundaries[i]; b.pending {
			b.pending = false
			undecided = append(undecided, *b)
		}
	}
	st.mu.Unlock()
	for i := range undecided {
		st.ev.Event(Event{Kind: KindBoundary, Attempt: undecided[i].Attempt, Boundary: &undecided[i]})
	}
	for _, t := range toks {
		st.r.grants.Revoke(t)
	}
	c := px.Counters()
	e := st.rep.Egress
	if e == nil {
		return // no attempt said how it reached the network
	}
	e.Scope = st.plan.policy.Network.GrantScope
	// Added: a held run serves its attempts with one proxy each side of
	// the hold.
	e.Connections, e.ByVia = addCounts(e.Connections, c.Connections), addCounts(e.ByVia, c.ByVia)
	e.BytesUp, e.BytesDown = e.BytesUp+c.BytesUp, e.BytesDown+c.BytesDown
	st.mu.Lock()
	e.Allowed = st.netAllowed
	e.Reviews, e.ReviewWait = st.netReviews, float64(st.netReviewWait.Microseconds())/1000
	st.mu.Unlock()
	e.DNSAnswers += c.DNSAnswers
}

// addCounts adds b's counts to a's (a new map when a is nil).
func addCounts(a, b map[string]int64) map[string]int64 {
	if len(b) == 0 {
		return a
	}
	if a == nil {
		a = make(map[string]int64, len(b))
	}
	for k, n := range b {
		a[k] += n
	}
	return a
}

// keepGrant remembers a network grant to revoke when the run ends.
func (st *run) keepGrant(v netproxy.Verdict) netproxy.Verdict {
	if v.Grant != "" {
		st.mu.Lock()
		st.netGrants = append(st.netGrants, v.Grant)
		st.mu.Unlock()
	}
	return v
}
