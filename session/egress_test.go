package session

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/sandbox"
)

// proxyClient plays the command: it serves the attempt's proxy on a
// listener of its own and sends requests through it with the run's
// credential, taken from the environment the spec gives the command.
type proxyClient struct {
	addr, auth string
}

func (c proxyClient) get(t *testing.T, target string) int {
	t.Helper()
	conn, err := net.Dial("tcp", c.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	u, _ := url.Parse(target)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\nConnection: close\r\n\r\n", target, u.Host, c.auth)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// egressAttempt serves the spec's proxy while run plays the command.
func egressAttempt(t *testing.T, run func(c proxyClient)) attemptFunc {
	return func(ctx context.Context, spec sandbox.Spec, _ During) (sandbox.Result, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return sandbox.Result{}, err
		}
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); spec.Egress.Serve(sctx, ln, nil) }()
		var proxyURL string
		for _, kv := range spec.Egress.Env {
			if v, ok := strings.CutPrefix(kv, "HTTP_PROXY="); ok {
				proxyURL = v
			}
		}
		u, err := url.Parse(proxyURL)
		if err != nil || u.User == nil {
			t.Errorf("HTTP_PROXY = %q", proxyURL)
		} else {
			pw, _ := u.User.Password()
			run(proxyClient{addr: ln.Addr().String(), auth: base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pw))})
		}
		cancel()
		<-done
		return sandbox.Result{Isolation: sandbox.Namespaces, NetworkMode: sandbox.NetNS, Egress: "proxy",
			LandlockABI: 7, Transaction: sandbox.Transaction{Mode: "none", Why: "fake"}}, nil
	}
}

// Network boundaries are decided while the connection waits, recorded
// once per destination, and neither trigger nor block a retry; what the
// policy allows is no boundary and no review.
func TestEgressBoundaries(t *testing.T) {
	w := newWorld(t)
	var hits atomic.Int32
	origin := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer origin.Close()
	_, port, _ := net.SplitHostPort(origin.Listener.Addr().String())
	pol := fmt.Sprintf("[boundaries]\nallow = [\"net connect 127.0.0.1:%s\"]\n", port)
	if err := os.WriteFile(filepath.Join(w.caller.Home, ".config", "sandboxd", "policy.toml"), []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { otherHits.Add(1) }))
	defer other.Close()
	nobody, _ := net.Listen("tcp", "127.0.0.1:0")
	silent := nobody.Addr().String()
	nobody.Close()
	codes := map[string]int{}
	fake := &fakeSandbox{script: []attemptFunc{egressAttempt(t, func(c proxyClient) {
		for range 3 {
			codes["allowed"] = c.get(t, origin.URL+"/")
		}
		codes["other port"] = c.get(t, other.URL+"/")
		codes["nothing listens"] = c.get(t, "http://"+silent+"/")
		codes["unlisted"] = c.get(t, "http://example.test/")
	})}}
	store := grants.NewStore()
	rep, err := New(Config{Sandbox: fake, Grants: store}).Run(context.Background(), w.caller, job(2), nil)
	if err != nil {
		t.Fatal(err)
	}
	if codes["allowed"] != 200 || codes["other port"] != 403 || codes["unlisted"] != 403 || codes["nothing listens"] != 403 ||
		hits.Load() != 3 || otherHits.Load() != 0 {
		t.Fatalf("codes %v, origin hits %d, other %d", codes, hits.Load(), otherHits.Load())
	}
	if fake.calls() != 1 {
		t.Fatalf("%d attempts: a network boundary triggered a retry", fake.calls())
	}
	got := map[string]Boundary{}
	for _, b := range rep.Boundaries {
		if _, dup := got[b.Destination]; dup {
			t.Errorf("%s reported twice", b.Destination)
		}
		got[b.Destination] = b
	}
	// What the policy allowed was neither refused nor reviewed: no
	// boundary, listed under egress.allowed with its connections.
	if b, ok := got["127.0.0.1:"+port]; ok {
		t.Errorf("a destination the policy allowed is a boundary: %+v", b)
	}
	if rep.Egress == nil || len(rep.Egress.Allowed) != 1 {
		t.Fatalf("egress: %+v", rep.Egress)
	}
	if a := rep.Egress.Allowed[0]; a.Destination != "127.0.0.1:"+port || a.Connections != 3 || strings.Join(a.Addresses, ",") != "127.0.0.1" {
		t.Errorf("allowed: %+v", a)
	}
	if rep.Egress.Reviews != 0 {
		t.Errorf("%d reviews, but no reviewer answered", rep.Egress.Reviews)
	}
	_, otherPort, _ := net.SplitHostPort(other.Listener.Addr().String())
	if b := got["127.0.0.1:"+otherPort]; b.Decision != broker.Deny || b.Source != broker.SourceHardDeny {
		t.Errorf("other port: %+v", b)
	}
	if b, ok := got[silent]; ok {
		t.Errorf("a port nothing listens on is a boundary: %+v", b)
	}
	if b := got["example.test:80"]; b.Decision != broker.Deny || b.Source != broker.SourceNoReviewer {
		t.Errorf("unlisted: %+v", b)
	}
	if rep.Egress == nil || rep.Egress.Mode != "proxy" || rep.Egress.Connections["allow/policy"] != 3 {
		t.Errorf("egress: %+v", rep.Egress)
	}
	if n := store.Len(); n != 0 {
		t.Errorf("%d grants outlive the run", n)
	}
}

