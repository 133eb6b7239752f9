package integration

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// More of the egress proxy's edges: answers that mix an allowed and a
// forbidden address, wildcard rules and addresses, metadata names,
// malformed targets, rules without ports, per-connection grants and a
// review nobody answers.

// TestEgressMixedAnswers: an allowed name whose DNS answer holds an
// address a rule names and a loopback address none does is refused as a
// whole, whichever order the answer lists them in: neither address (the
// two origins share a port) is dialled.
func TestEgressMixedAnswers(t *testing.T) {
	// Serial: it uses the shared test address 10.254.254.1, whose interface the test that made it removes.
	priv := egPrivateAddr(t)
	forEach(t, func(t *testing.T, e *env) {
		op, ol := egSharedPort(t, priv)
		dns := egNewDNS(t, func(name string, n int) ([]netip.Addr, bool) {
			switch name {
			case "mixed.test":
				return egAddrs(priv, "127.0.0.1"), true
			case "mixed2.test":
				return egAddrs("127.0.0.1", priv), true
			}
			return nil, false
		})
		pol := egPolicy(t, e, []string{"mixed.test:*", "mixed2.test:*", priv + ":*"}, nil, nil,
			"[network]\nresolver = \""+dns.addr+"\"")
		r := e.sandboxd("run", "--policy", pol, "-c", fmt.Sprintf(`for u in http://mixed.test:%[1]s/ http://mixed2.test:%[1]s/; do
  echo "PLAIN $u $(curl -s -m 10 -o /dev/null -w '%%{http_code}' $u)"
  echo "TUNNEL $u $(curl -s -m 10 -p -o /dev/null -w '%%{http_code}' $u)"
done
echo END
`, op.port))
		netRan(t, r)
		ol.mustHits(t, 0, r)
		op.mustHits(t, 0, r)
		if strings.Contains(r.stdout, " 200\n") {
			t.Errorf("a name resolving to a loopback address no rule names was served\n%s", r)
		}
		if !dns.asked("mixed.test") {
			t.Errorf("the allowed name was never looked up (the test proves nothing): %v", dns.queries())
		}
		egMustDeny(t, r, "mixed.test:"+op.port, "hard-deny")
		egMustDeny(t, r, "mixed2.test:"+op.port, "hard-deny")
	})
}

// egSharedPort starts origins on priv and on 127.0.0.1 with one port.
func egSharedPort(t *testing.T, priv string) (op, ol *egOrigin) {
	t.Helper()
	for i := 0; i < 20; i++ {
		op = egNewOrigin(t, priv+":0", false, nil)
		if ln, err := net.Listen("tcp4", "127.0.0.1:"+op.port); err == nil {
			ln.Close()
			return op, egNewOrigin(t, "127.0.0.1:"+op.port, false, nil)
		}
	}
	t.Fatal("no port free on both addresses")
	return nil, nil
}

// TestEgressAnyNameOpensNoAddress: "net connect *:*" allows every name
// but no address: an IP literal on loopback, and a name resolving to
// loopback, stay refused.
func TestEgressAnyNameOpensNoAddress(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		o := egNewOrigin(t, "127.0.0.1:0", false, nil)
		dns := egNewDNS(t, func(string, int) ([]netip.Addr, bool) { return egAddrs("127.0.0.1"), true })
		pol := egPolicy(t, e, []string{"*:*", "*"}, nil, nil, "[network]\nresolver = \""+dns.addr+"\"")
		r := e.sandboxd("run", "--policy", pol, "-c", fmt.Sprintf(`for u in http://127.0.0.1:%[1]s/ http://localhost:%[1]s/ http://any.test:%[1]s/; do
  echo "PLAIN $u $(curl -s -m 10 -o /dev/null -w '%%{http_code}' $u)"
  echo "TUNNEL $u $(curl -s -m 10 -p -o /dev/null -w '%%{http_code}' $u)"
done
echo END
`, o.port))
		netRan(t, r)
		o.mustHits(t, 0, r)
		if strings.Contains(r.stdout, " 200\n") {
			t.Errorf("a wildcard rule opened a loopback address\n%s", r)
		}
		egMustDeny(t, r, "127.0.0.1:"+o.port, "hard-deny")
		egMustDeny(t, r, "any.test:"+o.port, "hard-deny")
	})
}

