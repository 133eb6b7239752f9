package integration

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// rootOnly makes a loopback port root's alone with a host firewall rule
// on the socket's owner (iptables' owner match), as an administrator
// would for a root-only service, and removes the rule when t ends.
func rootOnly(t *testing.T, proto, port string) {
	t.Helper()
	rule := []string{"OUTPUT", "-o", "lo", "-p", proto, "--dport", port, "-m", "owner", "!", "--uid-owner", "0", "-j", "REJECT"}
	if proto == "tcp" {
		rule = append(rule, "--reject-with", "tcp-reset")
	}
	iptables := func(op string) error {
		cmd := exec.Command("iptables", append([]string{op}, rule...)...)
		cmd.Dir, cmd.Env = "/", []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("iptables %s: %v: %s", op, err, out)
		}
		return nil
	}
	if err := iptables("-I"); err != nil {
		t.Skipf("cannot add a firewall rule here: %v", err)
	}
	t.Cleanup(func() {
		if err := iptables("-D"); err != nil {
			t.Error(err)
		}
	})
}

// TestDaemonConnectsAsCaller: the connections the daemon opens for a
// caller are the caller's for a host firewall. With the model server,
// an origin and a DNS server on loopback ports a firewall rule keeps for
// root: a root caller reaches each of them through the daemon; for
// sandboxd-test, whose policy names them just the same, the model
// reviewer faults (the server saw no request), the proxy cannot reach
// the origin (it got nothing) and the run's resolver never asks the DNS
// server.
func TestDaemonConnectsAsCaller(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon, and the firewall rule")
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		t.Skip("iptables is not installed (Debian: apt-get install iptables; .ci/run installs it)")
	}
	socket, dlog := startDaemonLog(t)
	m := newFakeModel(t, func(string) (string, string, string, string) {
		return "allow", "low", "medium", "a file the task writes"
	})
	o := egNewOrigin(t, "127.0.0.1:0", false, nil)
	dns := egNewDNS(t, func(string, int) ([]netip.Addr, bool) { return nil, false })
	_, modelPort, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(m.url, "http://"), "/v1"))
	_, dnsPort, _ := net.SplitHostPort(dns.addr)
	rootOnly(t, "tcp", modelPort)
	rootOnly(t, "tcp", o.port)
	rootOnly(t, "udp", dnsPort)
	rootOnly(t, "tcp", dnsPort)
	forEach(t, func(t *testing.T, e *env) {
		defer func() {
			if t.Failed() {
				t.Logf("daemon log:\n%s", dlog.String())
			}
		}()
		root := e.id.uid == 0
		vars := []string{"SANDBOXD_SOCKET=" + socket, "FAKE_REVIEW_KEY=fake-review-key"}

		// The model reviewer's base_url.
		target := filepath.Join(e.mkdir("out", 0o755), "model.txt")
		pol := filepath.Join(e.dir, "policies", "model-"+randHex(3)+".toml")
		e.writeFile(pol, fmt.Sprintf("[review]\nmodel = \"fake-model\"\nbase_url = %q\napi_key_env = \"FAKE_REVIEW_KEY\"\ntimeout = \"5s\"\n", m.url), 0o644)
		asked := len(m.requests())
		r := e.sandboxdOpts(runOpts{env: vars}, "run", "--daemon", "--policy", pol, "--reviewer", "model", "-c", "echo x > "+target)
		_, werr := os.Lstat(target)
		rev, _ := r.report["reviewer"].(map[string]any)
		if root {
			if werr != nil || len(m.requests()) == asked {
				t.Errorf("root's model on a root-only port was not reached (%d requests)\n%s", len(m.requests())-asked, r)
			}
		} else {
			if n := len(m.requests()) - asked; n != 0 {
				t.Errorf("the root-only model server got %d requests made for uid %d\n%s", n, e.id.uid, r)
			}
			if werr == nil {
				t.Errorf("the write the unreachable model was asked about landed\n%s", r)
			}
			if rev["faults"] == nil || rev["faults"] == 0.0 {
				t.Errorf("no reviewer fault reported: %v\n%s", rev, r)
			}
		}

		// The proxy's upstream dial and the run's resolver.
		hits := o.count()
		name := fmt.Sprintf("uid%d.test", e.id.uid) // each identity's own question
		pol = egPolicy(t, e, []string{o.addr, name + ":80"}, nil, nil, "[network]\nresolver = \""+dns.addr+"\"")
		r = e.sandboxdOpts(runOpts{env: vars}, "run", "--daemon", "--policy", pol, "-c", fmt.Sprintf(
			"echo ORIGIN $(curl -s -m 10 -o /dev/null -w '%%{http_code}' http://%s/)\n"+
				"curl -s -m 5 -o /dev/null http://%s/\necho END\n", o.addr, name))
		netRan(t, r)
		if root {
			if o.count() != hits+1 || !strings.Contains(r.stdout, "ORIGIN 200") {
				t.Errorf("root's run did not reach the root-only origin: %s\n%s", o.summary(), r)
			}
			if !dns.asked(name) {
				t.Errorf("root's run never asked the root-only DNS server: %v\n%s", dns.queries(), r)
			}
		} else {
			if o.count() != hits || strings.Contains(r.stdout, "ORIGIN 200") {
				t.Errorf("a run of uid %d reached the root-only origin through the daemon: %s\n%s", e.id.uid, o.summary(), r)
			}
			if dns.asked(name) {
				t.Errorf("a run of uid %d asked the root-only DNS server through the daemon", e.id.uid)
			}
		}
	})
}