// The variable holding the model reviewer's key never reaches the
// command: not under its default name, not under the name api_key_env
// gives it, not when [env] allow names it.
func TestReviewKeyNeverInside(t *testing.T) {
	for _, tc := range []struct{ policy, name string }{
		{"[env]\nallow = [\"OPENAI_API_KEY\"]\n", "OPENAI_API_KEY"},
		{"[review]\napi_key_env = \"MY_REVIEW_CRED\"\n[env]\nallow = [\"MY_REVIEW_CRED\"]\n", "MY_REVIEW_CRED"},
		{"[review]\napi_key_env = \"PLAIN_NAME\"\n", "PLAIN_NAME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			if err := os.WriteFile(filepath.Join(w.caller.Home, ".config", "sandboxd", "policy.toml"), []byte(tc.policy), 0o644); err != nil {
				t.Fatal(err)
			}
			w.caller.Env = append(w.caller.Env, tc.name+"=canary-key-value")
			fake := &fakeSandbox{script: []attemptFunc{denies(0)}}
			if _, err := New(Config{Sandbox: fake}).Run(context.Background(), w.caller, job(0), nil); err != nil {
				t.Fatal(err)
			}
			for _, kv := range fake.specs[0].Env {
				if strings.Contains(kv, "canary-key-value") {
					t.Fatalf("the reviewer's key reached the command: %s", kv)
				}
			}
		})
	}
}

// TestEgressEnv: ALL_PROXY names the SOCKS5 endpoint (socks5h, two
// ports above the proxy); GIT_SSH_COMMAND goes through it when OpenBSD
// netcat is installed, unless the caller set one of their own.
func TestEgressEnv(t *testing.T) {
	e := egressPlan{port: 40000, token: "tok"}
	get := func(env []string, key string) (string, bool) {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, key+"="); ok {
				return v, true
			}
		}
		return "", false
	}
	env := e.envFor([]string{"PATH=/usr/bin"})
	if v, _ := get(env, "ALL_PROXY"); v != "socks5h://127.0.0.1:40002" {
		t.Errorf("ALL_PROXY = %q", v)
	}
	if v, _ := get(env, "HTTP_PROXY"); v != "http://sandboxd:tok@127.0.0.1:40000" {
		t.Errorf("HTTP_PROXY = %q", v)
	}
	ssh, ok := get(env, "GIT_SSH_COMMAND")
	if nc := openbsdNC(); nc != "" {
		if want := "ssh -o 'ProxyCommand=" + nc + " -X 5 -x 127.0.0.1:40002 %h %p'"; ssh != want {
			t.Errorf("GIT_SSH_COMMAND = %q, want %q", ssh, want)
		}
	} else if ok {
		t.Errorf("GIT_SSH_COMMAND = %q without OpenBSD netcat", ssh)
	}
	if _, ok := get(e.envFor([]string{"GIT_SSH_COMMAND=ssh -i key"}), "GIT_SSH_COMMAND"); ok {
		t.Error("the caller's GIT_SSH_COMMAND would be replaced")
	}
}

// reviewerFunc is a model reviewer that answers by a function.
type reviewerFunc func(grants.Request) broker.Decision

func (f reviewerFunc) Review(_ context.Context, req grants.Request) (broker.Decision, error) {
	return f(req), nil
}