// TestEgressMetadataNames: cloud metadata names are refused even when a
// rule allows them and the address they resolve to, and never looked up.
func TestEgressMetadataNames(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		o := egNewOrigin(t, "127.0.0.1:0", false, nil)
		dns := egNewDNS(t, func(string, int) ([]netip.Addr, bool) { return egAddrs("127.0.0.1"), true })
		names := []string{"metadata.google.internal", "metadata", "METADATA.GOOGLE.INTERNAL."}
		var allow []string
		for _, n := range names {
			allow = append(allow, strings.TrimSuffix(strings.ToLower(n), ".")+":"+o.port)
		}
		pol := egPolicy(t, e, append(allow, "127.0.0.1:"+o.port), nil, nil, "[network]\nresolver = \""+dns.addr+"\"")
		var script strings.Builder
		for _, n := range names {
			fmt.Fprintf(&script, "echo \"HOST %s $(curl -s -m 10 -o /dev/null -w '%%{http_code}' http://%s:%s/)\"\n", n, n, o.port)
		}
		script.WriteString("echo END\n")
		r := e.sandboxd("run", "--policy", pol, "-c", script.String())
		netRan(t, r)
		o.mustHits(t, 0, r)
		for _, n := range names {
			if !strings.Contains(r.stdout, "HOST "+n+" 403\n") {
				t.Errorf("%s: want 403 (%q)", n, egLine(r.stdout, "HOST "+n+" "))
			}
		}
		if dns.askedAny("metadata") {
			t.Errorf("a metadata name was looked up: %v", dns.queries())
		}
		egMustDeny(t, r, "metadata.google.internal:"+o.port, "hard-deny")
	})
}

// TestEgressMalformedTargets: request targets the proxy must not guess
// at — percent-encoded hosts, zones, out-of-range or signed ports,
// origin form, https or other schemes in absolute form, fragments —
// are 400 and reach nothing, though the origin they might mean is
// allowed.
func TestEgressMalformedTargets(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		a := egNewOrigin(t, "127.0.0.1:0", false, nil)
		r, cases := egRawRun(t, e, a, "P = "+a.port+`
A = '127.0.0.1:' + str(P)
def get(target, host=None):
    return 'GET ' + target + ' HTTP/1.1\r\nHost: ' + (host or A) + '\r\n' + AUTH + '\r\n'
def hp(h, p):
    return h + ':' + str(p)
raw('pct-host', get('http://' + hp('127.0.0.%31', P) + '/', hp('127.0.0.%31', P)))
raw('zone', get('http://' + hp('[::1%25lo]', P) + '/', hp('[::1%25lo]', P)))
raw('port-wrap', get('http://' + hp('127.0.0.1', P + 65536) + '/', hp('127.0.0.1', P + 65536)))
raw('port-wrap32', get('http://' + hp('127.0.0.1', P + 4294967296) + '/', hp('127.0.0.1', P + 4294967296)))
raw('port-plus', get('http://127.0.0.1:+' + str(P) + '/', '127.0.0.1:+' + str(P)))
raw('port-empty', get('http://127.0.0.1:/', '127.0.0.1:'))
raw('origin-form', get('/'))
raw('https-abs', get('https://' + A + '/'))
raw('ftp', get('ftp://' + A + '/'))
raw('fragment', get('http://' + A + '/#frag'))
raw('connect-port-wrap', 'CONNECT ' + hp('127.0.0.1', P + 65536) + ' HTTP/1.1\r\nHost: ' + hp('127.0.0.1', P + 65536) + '\r\n' + AUTH + '\r\n')
raw('connect-noport', 'CONNECT 127.0.0.1 HTTP/1.1\r\nHost: 127.0.0.1\r\n' + AUTH + '\r\n')
raw('connect-path', 'CONNECT ' + A + '/x HTTP/1.1\r\nHost: ' + A + '\r\n' + AUTH + '\r\n')
raw('good', get('http://' + A + '/'))
`)
		for _, c := range []string{"pct-host", "zone", "port-wrap", "port-wrap32", "port-plus", "port-empty", "origin-form",
			"https-abs", "ftp", "fragment", "connect-port-wrap", "connect-noport", "connect-path"} {
			egWantStatus(t, cases, c, r, 400)
		}
		egWantStatus(t, cases, "good", r, 200)
		a.mustHits(t, 1, r)
	})
}