// A destination a reviewer answered is a boundary and a review, whatever
// the answer; one the policy allowed is neither.
func TestEgressReviewsCountReviewers(t *testing.T) {
	w := newWorld(t)
	origin := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer origin.Close()
	_, port, _ := net.SplitHostPort(origin.Listener.Addr().String())
	pol := fmt.Sprintf("[boundaries]\nallow = [\"net connect 127.0.0.1:%s\"]\n", port)
	if err := os.WriteFile(filepath.Join(w.caller.Home, ".config", "sandboxd", "policy.toml"), []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	model := reviewerFunc(func(req grants.Request) broker.Decision {
		out := broker.Deny
		if req.Destination.String() == "allowed.test:80" {
			out = broker.Allow
		}
		return broker.Decision{Outcome: out, RiskLevel: broker.RiskLow, UserAuthorization: broker.AuthHigh, Rationale: "scripted"}
	})
	fake := &fakeSandbox{script: []attemptFunc{egressAttempt(t, func(c proxyClient) {
		c.get(t, origin.URL+"/")
		c.get(t, "http://allowed.test/")
		c.get(t, "http://denied.test/")
	})}}
	j := job(0)
	j.Reviewers.Model = model
	rep, err := New(Config{Sandbox: fake}).Run(context.Background(), w.caller, j, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, b := range rep.Boundaries {
		got[b.Destination] = string(b.Decision) + "/" + string(b.Source)
	}
	want := map[string]string{"allowed.test:80": "allow/reviewer", "denied.test:80": "deny/reviewer"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("boundaries %v, want %v", got, want)
	}
	if rep.Egress == nil || rep.Egress.Reviews != 2 || len(rep.Egress.Allowed) != 1 || rep.Egress.Allowed[0].Connections != 1 {
		t.Errorf("egress: %+v", rep.Egress)
	}
}

// A name the policy allows whose address an ask rule sends to a
// reviewer: the reviewer's answer is a review and a boundary, never a
// policy allow.
func TestEgressResolvedReviewed(t *testing.T) {
	for _, answer := range []broker.Outcome{broker.Allow, broker.Deny} {
		t.Run(string(answer), func(t *testing.T) {
			w := newWorld(t)
			origin := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			defer origin.Close()
			_, port, _ := net.SplitHostPort(origin.Listener.Addr().String())
			pol := fmt.Sprintf("[boundaries]\nallow = [\"net connect vm:%s\"]\nask = [\"net connect 127.0.0.1:%s\"]\n", port, port)
			if err := os.WriteFile(filepath.Join(w.caller.Home, ".config", "sandboxd", "policy.toml"), []byte(pol), 0o644); err != nil {
				t.Fatal(err)
			}
			model := reviewerFunc(func(grants.Request) broker.Decision {
				return broker.Decision{Outcome: answer, RiskLevel: broker.RiskLow, UserAuthorization: broker.AuthHigh, Rationale: "scripted"}
			})
			fake := &fakeSandbox{script: []attemptFunc{egressAttempt(t, func(c proxyClient) { c.get(t, "http://vm:"+port+"/") })}}
			j := job(0)
			j.Reviewers.Model = model
			rep, err := New(Config{Sandbox: fake}).Run(context.Background(), w.caller, j, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := boundaries(rep); len(got) != 1 || !strings.Contains(got[0], string(answer)+"/reviewer") {
				t.Errorf("boundaries %q, want vm:%s %s/reviewer", got, port, answer)
			}
			if rep.Egress == nil || rep.Egress.Reviews != 1 || len(rep.Egress.Allowed) != 0 {
				t.Errorf("egress %+v: want one review and nothing listed as the policy's", rep.Egress)
			}
		})
	}
}

// A destination the policy allowed that a later connection's address
// refused becomes a boundary, and keeps what it carried while allowed.
func TestEgressAllowedThenRefused(t *testing.T) {
	st := &run{rep: &Report{}, ev: Discard{}, attempt: 1}
	req := grants.Request{Surface: boundary.Network, Operation: boundary.OpConnect, Held: true}.WithDestinationText("x.test:443")
	pol := broker.Decision{Outcome: broker.Allow, Source: broker.SourcePolicy}
	st.holdNetwork(req)
	st.noteNetwork(req, pol, true)
	r1 := req
	r1.Addresses = []netip.Addr{netip.MustParseAddr("93.184.216.34")}
	st.noteAddresses(r1)
	st.countConnection(r1)
	st.holdNetwork(req)
	st.noteNetwork(req, pol, true)
	r2 := req
	r2.Addresses = []netip.Addr{netip.MustParseAddr("10.0.0.5")}
	st.noteNetwork(r2, broker.Decision{Outcome: broker.Deny, Source: broker.SourceHardDeny, Rationale: "private"}, false)
	if len(st.netAllowed) != 0 || len(st.rep.Boundaries) != 1 {
		t.Fatalf("allowed %+v, boundaries %+v", st.netAllowed, st.rep.Boundaries)
	}
	b := st.rep.Boundaries[0]
	if b.Decision != broker.Deny || b.Connections != 1 || !slices.Contains(b.Addresses, "93.184.216.34") || b.pending {
		t.Errorf("boundary %+v: want the refusal, with the connection and address it carried while allowed", b)
	}
	// A later policy allow of the same name leaves it a boundary.
	st.holdNetwork(req)
	st.noteNetwork(req, pol, true)
	if len(st.netAllowed) != 0 || len(st.rep.Boundaries) != 1 {
		t.Errorf("after another allow: allowed %+v, boundaries %+v", st.netAllowed, st.rep.Boundaries)
	}
}