// TestEgressDefaultPorts: a host rule without a port covers ports 80
// and 443 only.
func TestEgressDefaultPorts(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		o := egNewOrigin(t, "127.0.0.1:0", false, nil)
		dns := egNewDNS(t, func(string, int) ([]netip.Addr, bool) { return egAddrs("127.0.0.1"), true })
		pol := egPolicy(t, e, []string{"noport.test", "127.0.0.1:" + o.port}, nil, nil, "[network]\nresolver = \""+dns.addr+"\"")
		r := e.sandboxd("run", "--policy", pol, "-c", fmt.Sprintf(
			"echo \"PLAIN $(curl -s -m 10 -o /dev/null -w '%%{http_code}' http://noport.test:%[1]s/)\"\necho \"TUNNEL $(curl -s -m 10 -p -o /dev/null -w '%%{http_code}' http://noport.test:%[1]s/)\"\necho END\n", o.port))
		netRan(t, r)
		o.mustHits(t, 0, r)
		if !strings.Contains(r.stdout, "PLAIN 403\n") {
			t.Errorf("a rule with no port allowed port %s\n%s", o.port, r)
		}
		if dns.askedAny("noport.test") {
			t.Errorf("noport.test:%s was looked up although no rule covers that port: %v", o.port, dns.queries())
		}
		egMustDeny(t, r, "noport.test:"+o.port)
	})
}

// TestEgressConnectionScope: with grant_scope = "connection" every
// connection to an asked destination is its own question: three
// connections, three questions, and the one refused is not served.
func TestEgressConnectionScope(t *testing.T) {
	// Serial: a human reviewer on a terminal, with a fixed wait.
	forEach(t, func(t *testing.T, e *env) {
		a := egNewOrigin(t, "127.0.0.1:0", false, nil)
		tm := egNewTerminal(t, e, func(n int) string {
			if n == 1 {
				return "n"
			}
			return "y"
		})
		tm.logOnFailure(t)
		pol := egPolicy(t, e, nil, []string{"127.0.0.1:" + a.port}, nil, "[network]\ngrant_scope = \"connection\"")
		r := e.sandboxdOpts(runOpts{tty: tm.slave, timeout: 60 * time.Second}, "run", "--policy", pol, "--reviewer", "human", "-c",
			fmt.Sprintf("for i in 1 2 3; do echo \"REQ $i $(curl -s -m 20 -o /dev/null -w '%%{http_code}' http://127.0.0.1:%s/$i)\"; done; echo END", a.port))
		netRan(t, r)
		if n := tm.asked(); n != 3 {
			t.Errorf("the person was asked %d times, want 3 (one per connection)\n%s", n, r)
		}
		if !regexp.MustCompile(`REQ 1 200\nREQ 2 403\nREQ 3 200\n`).MatchString(r.stdout) {
			t.Errorf("want allowed, refused, allowed\n%s", r)
		}
		a.mustHits(t, 2, r)
		if a.sawPath("/2") {
			t.Errorf("the refused connection was served: %s", a.summary())
		}
	})
}

// TestEgressHoldTimeout: a connection whose review nobody answers is
// refused when hold_timeout passes, reaches nothing, and the run ends.
func TestEgressHoldTimeout(t *testing.T) {
	// Serial: it times how long the run takes after its command ended.
	forEach(t, func(t *testing.T, e *env) {
		a := egNewOrigin(t, "127.0.0.1:0", false, nil)
		tm := egNewTerminal(t, e, func(int) string { return "" })
		pol := egPolicy(t, e, nil, []string{"127.0.0.1:" + a.port}, nil, "[network]\nhold_timeout = \"1s\"")
		start := time.Now()
		r := e.sandboxdOpts(runOpts{tty: tm.slave, timeout: 30 * time.Second}, "run", "--policy", pol, "--reviewer", "human", "-c",
			fmt.Sprintf("s=$(date +%%s%%N); code=$(curl -s -m 20 -o /dev/null -w '%%{http_code}' http://127.0.0.1:%s/); echo \"CODE $code MS $((($(date +%%s%%N)-s)/1000000))\"; echo END", a.port))
		took := time.Since(start)
		netRan(t, r)
		a.mustHits(t, 0, r)
		m := regexp.MustCompile(`CODE (\d+) MS (\d+)`).FindStringSubmatch(r.stdout)
		if m == nil || m[1] != "403" {
			t.Fatalf("want 403 after the hold timeout\n%s", r)
		}
		var ms int
		fmt.Sscan(m[2], &ms)
		if ms < 900 || ms > 10000 {
			t.Errorf("the connection was held %d ms, want about 1000 (hold_timeout 1s)", ms)
		}
		if took > 15*time.Second {
			t.Errorf("the run took %v after its command ended", took)
		}
		if tm.asked() != 1 {
			t.Errorf("asked %d times, want 1\n%q", tm.asked(), tm.text())
		}
		egMustDeny(t, r, "127.0.0.1:"+a.port)
		if t.Failed() {
			t.Logf("%s\negress %v\nterminal %q", r, r.report["egress"], tm.text())
		}
	})
}

// TestEgressAskShared: connections to one asked destination share one
// pending question — 20 at once while the person takes a moment, one
// prompt, 20 served — and a refusal is kept for the run: five more
// connections to a refused destination are refused without asking.
func TestEgressAskShared(t *testing.T) {
	// Serial: the person's answer comes a fixed time after the question, while 20 connections wait.
	forEach(t, func(t *testing.T, e *env) {
		a := egNewOrigin(t, "127.0.0.1:0", false, nil)
		d := egNewOrigin(t, "127.0.0.1:0", false, nil)
		tm := egNewTerminal(t, e, func(n int) string {
			time.Sleep(400 * time.Millisecond)
			if n == 0 {
				return "y"
			}
			return "n"
		})
		tm.logOnFailure(t)
		pol := egPolicy(t, e, nil, []string{a.addr, d.addr}, nil, "")
		r := e.sandboxdOpts(runOpts{tty: tm.slave, timeout: 60 * time.Second}, "run", "--policy", pol, "--reviewer", "human", "-c",
			fmt.Sprintf(`for i in $(seq 20); do curl -s -m 20 -o /dev/null -w '%%{http_code}\n' http://%s/$i > out.$i & done; wait
cat out.* | sort | uniq -c | sed 's/^ */SHARED /'; rm -f out.*
for i in $(seq 6); do curl -s -m 20 -o /dev/null -w '%%{http_code}\n' http://%s/$i; done | sort | uniq -c | sed 's/^ */REFUSED /'
echo END`, a.addr, d.addr))
		netRan(t, r)
		if n := tm.asked(); n != 2 {
			t.Errorf("the person was asked %d times, want 2 (once per destination)", n)
		}
		if !strings.Contains(r.stdout, "SHARED 20 200\n") || !strings.Contains(r.stdout, "REFUSED 6 403\n") {
			t.Errorf("want 20 served and 6 refused\n%s", r)
		}
		a.mustHits(t, 20, r)
		d.mustHits(t, 0, r)
		egMustAllow(t, r, a.addr, 20)
		egMustDeny(t, r, d.addr, "human")
	})
}

// TestEgressEarlyBytesWhileHeld: bytes a client sends right after its
// CONNECT, while the connection is held for review, reach the origin
// once, after the allow, and only then.
func TestEgressEarlyBytesWhileHeld(t *testing.T) {
	// Serial: the person's answer comes a fixed time after the question.
	forEach(t, func(t *testing.T, e *env) {
		a := egNewOrigin(t, "127.0.0.1:0", false, nil)
		tm := egNewTerminal(t, e, func(int) string {
			time.Sleep(300 * time.Millisecond)
			if a.count() != 0 {
				return "n" // something went through before the allow
			}
			return "y"
		})
		pol := egPolicy(t, e, nil, []string{a.addr}, nil, "")
		r := e.sandboxdOpts(runOpts{tty: tm.slave, timeout: 60 * time.Second}, "run", "--policy", pol, "--reviewer", "human", "-c",
			netPy(egPyLib+`
A = '`+a.addr+`'
s = conn()
s.sendall(('CONNECT ' + A + ' HTTP/1.1\r\nHost: ' + A + '\r\n' + AUTH + '\r\n' +
           'GET /early HTTP/1.1\r\nHost: ' + A + '\r\nConnection: close\r\n\r\n').encode())
st, h, b = read_resp(s, connect=True)
report('connect', st, h)
st, h, b = read_resp(s)
report('early', st, h)
print('BODY', b.decode(errors='replace').strip())
`)+"echo END\n")
		netRan(t, r)
		cases := egCases(r.stdout)
		egWantStatus(t, cases, "connect", r, 200)
		egWantStatus(t, cases, "early", r, 200)
		if !strings.Contains(r.stdout, "BODY "+strings.TrimSpace(a.body)+"\n") {
			t.Errorf("the early request's answer did not come back\n%s", r)
		}
		a.mustHits(t, 1, r)
		if !a.sawPath("/early") {
			t.Errorf("the early bytes never reached the origin: %s", a.summary())
		}
		if tm.asked() != 1 {
			t.Errorf("asked %d times, want 1", tm.asked())
		}
	})
}

// TestEgressNetworkDenyNoRetry: a refused connection neither triggers
// nor needs a retry: the run has one attempt and its exit status is the
// command's own.
func TestEgressNetworkDenyNoRetry(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		o := egNewOrigin(t, "127.0.0.1:0", false, nil)
		r := e.sh(fmt.Sprintf("curl -s -m 10 -o /dev/null -w 'CODE %%{http_code}\\n' http://%s/; echo END; exit 7", o.addr))
		netRan(t, r)
		o.mustHits(t, 0, r)
		if r.code != 7 || r.report["attempts"] != float64(1) {
			t.Errorf("exit %d attempts %v, want the command's 7 and one attempt\n%s", r.code, r.report["attempts"], r)
		}
		if b := egBoundary(r, o.addr); b == nil || b["held"] != true || b["decision"] != "deny" {
			t.Errorf("boundary %v: want a held deny", b)
		}
	})
}

// TestEgressHostLoopbackIPv6Only: a host server listening only on ::1
// (as dev servers bound to "localhost" often do), allowed by a rule
// naming [::1]:PORT, is reachable: the proxy normalises ::1 to
// 127.0.0.1 for the decision, but must not dial only 127.0.0.1 (its
// inside dial tries both families).
func TestEgressHostLoopbackIPv6Only(t *testing.T) {
	t.Parallel()
	if ln, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		ln.Close()
	}
	forEach(t, func(t *testing.T, e *env) {
		o := ipv6OnlyOrigin(t)
		pol := egPolicy(t, e, []string{"[::1]:" + o.port}, nil, nil, "")
		r := e.sandboxd("run", "--policy", pol, "-c", fmt.Sprintf("curl -s -m 10 'http://[::1]:%s/'; echo END\n", o.port))
		netRan(t, r)
		if !strings.Contains(r.stdout, o.body) {
			t.Errorf("a host server on [::1]:%s allowed by a rule naming it was not reached (report %v)\n%s", o.port, egNetBoundaries(r), r)
		}
		o.mustHits(t, 1, r)
	})
}

// ipv6OnlyOrigin is an origin on [::1] whose port nothing on 127.0.0.1
// may take while the test runs: a socket bound there, never listening,
// refuses a connect to it. Without it, another test's origin that the
// kernel gives the same port on 127.0.0.1 answers the proxy's dial of
// 127.0.0.1 first (rules take ::1 and 127.0.0.1 as one loopback), and
// this test and that one each see the other's connection.
func ipv6OnlyOrigin(t *testing.T) *egOrigin {
	t.Helper()
	for range 20 {
		o := egNewOrigin(t, "[::1]:0", false, nil)
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(o.port)
		if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			syscall.Close(fd)
			continue // taken on 127.0.0.1: another origin
		}
		t.Cleanup(func() { syscall.Close(fd) })
		return o
	}
	t.Fatal("no port free on both ::1 and 127.0.0.1 in 20 tries")
	return nil
}

// TestEgressNoHostPortOracle: with no rule for the host's loopback, the
// proxy answers a port a host server listens on exactly as one nothing
// listens on: otherwise the command can map the host's loopback
// services (it is cut off from) through the proxy's answers.
func TestEgressNoHostPortOracle(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		o := egNewOrigin(t, "127.0.0.1:0", false, nil)
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := ln.Addr().String()
		ln.Close()
		r := e.sh(fmt.Sprintf(`for a in %s %s; do
  curl -s -m 10 -o /dev/null -D hdr.txt http://$a/
  echo "ANSWER $a $(head -1 hdr.txt | cut -d' ' -f2) $(grep -i '^x-sandboxd-decision:' hdr.txt | cut -d' ' -f2- | tr -d '\r')"
done
echo END
`, o.addr, closed))
		netRan(t, r)
		o.mustHits(t, 0, r)
		open := strings.TrimPrefix(egLine(r.stdout, "ANSWER "+o.addr+" "), "ANSWER "+o.addr+" ")
		shut := strings.TrimPrefix(egLine(r.stdout, "ANSWER "+closed+" "), "ANSWER "+closed+" ")
		if open == "" || open != shut {
			t.Errorf("the proxy tells a listening host port (%q) from a closed one (%q)\n%s", open, shut, r)
		}
	})
}
